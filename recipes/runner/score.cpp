#include "recipes/runner/score.h"

#include <fmt/format.h>

#include <iostream>

#include "bert/common/error.h"
#include "tasks/registry.h"

namespace bert::recipes {

int run_score(const ScoreOptions& o) {
  const auto& registry = tasks::TaskRegistry::global();
  const auto& info = registry.get(o.task, "score --task");
  if (!info.score) {
    std::string scorable;
    for (const auto& t : registry.tasks())
      if (t.score) scorable += (scorable.empty() ? "" : ", ") + t.name;
    throw ConfigError(fmt::format("score --task {}: the task has no scorer; tasks with one: {}",
                                  o.task, scorable));
  }
  const auto report = info.score(o.request);
  std::cout << report.text << report.metrics.dump(2) << '\n';
  return 0;
}

}  // namespace bert::recipes
