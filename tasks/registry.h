#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bert/common/yaml.h"
#include "bert/model/bert_config.h"
#include "tasks/scoring.h"
#include "tasks/task_adapter.h"

namespace bert::tasks {

/// Everything about one task family, in one place: the registry is the only table of tasks
/// (recipes, `score`, export and loading HF model directories all ask it). Built-in tasks
/// provide theirs as `Adapter::info()` in their own folder.
struct TaskInfo {
  std::string name;         ///< the recipe's task.type
  std::string description;  ///< one line, for --help and error messages
  /// Reads the recipe's `task` options into the adapter's typed options (unknown keys and bad
  /// values go to `errors`; the adapter is still returned so that every problem of a recipe is
  /// reported together).
  std::function<std::unique_ptr<TaskAdapter>(const YamlReader& options, ErrorList& errors)> create;
  /// Hugging Face model classes of this task: export writes the first; a model directory whose
  /// config.json names any of them loads as this task.
  std::vector<std::string> architectures = {};
  /// The task options that rebuild this task from an HF config.json alone (a directory without
  /// bertft_task.yaml), e.g. {num_labels: 1} for problem_type regression. Null: no options.
  std::function<YAML::Node(const BertConfig& config)> options_from_config = {};
  /// The `task.*` keys it reads (type, default, help) for `bertft recipe-keys`; usually
  /// describe_struct<Options>("task").
  std::function<std::vector<KeyDoc>()> option_docs = {};
  /// Metric names its evaluations report (their directions: metrics::metric_table()).
  std::vector<std::string> metrics = {};
  /// What `bertft score --task <name>` reads (--help text); empty when it has no scorer.
  std::string score_formats = {};
  /// Scores a prediction file against gold data; null when the task has no scorer.
  std::function<ScoreReport(const ScoreRequest&)> score = {};
};

/// Task families by name (rule 6: explicit, complete, listable; no static self-registration).
/// global() holds the built-ins; tests and embedders may add their own.
class TaskRegistry {
 public:
  /// Adds a task; throws std::invalid_argument if the name is taken.
  void add(TaskInfo info);
  const TaskInfo* find(const std::string& name) const;
  /// The task that a model of HF class `architecture` belongs to, or null.
  /// The task of an HF architecture of any family ("RobertaForTokenClassification" finds the
  /// task registered as "BertForTokenClassification").
  const TaskInfo* find_by_architecture(const std::string& architecture) const;
  /// The task `name`, or a ConfigError naming `where`, listing the tasks and suggesting the
  /// nearest name.
  const TaskInfo& get(const std::string& name, const std::string& where) const;
  /// Builds the adapter `name` from `options`. An unknown name is a ConfigError listing the
  /// available tasks (with a spelling suggestion); option problems throw ConfigError too.
  std::unique_ptr<TaskAdapter> create(const std::string& name, const YamlReader& options) const;
  std::vector<std::string> names() const;
  /// The names joined with `separator`.
  std::string joined_names(const std::string& separator = ", ") const;
  const std::vector<TaskInfo>& tasks() const { return tasks_; }

  /// The registry with every built-in task (created once, thread-safe).
  static TaskRegistry& global();

 private:
  std::vector<TaskInfo> tasks_;
};

/// Adds sequence_classification, multiple_choice, question_answering, token_classification,
/// pretraining.
void register_builtin_tasks(TaskRegistry& registry);

}  // namespace bert::tasks
