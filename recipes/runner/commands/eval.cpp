// `bertft eval`.
#include "recipes/runner/command.h"
#include "recipes/runner/export.h"

namespace bert::recipes {

CommandRun setup_eval(CLI::App& app, const GlobalOptions&) {
  struct Args {
    std::string model, recipe;
    std::vector<std::string> overrides;
    std::string split = "dev";
  };
  auto a = std::make_shared<Args>();
  app.add_option("--model", a->model, "Fine-tuned model directory")
      ->required()
      ->check(CLI::ExistingDirectory);
  app.add_option("--recipe", a->recipe, "Recipe YAML")->required();
  app.add_option("--set", a->overrides, "Override a recipe key: key=value (dotted key)");
  app.add_option("--split", a->split,
                 "dev | test (the recipe's data.test, labelled) | a name of its data.extra_dev");
  return [a] { return run_eval(a->model, a->recipe, a->overrides, a->split); };
}

}  // namespace bert::recipes
