#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bert/common/yaml.h"

/// Entity-level precision / recall / F1 for tagged sequences, as conlleval and seqeval compute
/// them, plus conversion between tag schemes.
namespace bert::tasks::metrics {

enum class TagScheme {
  kIob1,   ///< I-X inside; B-X only between two adjacent X entities (original CoNLL-2003)
  kIob2,   ///< B-X begins every entity (the usual CoNLL-2003 release, HF's)
  kIobes,  ///< S-X single, B-X I-X* E-X longer entities
};

/// An entity: type and the [begin, end] word range (inclusive, over the concatenated input).
struct Entity {
  std::string type;
  int64_t begin = 0, end = 0;
  bool operator==(const Entity& o) const {
    return type == o.type && begin == o.begin && end == o.end;
  }
  bool operator<(const Entity& o) const {
    return std::tie(begin, end, type) < std::tie(o.begin, o.end, o.type);
  }
};

/// Entities of the sentences joined with an "O" between them (seqeval's get_entities, i.e.
/// conlleval's chunk rules: any of IOB1/IOB2/IOBES is read leniently; "X" without prefix is
/// tag X of type "_").
std::vector<Entity> lenient_entities(const std::vector<std::vector<std::string>>& sentences);

/// Only well-formed entities of `scheme` (seqeval mode="strict"): IOB2 B-X I-X*, IOBES S-X or
/// B-X I-X* E-X; IOB1 is converted to IOB2 first.
std::vector<Entity> strict_entities(const std::vector<std::vector<std::string>>& sentences,
                                    TagScheme scheme);

struct PrfCounts {
  int64_t predicted = 0, gold = 0, correct = 0;
  double precision() const { return predicted ? static_cast<double>(correct) / predicted : 0.0; }
  double recall() const { return gold ? static_cast<double>(correct) / gold : 0.0; }
  double f1() const {
    const double p = precision(), r = recall();
    return p + r > 0 ? 2 * p * r / (p + r) : 0.0;
  }
};

struct EntityScores {
  PrfCounts overall;
  std::map<std::string, PrfCounts> by_type;  ///< every type seen in gold or predictions
  int64_t tokens = 0, correct_tokens = 0;    ///< token accuracy (conlleval's "accuracy")
  double accuracy() const { return tokens ? static_cast<double>(correct_tokens) / tokens : 0.0; }
};

/// Scores predicted tags against gold tags (same shapes; std::invalid_argument otherwise).
/// `strict` with `scheme` counts only well-formed entities.
EntityScores score_entities(const std::vector<std::vector<std::string>>& gold,
                            const std::vector<std::vector<std::string>>& predicted,
                            bool strict = false,
                            TagScheme scheme = TagScheme::kIob2);

/// The report conlleval prints (processed tokens, accuracy, overall and per-type P/R/F1).
std::string conlleval_report(const EntityScores& scores);

/// Rewrites one sentence's tags from one scheme to another (entities preserved).
std::vector<std::string> convert_tags(const std::vector<std::string>& tags,
                                      TagScheme from,
                                      TagScheme to);

}  // namespace bert::tasks::metrics

namespace bert {
template <>
struct EnumNames<tasks::metrics::TagScheme> {
  static const std::vector<std::pair<const char*, tasks::metrics::TagScheme>>& get();
};
}  // namespace bert
