#include "tasks/registry.h"

#include <fmt/format.h>

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

std::vector<std::string> TaskRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& t : tasks_) out.push_back(t.name);
  return out;
}

std::unique_ptr<TaskAdapter> TaskRegistry::create(const std::string& name,
                                                  const YamlReader& options) const {
  const auto* info = find(name);
  if (!info) {
    std::string all;
    for (const auto& n : names()) all += (all.empty() ? "" : ", ") + n;
    const auto guess = nearest_key(name, names());
    throw ConfigError(fmt::format("{}: unknown task '{}'{}; available: {}", options.where(), name,
                                  guess.empty() ? "" : fmt::format(" (did you mean '{}'?)", guess),
                                  all));
  }
  ErrorList errors;
  auto adapter = info->create(options, errors);
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
  r.add({"sequence_classification", "one text or a text pair -> label, or score (num_labels: 1)",
         &SequenceClassificationAdapter::create});
  r.add({"multiple_choice", "context + N candidate endings -> choice (SWAG)",
         &MultipleChoiceAdapter::create});
  r.add({"question_answering", "extractive answer span (SQuAD v1.1 / v2.0)",
         &QuestionAnsweringAdapter::create});
  r.add({"token_classification", "a tag per word (NER; IOB1 / IOB2 / IOBES)",
         &TokenClassificationAdapter::create});
  r.add({"pretraining", "BERT's MLM + NSP pre-training over instance shards (bertft pretrain-data)",
         &PretrainingAdapter::create});
}

}  // namespace bert::tasks
