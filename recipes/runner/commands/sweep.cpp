// `bertft sweep`.
#include "recipes/runner/sweep.h"

#include <fmt/format.h>

#include <cstdlib>

#include "bert/common/error.h"
#include "bert/common/signals.h"
#include "bert/common/strings.h"
#include "recipes/runner/command.h"
#include "recipes/runner/recipe.h"

namespace bert::recipes {
namespace {

/// --shard, else a Slurm array's task: the SLURM_ARRAY_TASK_ID's place among the
/// SLURM_ARRAY_TASK_COUNT ids from SLURM_ARRAY_TASK_MIN in steps of SLURM_ARRAY_TASK_STEP (an
/// array of a range, --array=0-7 or 0-14:2), else 0/1.
std::pair<int, int> shard_of(const std::string& option) {
  if (!option.empty()) return parse_shard(option);
  if (std::getenv("SLURM_ARRAY_TASK_ID") == nullptr ||
      std::getenv("SLURM_ARRAY_TASK_COUNT") == nullptr)
    return {0, 1};
  const auto number = [](const char* name, int otherwise) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') return otherwise;
    if (const auto v = parse_count(value)) return *v;
    throw ConfigError(fmt::format(
        "environment variable {}='{}' is not a count; give the shard as --shard i/N", name, value));
  };
  const int id = number("SLURM_ARRAY_TASK_ID", 0), tasks = number("SLURM_ARRAY_TASK_COUNT", 0);
  const int min = number("SLURM_ARRAY_TASK_MIN", 0), step = number("SLURM_ARRAY_TASK_STEP", 1);
  const int offset = id - min;
  if (step < 1 || offset < 0 || offset % step != 0 || offset / step >= tasks)
    throw ConfigError(fmt::format(
        "Slurm array task {} is not one of the {} ids from SLURM_ARRAY_TASK_MIN {} in steps of "
        "{}: bertft takes a task's shard from an array of a range (--array=0-7, 0-14:2); give "
        "others --shard i/N",
        id, tasks, min, step));
  return {offset / step, tasks};
}

}  // namespace

CommandRun setup_sweep(CLI::App& app, const GlobalOptions& global) {
  struct Args {
    std::string recipe, shard;
    std::vector<std::string> overrides;
    int jobs = 0;
    bool no_cache = false;
  };
  auto a = std::make_shared<Args>();
  app.add_option("recipe", a->recipe, "Recipe YAML")->required();
  app.add_option("--set", a->overrides, "Override a recipe key: key=value (dotted key)");
  app.add_option("--jobs", a->jobs, "Trials in parallel (threads are split between them)")
      ->check(non_negative());
  app.add_option("--shard", a->shard,
                 "Run the trials i, i+N, ... of N (for several machines): i/N; default: the "
                 "Slurm array task (SLURM_ARRAY_TASK_ID of SLURM_ARRAY_TASK_COUNT), else 0/1");
  app.add_flag("--no-cache", a->no_cache,
               "Every trial tokenises its data itself (no shared feature cache)");
  return [a, &global] {
    SweepOptions options;
    std::tie(options.shard_index, options.shard_count) = shard_of(a->shard);  // before the recipe
    const auto recipe = load_recipe(a->recipe, a->overrides);
    options.jobs = a->jobs;
    options.threads = global.threads;
    options.feature_cache = !a->no_cache;
    install_stop_signals();
    return run_sweep(recipe, options);
  };
}

}  // namespace bert::recipes
