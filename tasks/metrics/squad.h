#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

/// SQuAD's official evaluation (evaluate-v1.1.py and evaluate-v2.0.py), re-implemented: the
/// same answer normalisation, exact match, token F1, HasAns/NoAns split and best threshold.
namespace bert::tasks::metrics {

/// Lower-case, drop ASCII punctuation, drop the words a/an/the, collapse whitespace — as the
/// official scripts' normalize_answer() (Unicode lower-casing and whitespace, Python's rules).
std::string normalize_answer(const std::string& text);

/// 1 if the normalised strings are equal.
double squad_exact(const std::string& prediction, const std::string& gold);

/// Token-level F1 of the normalised answers, by the rule of the official script of its
/// version: v2.0 gives 1 when both sides have no tokens (and 0 when one has); v1.1 gives 0
/// whenever no token is shared, two empty answers included.
double squad_f1(const std::string& prediction, const std::string& gold, bool v2 = true);

/// One question's gold data.
struct SquadGold {
  std::string id;
  std::vector<std::string> answers;  ///< texts; empty for an unanswerable v2.0 question
  bool is_impossible = false;
};

/// Scores a prediction map {id: answer text} like the official script of `version` ("1.1"
/// or "2.0"): v1.1 -> {"exact_match", "f1"}; v2.0 -> {"exact", "f1", "total", "HasAns_exact",
/// "HasAns_f1", "HasAns_total", "NoAns_..."} and, with `na_probs` {id: no-answer score}, the
/// best threshold: "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh". Scores are
/// percentages. A question without prediction scores 0 (v1.1's rule; counted in "missing").
nlohmann::json score_squad(const std::vector<SquadGold>& gold,
                           const std::map<std::string, std::string>& predictions,
                           const std::string& version,
                           const std::map<std::string, double>* na_probs = nullptr,
                           double na_prob_threshold = 1.0);

}  // namespace bert::tasks::metrics
