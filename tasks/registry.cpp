#include "tasks/registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "bert/common/error.h"
#include "tasks/multiple_choice/adapter.h"
#include "tasks/pretraining/adapter.h"
#include "tasks/question_answering/adapter.h"
#include "tasks/sequence_classification/adapter.h"
#include "tasks/token_classification/adapter.h"

namespace bert::tasks {

void TaskRegistry::add(TaskInfo info) {
  if (find(info.name))
    throw std::invalid_argument("task '" + info.name + "' is already registered");
  tasks_.push_back(std::move(info));
}

const TaskInfo* TaskRegistry::find(const std::string& name) const {
  for (const auto& t : tasks_)
    if (t.name == name) return &t;
  return nullptr;
}

const TaskInfo* TaskRegistry::find_by_architecture(const std::string& any_family) const {
  const std::string architecture = bert_architecture(any_family);
  for (const auto& t : tasks_)
    if (std::find(t.architectures.begin(), t.architectures.end(), architecture) !=
        t.architectures.end())
      return &t;
  return nullptr;
}

std::vector<std::string> TaskRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& t : tasks_) out.push_back(t.name);
  return out;
}

std::string TaskRegistry::joined_names(const std::string& separator) const {
  std::string all;
  for (const auto& n : names()) all += (all.empty() ? "" : separator) + n;
  return all;
}

const TaskInfo& TaskRegistry::get(const std::string& name, const std::string& where) const {
  if (const auto* info = find(name)) return *info;
  const auto guess = nearest_key(name, names());
  throw ConfigError(fmt::format("{}: unknown task '{}'{}; available: {}", where, name,
                                guess.empty() ? "" : fmt::format(" (did you mean '{}'?)", guess),
                                joined_names()));
}

std::unique_ptr<TaskAdapter> TaskRegistry::create(const std::string& name,
                                                  const YamlReader& options) const {
  const auto& info = get(name, options.where());
  ErrorList errors;
  auto adapter = info.create(options, errors);
  errors.throw_if_any();
  return adapter;
}

TaskRegistry& TaskRegistry::global() {
  static TaskRegistry registry = [] {
    TaskRegistry r;
    register_builtin_tasks(r);
    return r;
  }();
  return registry;
}

void register_builtin_tasks(TaskRegistry& r) {
  r.add(SequenceClassificationAdapter::info());
  r.add(MultipleChoiceAdapter::info());
  r.add(QuestionAnsweringAdapter::info());
  r.add(TokenClassificationAdapter::info());
  r.add(PretrainingAdapter::info());
}

}  // namespace bert::tasks
