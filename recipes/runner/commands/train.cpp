// `bertft train`: one trial; data-parallel under torchrun / srun, or with --nproc N.
#include <fmt/format.h>

#include <thread>

#include "bert/common/error.h"
#include "bert/common/signals.h"
#include "bert/common/threads.h"
#include "recipes/runner/command.h"
#include "recipes/runner/launch.h"
#include "recipes/runner/recipe.h"
#include "recipes/runner/run_dir.h"
#include "recipes/runner/trial.h"
#include "tasks/training/distributed.h"

namespace bert::recipes {
namespace {

namespace fs = std::filesystem;

struct TrainArgs {
  std::string recipe, out, cache, trial_name;
  std::vector<std::string> overrides;
  bool no_cache = false;
  int nproc = 1;
};

int run_train(const TrainArgs& a, const GlobalOptions& global) {
  auto recipe = load_recipe(a.recipe, a.overrides);
  const auto env = tasks::DistributedEnv::from_environment();
  const SweepDir sweep(recipe.output.dir);
  const TrialDir out = a.out.empty() ? sweep.train_run() : TrialDir(a.out);
  const fs::path cache = a.no_cache        ? fs::path()
                         : a.cache.empty() ? sweep.cache()
                                           : fs::path(a.cache);
  if (!cache.empty() && fs::exists(cache) && !fs::is_directory(cache))
    throw ConfigError(
        fmt::format("--cache {}: is a file; the feature cache is a directory", cache.string()));
  if (!keep_resolved_recipe(out.root(), recipe))
    throw ConfigError(fmt::format("{}: holds a different recipe; use another --out or delete it",
                                  out.recipe().string()));
  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (a.nproc > 1) {
    if (env.distributed())
      throw ConfigError(fmt::format(
          "--nproc {}: this process is already rank {} of {} (set by {}); start it without "
          "--nproc",
          a.nproc, env.rank, env.world_size, env.source));
    // The workers share the features: tokenise once, here.
    if (!cache.empty()) prepare_task(recipe, cache);
    std::vector<std::string> command = {"train", a.recipe, "--out", out.root().string()};
    for (const auto& o : a.overrides) command.insert(command.end(), {"--set", o});
    if (cache.empty()) {
      command.push_back("--no-cache");
    } else {
      command.insert(command.end(), {"--cache", cache.string()});
    }
    if (!a.trial_name.empty()) command.insert(command.end(), {"--trial-name", a.trial_name});
    const int total = global.threads > 0            ? global.threads
                      : recipe.training.threads > 0 ? static_cast<int>(recipe.training.threads)
                                                    : hardware;
    return launch_local_workers(a.nproc, command, total, global.verbose);
  }
  if (global.threads == 0) {
    if (recipe.training.threads > 0) {
      configure_threads(static_cast<int>(recipe.training.threads));
    } else if (env.distributed()) {  // the cores of this node, shared by its workers
      configure_threads(std::max(1, hardware / env.local_world_size));
    }
  }
  std::shared_ptr<tasks::DataParallel> group;
  if (env.distributed()) {
    torch::Device device(recipe.training.device);
    if (device.is_cuda()) {  // one GPU per local worker
      device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank));
      recipe.training.device = device.str();
    }
    tasks::DataParallelOptions options;
    options.timeout = std::chrono::seconds(recipe.training.dist_timeout);
    group = tasks::DataParallel::connect(env, device, options);
  }
  return code(
      run_trial(recipe, out, cache, a.trial_name.empty() ? recipe.name : a.trial_name, group));
}

}  // namespace

CommandRun setup_train(CLI::App& app, const GlobalOptions& global) {
  auto a = std::make_shared<TrainArgs>();
  app.add_option("recipe", a->recipe, "Recipe YAML")->required();
  app.add_option("--set", a->overrides, "Override a recipe key: key=value (dotted key)");
  app.add_option("--out", a->out, "Run directory (default <output.dir>/train)");
  app.add_option("--cache", a->cache, "Feature cache directory (default <output.dir>/cache)");
  app.add_option("--trial-name", a->trial_name, "Name recorded in result.json (set by sweep)");
  app.add_flag("--no-cache", a->no_cache, "Tokenise the data without the feature cache");
  app.add_option("--nproc", a->nproc,
                 "Data-parallel on N local processes (threads split between them); under "
                 "torchrun or srun the environment says it instead")
      ->check(positive());
  return [a, &global] {
    install_stop_signals();  // SIGINT / SIGTERM: checkpoint at the next step, exit 130 / 143
    return run_train(*a, global);
  };
}

}  // namespace bert::recipes
