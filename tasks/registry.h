#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bert/common/yaml.h"
#include "tasks/task_adapter.h"

namespace bert::tasks {

/// One task family the registry can build. `create` reads the recipe's `task` options
/// (unknown keys and bad values go to `errors`; the adapter is still returned so that every
/// problem of a recipe is reported together).
struct TaskInfo {
  std::string name;
  std::string description;
  std::function<std::unique_ptr<TaskAdapter>(const YamlReader& options, ErrorList& errors)> create;
};

/// Task families by name (rule 6: explicit, complete, listable; no static self-registration).
/// global() holds the built-ins; tests and embedders may add their own.
class TaskRegistry {
 public:
  /// Adds a task; throws std::invalid_argument if the name is taken.
  void add(TaskInfo info);
  const TaskInfo* find(const std::string& name) const;
  /// Builds the adapter `name` from `options`. An unknown name is a ConfigError listing the
  /// available tasks (with a spelling suggestion); option problems throw ConfigError too.
  std::unique_ptr<TaskAdapter> create(const std::string& name, const YamlReader& options) const;
  std::vector<std::string> names() const;
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
