// `bertft export`.
#include "recipes/runner/export.h"

#include "recipes/runner/command.h"

namespace bert::recipes {

CommandRun setup_export(CLI::App& app, const GlobalOptions&) {
  struct Args {
    std::string run, out;
  };
  auto a = std::make_shared<Args>();
  app.add_option("run", a->run, "Sweep or trial directory")
      ->required()
      ->check(CLI::ExistingDirectory);
  app.add_option("--out", a->out, "Output directory")->required();
  return [a] {
    export_model(a->run, a->out);
    return 0;
  };
}

}  // namespace bert::recipes
