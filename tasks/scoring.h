#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data/data_spec.h"

/// `bertft score`'s contract: a task's scorer reads a prediction file in its dataset's official
/// format and computes the official metrics against the gold data. Each task registers its
/// scorer in TaskInfo::score; these are the inputs and helpers they share.
namespace bert::tasks {

/// What the user gave `bertft score` (each scorer reads the fields it needs).
struct ScoreRequest {
  std::filesystem::path data;         ///< the gold dataset file (may be empty if optional)
  std::filesystem::path predictions;  ///< the predictions
  std::string format = "auto";        ///< data format (as the recipe's data.format)
  std::string glue_task;              ///< GLUE task when not clear from the directory
  std::filesystem::path na_probs;     ///< SQuAD v2.0: {id: no-answer probability} (optional)
  double na_prob_threshold = 1.0;
  std::string tag_scheme = "iob2";    ///< token tagging: scheme for `strict`
  bool strict = false;                ///< token tagging: seqeval strict mode
  bool regression = false;            ///< classification: score correlation
  std::string positive_label;         ///< binary F1's positive class (default "1")
  bool multi_label = false;           ///< classification: sets of labels (also when predicted)
  std::string label_separator = ",";  ///< multi-label: what joins a label cell's labels
};

/// A scorer's answer: the metrics, and a human-readable report printed before them (conlleval's
/// for token tagging; may be empty).
struct ScoreReport {
  nlohmann::json metrics;
  std::string text;
};

/// The DataSpec of `request` (path, format, GLUE task); throws ConfigError for an unknown
/// format. With `task`, an empty data path is a ConfigError saying the task needs --data.
data::DataSpec score_data_spec(const ScoreRequest& request, const std::string& task = "");

/// One prediction of a line-per-example file: plain text, or JSONL with "label" / "labels" (a
/// multi-label list, kept as its JSON text) / "prediction" / "score" and an optional "id".
struct LinePrediction {
  std::optional<std::string> id;
  std::string value;
  std::string where;  ///< file:line
};

/// The predictions of a line-per-example file (blank lines skipped). Throws DataError naming
/// file:line.
std::vector<LinePrediction> read_line_predictions(const std::filesystem::path& path);

/// Prediction values in the order of `example_ids`: by id when every prediction has one, else
/// by position (then the counts must match). `wheres` name the examples in messages.
std::vector<std::string> align_predictions(const std::vector<std::string>& example_ids,
                                           const std::vector<std::string>& wheres,
                                           const std::vector<LinePrediction>& predictions,
                                           const std::filesystem::path& path);

/// The prediction file's values in the order of `examples` (any example type with `id` and
/// `where`), by id or by position as align_predictions().
template <class Example>
std::vector<std::string> predictions_for(const std::vector<Example>& examples,
                                         const ScoreRequest& request) {
  std::vector<std::string> ids, wheres;
  for (const auto& e : examples) {
    ids.push_back(e.id);
    wheres.push_back(e.where);
  }
  return align_predictions(ids, wheres, read_line_predictions(request.predictions),
                           request.predictions);
}

/// `text` as a number; DataError "where: 'text' is not a number" otherwise.
double parse_score_number(const std::string& text, const std::string& where);

}  // namespace bert::tasks
