#include "recipes/runner/sweep.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/log.h"
#include "bert/common/signals.h"
#include "bert/common/threads.h"
#include "recipes/runner/export.h"
#include "recipes/runner/process.h"
#include "recipes/runner/run_dir.h"
#include "recipes/runner/trial.h"

namespace bert::recipes {
namespace {

namespace fs = std::filesystem;

std::string short_key(const std::string& key) {
  static const std::map<std::string, std::string> names = {
      {"learning_rate", "lr"}, {"epochs", "ep"},       {"batch_size", "bs"},
      {"warmup_ratio", "wr"},  {"weight_decay", "wd"}, {"gradient_accumulation_steps", "acc"},
      {"seed", "seed"}};
  const auto it = names.find(key);
  if (it != names.end()) return it->second;
  const auto dot = key.rfind('.');
  return dot == std::string::npos ? key : key.substr(dot + 1);
}

/// The sweep's overall progress line after each trial: trials ended of those this process runs,
/// time so far and the time left at the pace so far (trials in parallel included).
class SweepProgress {
 public:
  explicit SweepProgress(size_t to_run) : to_run_(to_run) {}
  void ended() {
    ++ended_;
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const auto left = to_run_ > ended_ ? to_run_ - ended_ : 0;
    log::info("[sweep] {}/{} trials ended | {} elapsed | {}", ended_, to_run_,
              log::format_duration(elapsed),
              left == 0 ? std::string("all ended")
                        : "eta " + log::format_duration(elapsed / static_cast<double>(ended_) *
                                                        static_cast<double>(left)));
  }

 private:
  size_t to_run_;
  size_t ended_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

std::string safe_value(const std::string& text) {
  std::string out;
  for (const char c : text)
    out +=
        (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+') ? c : '_';
  return out;
}

std::string value_text(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar();
  YAML::Emitter e;
  e << YAML::Flow << node;
  return e.c_str();
}

/// How a sweep's trial process ended.
enum class TrialEnd { kDone, kStopped, kBusy, kFailed };

/// Says how the trial process of `t` ended (exit `status`) and, when it died before it could
/// write its result, writes a failed result with the end of its log.
TrialEnd report_trial_end(const TrialDir& trial, const Trial& t, int status) {
  const auto exit = child_exit(status);
  const auto done = [&](const std::optional<TrialResult>& result) {
    if (!result || !result->done()) return false;
    std::string extra;  // data.extra_dev's main metric beside dev's
    for (const auto& [name, spec] : t.recipe.data.extra_dev)
      if (const auto it = result->metrics.find(result->main_metric + "_" + name);
          it != result->metrics.end())
        extra += fmt::format(", {} {:.4f}", it->first, it->second);
    log::info("[sweep] {}: done, {} {:.4f}{} ({:.0f}s)", t.name, result->main_metric,
              result->score(), extra, result->seconds);
    return true;
  };
  if (done(TrialResult::read(trial))) return TrialEnd::kDone;  // by this child, or another process
  if (exit.exited && stopped(exit.code)) {
    log::warn("[sweep] {}: stopped after a checkpoint; rerun the sweep to resume it", t.name);
    return TrialEnd::kStopped;
  }
  if (FileLock::holder(trial.lock())) {  // the child lost the race for the trial's lock
    log::info("[sweep] {}: taken by another process; skipped", t.name);
    return TrialEnd::kBusy;
  }
  // Read again: the process that won the lock may have finished between the two looks.
  const auto result = TrialResult::read(trial);
  if (done(result)) return TrialEnd::kDone;
  if (!result) {  // it died before it could say why
    TrialResult failed;
    failed.trial = t.name;
    failed.task = t.recipe.task_type;
    failed.error = fmt::format("{}; last lines of {}:\n{}", exit.describe(),
                               trial.log().filename().string(), last_lines(trial.log(), 5));
    failed.write(trial);
  }
  const auto error = TrialResult::read(trial)->error;
  log::error("[sweep] {}: failed ({}): {}", t.name, exit.describe(),
             error.substr(0, error.find('\n')));
  return TrialEnd::kFailed;
}

}  // namespace

std::vector<Trial> expand_sweep(const Recipe& recipe, bool check_files) {
  const auto& grid = recipe.sweep.grid;
  const std::vector<int64_t> seeds =
      recipe.sweep.seeds.empty() ? std::vector<int64_t>{recipe.training.seed} : recipe.sweep.seeds;
  std::vector<Trial> trials;
  std::vector<std::string> problems;
  std::vector<size_t> index(grid.size(), 0);
  while (true) {
    for (const auto seed : seeds) {
      YAML::Node root = YAML::Clone(recipe.root);
      root.remove("sweep");
      Trial trial;
      std::string name;
      for (size_t k = 0; k < grid.size(); ++k) {
        const auto& [key, values] = grid[k];
        const auto& value = values[index[k]];
        // A copy of the value: assigning the recipe's own node would tie each trial's document
        // to the recipe's, which then holds every trial's nodes (memory quadratic in trials).
        set_path(root, key.find('.') == std::string::npos ? "training." + key : key,
                 YAML::Clone(value));
        trial.hyperparameters.emplace_back(key, value_text(value));
        name += short_key(key) + safe_value(value_text(value)) + "_";
      }
      set_path(root, "training.seed", YAML::Node(seed));
      trial.hyperparameters.emplace_back("seed", std::to_string(seed));
      trial.name = name + "seed" + std::to_string(seed);
      try {
        trial.recipe = parse_recipe(root, recipe.file, {}, check_files);
        trials.push_back(std::move(trial));
      } catch (const ConfigError& e) {
        for (const auto& p : e.problems())
          if (std::find(problems.begin(), problems.end(), p) == problems.end())
            problems.push_back(fmt::format("{} (trial {})", p, trial.name));
      }
    }
    // Odometer over the grid, last key fastest.
    size_t k = grid.size();
    while (k > 0 && ++index[k - 1] == grid[k - 1].second.size()) index[--k] = 0;
    if (k == 0) break;
  }
  if (!problems.empty()) throw ConfigError(problems);
  std::set<std::string> names;
  for (const auto& t : trials)
    if (!names.insert(t.name).second)
      throw ConfigError(fmt::format("{}: sweep: two trials would share the directory name '{}'",
                                    recipe.file.string(), t.name));
  return trials;
}

int run_sweep(const Recipe& recipe, const SweepOptions& options) {
  if (options.shard_count < 1 || options.shard_index < 0 ||
      options.shard_index >= options.shard_count)
    throw ConfigError(fmt::format("--shard {}/{}: expected i/N with 0 <= i < N",
                                  options.shard_index, options.shard_count));
  const auto trials = expand_sweep(recipe);
  const SweepDir dir(recipe.output.dir);
  fs::create_directories(dir.trials());
  SweepPlan plan{recipe.file.string(), recipe.name, recipe.task_type, {}};
  for (const auto& t : trials) plan.trials.push_back({t.name, t.hyperparameters});
  plan.write(dir);

  int failures = 0, busy = 0;
  std::vector<const Trial*> pending;
  std::vector<TrialDir> recipes_written;  // trial directories this run gave their recipe
  for (size_t i = 0; i < trials.size(); ++i) {
    if (static_cast<int>(i % static_cast<size_t>(options.shard_count)) != options.shard_index)
      continue;
    const auto& t = trials[i];
    const auto trial = dir.trial(t.name);
    bool written = false;
    if (!keep_resolved_recipe(trial.root(), t.recipe, &written)) {
      log::error(
          "[sweep] {}: {} holds a different recipe (changed since the trial ran); delete the "
          "trial directory or use another output.dir",
          t.name, trial.recipe().string());
      ++failures;
      continue;
    }
    if (written) recipes_written.push_back(trial);
    if (const auto result = TrialResult::read(trial); result && result->done()) {
      log::info("[sweep] {}: done already ({} {:.4f}), skipped", t.name, result->main_metric,
                result->score());
      continue;
    }
    if (const auto pid = FileLock::holder(trial.lock())) {
      log::info("[sweep] {}: running in another process{}, skipped", t.name,
                *pid > 0 ? fmt::format(" (pid {})", *pid) : "");
      ++busy;
      continue;
    }
    pending.push_back(&t);
  }
  const auto shard_size =
      (trials.size() + static_cast<size_t>(options.shard_count - options.shard_index - 1)) /
      static_cast<size_t>(options.shard_count);
  log::info("[sweep] {}: {} trials, {} in shard {}/{}, {} to run", recipe.name, trials.size(),
            shard_size, options.shard_index, options.shard_count, pending.size());

  // The inputs before any trial: the model directory, then each distinct data preparation
  // (read, labels, features into the cache). Problems that every trial shares stop the sweep
  // before it starts; those of some settings only fail those trials (they report them).
  std::vector<std::string> problems;
  if (!pending.empty()) problems = input_problems(recipe, /*read_data=*/false);
  std::set<std::string> prepared;
  size_t settings_ok = 0;
  std::vector<std::string> setting_problems;
  for (const auto* t : problems.empty() ? pending : std::vector<const Trial*>{}) {
    const auto key = dump_recipe(t->recipe.root["task"]) + dump_recipe(t->recipe.root["data"]) +
                     t->recipe.model.pretrained.string();
    if (!prepared.insert(key).second) continue;
    std::vector<std::string> found;
    try_step(found, [&] {
      if (options.feature_cache) {
        prepare_task(t->recipe, dir.cache());
      } else {
        found = input_problems(t->recipe, /*read_data=*/true);
      }
    });
    if (found.empty()) ++settings_ok;
    for (const auto& p : found) setting_problems.push_back(t->name + ": " + p);
  }
  if (settings_ok == 0)
    problems.insert(problems.end(), setting_problems.begin(), setting_problems.end());
  else
    for (const auto& p : setting_problems) log::warn("[sweep] {} (the trial will report it)", p);
  if (!problems.empty()) {
    // Nothing ran: the recipes written above go again, so that the fixed recipe runs here.
    for (const auto& trial : recipes_written)
      if (!FileLock::holder(trial.lock()) && !fs::exists(trial.result()) &&
          !fs::exists(trial.log())) {
        std::error_code ignored;
        fs::remove(trial.recipe(), ignored);
        fs::remove(trial.root(), ignored);  // only if empty
      }
    for (const auto& p : problems) log::error("{}", p);
    log::error(
        "[sweep] no trial was started: fix the model or data above (`bertft validate {}` "
        "checks them)",
        recipe.file.string());
    return code(ExitCode::kFailed);
  }

  const int jobs = std::max(
      1, std::min<int>(options.jobs > 0 ? options.jobs : static_cast<int>(recipe.sweep.jobs),
                       static_cast<int>(std::max<size_t>(1, pending.size()))));
  const int total_threads =
      options.threads > 0 ? options.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = std::max(1, total_threads / jobs);  // a trial's launcher splits its share
  const auto nproc = recipe.sweep.nproc_per_trial;
  // Trials run in process groups of their own and die with the sweep (even on SIGKILL); a
  // SIGINT / SIGTERM to the sweep is forwarded, so they checkpoint and stop.
  std::map<pid_t, const Trial*> running;
  SweepProgress progress(pending.size());
  size_t next = 0;
  bool forwarded = false;
  while ((next < pending.size() && !stop_signalled()) || !running.empty()) {
    if (stop_signalled() && !forwarded) {
      log::info("[sweep] stopping: the {} running trial(s) checkpoint and stop; rerun to resume",
                running.size());
      for (const auto& [pid, t] : running) ::kill(pid, SIGTERM);
      forwarded = true;
    }
    while (static_cast<int>(running.size()) < jobs && next < pending.size() && !stop_signalled()) {
      const auto* t = pending[next++];
      const auto trial = dir.trial(t->name);
      log::info("[sweep] {}: starting ({} threads{}; log {})", t->name, threads,
                nproc > 1 ? fmt::format(", {} processes", nproc) : "", trial.log().string());
      // Looked up for each trial: where this program's file has gone since the sweep started
      // (its path then ends in " (deleted)"), the trial runs this program's image (spawn).
      const auto executable =
          options.executable.empty() ? fs::path(self_executable()) : options.executable;
      std::vector<std::string> argv = {executable.string(),
                                       "--threads",
                                       std::to_string(threads),
                                       "train",
                                       trial.recipe().string(),
                                       "--out",
                                       trial.root().string(),
                                       "--trial-name",
                                       t->name};
      if (options.feature_cache) {
        argv.insert(argv.end(), {"--cache", dir.cache().string()});
      } else {
        argv.push_back("--no-cache");
      }
      if (nproc > 1) argv.insert(argv.end(), {"--nproc", std::to_string(nproc)});
      SpawnOptions spawn_options;
      spawn_options.log_file = trial.log();
      spawn_options.self = options.executable.empty();
      running.emplace(spawn(argv, spawn_options), t);
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;  // a stop signal: forwarded above
      break;
    }
    const auto it = running.find(pid);
    if (it == running.end()) continue;
    const auto* t = it->second;
    running.erase(it);
    switch (report_trial_end(dir.trial(t->name), *t, status)) {
      case TrialEnd::kDone:
        break;
      case TrialEnd::kBusy:
        ++busy;
        break;
      case TrialEnd::kStopped:  // not done: the sweep is not complete
      case TrialEnd::kFailed:
        ++failures;
        break;
    }
    progress.ended();
  }

  const auto board = write_leaderboard(dir.root());
  log::info("[sweep] leaderboard: {}", dir.leaderboard("md").string());
  if (board.value("complete", false) && recipe.output.export_best && board.contains("best")) {
    // Another sweep on this directory may complete at the same time: the exports take turns,
    // and each one's predictions read the model it exported.
    export_model(dir.trial(board["best"]["trial"].get<std::string>()).root(), dir.best_model(),
                 [&] {
                   if (!recipe.sweep.predict_test || !recipe.data.test) return;
                   PredictOptions predict;
                   predict.batch_size = recipe.training.eval_batch_size;
                   predict.device = recipe.training.device;
                   const auto extension = prediction_extension(recipe.task_type);
                   predict_split(dir.best_model(), *recipe.data.test,
                                 dir.test_predictions(extension).string(), predict);
                   for (const auto& [name, spec] : recipe.data.extra_test)
                     predict_split(dir.best_model(), spec,
                                   dir.test_predictions(extension, name).string(), predict);
                 });
  } else if (!board.value("complete", false)) {
    log::info("[sweep] {} of {} trials done; the best model is exported when all are",
              board.value("done", 0), board["trials"].size());
  }
  if (stop_signalled()) return code(stopped_code());
  if (failures > 0) return code(ExitCode::kFailed);
  if (busy > 0 && !board.value("complete", false))
    log::info(
        "[sweep] {} trial(s) run in another process; `bertft leaderboard {}` rebuilds the "
        "leaderboard once they are done",
        busy, dir.root().string());
  return code(ExitCode::kOk);
}

}  // namespace bert::recipes
