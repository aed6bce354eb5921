#pragma once

#include <string>

#include "tasks/scoring.h"

namespace bert::recipes {

/// `bertft score`: scores a prediction file in a dataset's official format with the scorer
/// that the task registry holds for `task`.
struct ScoreOptions {
  std::string task;  ///< a registered task with a scorer
  tasks::ScoreRequest request;
};

/// Prints the scorer's report (if any) and the metrics as JSON on stdout. Returns the exit
/// code; bad files throw DataError / ConfigError naming file and line.
int run_score(const ScoreOptions& options);

}  // namespace bert::recipes
