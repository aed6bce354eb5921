#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "recipes/runner/leaderboard.h"
#include "recipes/runner/recipe.h"

namespace bert::recipes {

/// One point of a sweep: the recipe with the grid values and seed applied.
struct Trial {
  std::string name;  ///< directory name, e.g. "lr5e-5_ep3_bs32_seed1"
  std::vector<std::pair<std::string, std::string>>
      hyperparameters;  ///< grid key -> value text, then "seed"
  Recipe recipe;        ///< validated; `recipe.root` has no sweep section (what recipe.yaml holds)
};

/// The trials of `recipe`: the cross product of sweep.grid (in file order, last key fastest)
/// times sweep.seeds (default: training.seed). A recipe without a sweep is one trial. Every
/// trial is validated (data files too, unless `check_files` is false); all problems are
/// reported together in one ConfigError.
std::vector<Trial> expand_sweep(const Recipe& recipe, bool check_files = true);

struct SweepOptions {
  int jobs = 0;         ///< trials in parallel; 0 = the recipe's sweep.jobs
  int shard_index = 0;  ///< run trials whose index % shard_count == shard_index
  int shard_count = 1;
  int threads = 0;  ///< total intra-op threads to split between jobs (0 = all cores)
  std::filesystem::path executable;  ///< the bertft binary that runs each trial ("train")
  bool feature_cache = true;         ///< false: every trial tokenises its data itself (benchmarks)
};

/// Runs a sweep in recipe.output.dir (SweepDir): the plan, a TrialDir per trial, the feature
/// cache (filled once before the trials start), then the leaderboard and, when every trial of
/// the plan is done and output.export is set, the best model exported to best_model/.
/// Finished trials are skipped; an interrupted trial resumes from its checkpoint; a failing
/// trial (exception, crash or signal) is recorded as failed and the sweep goes on. Each trial
/// runs as a child process (`bertft train`, with --nproc for sweep.nproc_per_trial > 1),
/// `jobs` at a time with threads split between them; a trial whose lock another process holds
/// (a second sweep on the same directory, another machine of a shared filesystem) is left to
/// it. The children die with the sweep; SIGINT / SIGTERM (after install_stop_signals()) is
/// forwarded to them and ends the sweep after they checkpoint. Returns 0 when every trial of
/// the shard is done or left to another process, 130/143 when stopped by SIGINT/SIGTERM, 1
/// when a trial failed or stopped.
int run_sweep(const Recipe& recipe, const SweepOptions& options);

}  // namespace bert::recipes
