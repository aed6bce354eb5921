// `bertft validate`.
#include <fmt/format.h>

#include "bert/common/log.h"
#include "recipes/runner/command.h"
#include "recipes/runner/recipe.h"
#include "recipes/runner/run_dir.h"
#include "recipes/runner/sweep.h"
#include "recipes/runner/trial.h"

namespace bert::recipes {

CommandRun setup_validate(CLI::App& app, const GlobalOptions&) {
  struct Args {
    std::string recipe;
    std::vector<std::string> overrides;
  };
  auto a = std::make_shared<Args>();
  app.add_option("recipe", a->recipe, "Recipe YAML")->required();
  app.add_option("--set", a->overrides, "Override a recipe key: key=value (dotted key)");
  return [a] {
    const auto recipe = load_recipe(a->recipe, a->overrides);
    const auto trials = expand_sweep(recipe);
    // The recipe is well formed; now its inputs: model directory and every data split.
    const auto problems = input_problems(recipe, /*read_data=*/true);
    for (const auto& problem : problems) log::error("{}", problem);
    if (!problems.empty()) {
      log::error("{}: {} problem(s) in the model or data", a->recipe, problems.size());
      return code(ExitCode::kFailed);
    }
    fmt::print("{}: valid; task {}, {} trial(s), output {}\n", a->recipe, recipe.task_type,
               trials.size(), recipe.output.dir.string());
    for (const auto& t : trials) fmt::print("  {}\n", t.name);
    return code(ExitCode::kOk);
  };
}

}  // namespace bert::recipes
