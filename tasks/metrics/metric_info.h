#pragma once

#include <string>
#include <vector>

/// The metric table: every metric a built-in task reports, with the direction that makes it
/// better. Best-checkpoint selection, early stopping, the leaderboard and the sweep's export all
/// read directions from here (through TaskAdapter::main_metric_goal()).
namespace bert::tasks::metrics {

/// Whether a larger or a smaller value of a metric is better.
enum class MetricGoal {
  kMaximize,  ///< scores: accuracy, F1, correlations
  kMinimize,  ///< errors and losses: mse, mlm_loss
};

struct MetricInfo {
  std::string name;
  MetricGoal goal;
  std::string description;
};

/// Every built-in metric, in a stable order.
const std::vector<MetricInfo>& metric_table();

/// The entry for `name`, or null when the table has none.
const MetricInfo* find_metric(const std::string& name);

/// The goal of `name`: the table's, else kMaximize (a score) for names it does not list.
MetricGoal metric_goal(const std::string& name);

/// True when `candidate` is strictly better than `best` under `goal`.
bool improves(MetricGoal goal, double candidate, double best);

/// "maximize" / "minimize" (the text of result.json and leaderboard.json).
const char* goal_name(MetricGoal goal);

}  // namespace bert::tasks::metrics
