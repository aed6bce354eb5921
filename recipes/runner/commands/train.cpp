// `bertft train`.
#include <fmt/format.h>

#include "bert/common/error.h"
#include "bert/common/threads.h"
#include "recipes/runner/command.h"
#include "recipes/runner/recipe.h"
#include "recipes/runner/run_dir.h"
#include "recipes/runner/trial.h"

namespace bert::recipes {

CommandRun setup_train(CLI::App& app, const GlobalOptions& global) {
  struct Args {
    std::string recipe, out, cache, trial_name;
    std::vector<std::string> overrides;
    bool no_cache = false;
  };
  auto a = std::make_shared<Args>();
  app.add_option("recipe", a->recipe, "Recipe YAML")->required();
  app.add_option("--set", a->overrides, "Override a recipe key: key=value (dotted key)");
  app.add_option("--out", a->out, "Run directory (default <output.dir>/train)");
  app.add_option("--cache", a->cache, "Feature cache directory (default <output.dir>/cache)");
  app.add_option("--trial-name", a->trial_name, "Name recorded in result.json (set by sweep)");
  app.add_flag("--no-cache", a->no_cache, "Tokenise the data without the feature cache");
  return [a, &global] {
    namespace fs = std::filesystem;
    const auto recipe = load_recipe(a->recipe, a->overrides);
    if (global.threads == 0 && recipe.training.threads > 0)
      configure_threads(static_cast<int>(recipe.training.threads));
    const SweepDir sweep(recipe.output.dir);
    const TrialDir out = a->out.empty() ? sweep.train_run() : TrialDir(a->out);
    const fs::path cache = a->no_cache        ? fs::path()
                           : a->cache.empty() ? sweep.cache()
                                              : fs::path(a->cache);
    if (!keep_resolved_recipe(out.root(), recipe))
      throw ConfigError(fmt::format("{}: holds a different recipe; use another --out or delete it",
                                    out.recipe().string()));
    return code(run_trial(recipe, out, cache, a->trial_name.empty() ? recipe.name : a->trial_name));
  };
}

}  // namespace bert::recipes
