#pragma once

#include <filesystem>
#include <string>

namespace bert::recipes {

/// `bertft score`: scores a prediction file in a dataset's official format.
struct ScoreOptions {
  std::string task;            ///< sequence_classification | multiple_choice | question_answering |
                               ///< token_classification
  std::filesystem::path data;  ///< the gold dataset file
  std::filesystem::path predictions;  ///< the predictions
  std::string format = "auto";        ///< data format (as the recipe's data.format)
  std::string glue_task;              ///< GLUE task when not clear from the directory
  std::filesystem::path na_probs;     ///< SQuAD v2.0: {id: no-answer probability} (optional)
  double na_prob_threshold = 1.0;
  std::string tag_scheme = "iob2";  ///< token_classification: scheme for --strict
  bool strict = false;              ///< token_classification: seqeval strict mode
  bool regression = false;          ///< sequence_classification: score correlation
  std::string positive_label;       ///< binary F1's positive class (default "1")
};

/// Prints the metrics as JSON on stdout (token_classification: conlleval's report first).
/// Returns the exit code; bad files throw DataError / ConfigError naming file and line.
int run_score(const ScoreOptions& options);

}  // namespace bert::recipes
