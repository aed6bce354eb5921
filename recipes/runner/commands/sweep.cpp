// `bertft sweep`.
#include "recipes/runner/sweep.h"

#include "recipes/runner/command.h"
#include "recipes/runner/recipe.h"

namespace bert::recipes {

CommandRun setup_sweep(CLI::App& app, const GlobalOptions& global) {
  struct Args {
    std::string recipe, shard = "0/1";
    std::vector<std::string> overrides;
    int jobs = 0;
    bool no_cache = false;
  };
  auto a = std::make_shared<Args>();
  app.add_option("recipe", a->recipe, "Recipe YAML")->required();
  app.add_option("--set", a->overrides, "Override a recipe key: key=value (dotted key)");
  app.add_option("--jobs", a->jobs, "Trials in parallel (threads are split between them)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--shard", a->shard,
                 "Run the trials i, i+N, ... of N (for several machines): i/N");
  app.add_flag("--no-cache", a->no_cache,
               "Every trial tokenises its data itself (no shared feature cache)");
  return [a, &global] {
    const auto recipe = load_recipe(a->recipe, a->overrides);
    SweepOptions options;
    options.jobs = a->jobs;
    options.threads = global.threads;
    options.feature_cache = !a->no_cache;
    std::tie(options.shard_index, options.shard_count) = parse_shard(a->shard);
    return run_sweep(recipe, options);
  };
}

}  // namespace bert::recipes
