// `bertft leaderboard`: (re)builds a sweep's leaderboard and best export from whatever trials
// are finished (shards of a sweep finish on different machines).
#include "recipes/runner/leaderboard.h"

#include <fmt/format.h>

#include <iostream>

#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "recipes/runner/command.h"
#include "recipes/runner/export.h"
#include "recipes/runner/run_dir.h"

namespace bert::recipes {

CommandRun setup_leaderboard(CLI::App& app, const GlobalOptions&) {
  struct Args {
    std::string dir;
    bool no_export = false;
  };
  auto a = std::make_shared<Args>();
  app.add_option("run", a->dir, "Sweep directory (a recipe's output.dir)")
      ->required()
      ->check(CLI::ExistingDirectory);
  app.add_flag("--no-export", a->no_export,
               "Only the leaderboard; do not export the best finished trial to best_model/");
  return [a] {
    const SweepDir dir(a->dir);
    if (!std::filesystem::exists(dir.plan()))
      throw ConfigError(fmt::format("{}: no plan.json; not a sweep directory", a->dir));
    const auto board = write_leaderboard(dir.root());
    std::cout << read_file(dir.leaderboard("md"));
    if (!board.contains("best")) return code(ExitCode::kFailed);  // nothing finished yet
    if (!a->no_export)
      export_model(dir.trial(board["best"]["trial"].get<std::string>()).root(), dir.best_model());
    return code(ExitCode::kOk);
  };
}

}  // namespace bert::recipes
