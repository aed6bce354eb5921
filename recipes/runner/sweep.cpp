#include "recipes/runner/sweep.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <thread>

#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/log.h"
#include "recipes/runner/export.h"
#include "recipes/runner/plot.h"
#include "recipes/runner/trial.h"

extern char** environ;

namespace bert::recipes {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

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

/// Starts `argv` with stdout and stderr appended to `log_file`; returns the child's pid.
pid_t spawn(const std::vector<std::string>& argv, const fs::path& log_file) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_file.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw Error(fmt::format("cannot start {}: {}", argv[0], std::strerror(rc)));
  return pid;
}

std::string last_lines(const fs::path& file, size_t count) {
  if (!fs::exists(file)) return "";
  const auto text = read_file(file);
  size_t pos = text.size();
  for (size_t n = 0; n <= count && pos > 0; ++n) pos = text.rfind('\n', pos - 1);
  return text.substr(pos == std::string::npos ? 0 : pos + 1);
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
        set_path(root, key.find('.') == std::string::npos ? "training." + key : key, value);
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
  const fs::path dir = recipe.output.dir;
  fs::create_directories(dir / "trials");
  json plan = {{"recipe", recipe.file.string()},
               {"name", recipe.name},
               {"task", recipe.task_type},
               {"trials", json::array()}};
  for (const auto& t : trials) {
    json hp = json::array();
    for (const auto& [k, v] : t.hyperparameters) hp.push_back({k, v});
    plan["trials"].push_back({{"name", t.name}, {"hyperparameters", hp}});
  }
  write_file_atomic(dir / "plan.json", plan.dump(1) + "\n");

  int failures = 0;
  std::vector<const Trial*> pending;
  for (size_t i = 0; i < trials.size(); ++i) {
    if (static_cast<int>(i % static_cast<size_t>(options.shard_count)) != options.shard_index)
      continue;
    const auto& t = trials[i];
    const auto tdir = dir / "trials" / t.name;
    if (!keep_resolved_recipe(tdir, t.recipe)) {
      log::error(
          "[sweep] {}: {} holds a different recipe (changed since the trial ran); delete the trial "
          "directory "
          "or use another output.dir",
          t.name, (tdir / "recipe.yaml").string());
      ++failures;
      continue;
    }
    const auto result = read_result(tdir);
    if (result.is_object() && result.value("status", "") == "done") {
      log::info("[sweep] {}: done already ({} {:.4f}), skipped", t.name,
                result.value("main_metric", ""), result.value("main", 0.0));
      continue;
    }
    pending.push_back(&t);
  }
  log::info("[sweep] {}: {} trials, {} in shard {}/{}, {} to run", recipe.name, trials.size(),
            (trials.size() + static_cast<size_t>(options.shard_count - options.shard_index - 1)) /
                static_cast<size_t>(options.shard_count),
            options.shard_index, options.shard_count, pending.size());

  // Tokenise each distinct dataset setting once, before the trials start.
  std::set<std::string> prepared;
  for (const auto* t : options.feature_cache ? pending : std::vector<const Trial*>{}) {
    const auto key = dump_recipe(t->recipe.root["task"]) + dump_recipe(t->recipe.root["data"]) +
                     t->recipe.model.pretrained.string();
    if (!prepared.insert(key).second) continue;
    try {
      prepare_task(t->recipe, dir / "cache");
    } catch (const std::exception& e) {
      log::warn("[sweep] preparing the data of {} failed (the trial will report it): {}", t->name,
                e.what());
    }
  }

  const int jobs = std::max(
      1, std::min<int>(options.jobs > 0 ? options.jobs : static_cast<int>(recipe.sweep.jobs),
                       static_cast<int>(std::max<size_t>(1, pending.size()))));
  const int total_threads =
      options.threads > 0 ? options.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = std::max(1, total_threads / jobs);
  const auto executable =
      options.executable.empty() ? fs::read_symlink("/proc/self/exe") : options.executable;
  std::map<pid_t, const Trial*> running;
  size_t next = 0;
  while (next < pending.size() || !running.empty()) {
    while (static_cast<int>(running.size()) < jobs && next < pending.size()) {
      const auto* t = pending[next++];
      const auto tdir = dir / "trials" / t->name;
      log::info("[sweep] {}: starting ({} threads; log {})", t->name, threads,
                (tdir / "train.log").string());
      std::vector<std::string> argv = {executable.string(),
                                       "--threads",
                                       std::to_string(threads),
                                       "train",
                                       (tdir / "recipe.yaml").string(),
                                       "--out",
                                       tdir.string(),
                                       "--trial-name",
                                       t->name};
      if (options.feature_cache) {
        argv.insert(argv.end(), {"--cache", (dir / "cache").string()});
      } else {
        argv.push_back("--no-cache");
      }
      const pid_t pid = spawn(argv, tdir / "train.log");
      running.emplace(pid, t);
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) break;
    const auto it = running.find(pid);
    if (it == running.end()) continue;
    const auto* t = it->second;
    running.erase(it);
    const auto tdir = dir / "trials" / t->name;
    const auto result = read_result(tdir);
    const bool exited = WIFEXITED(status);
    if (exited && WEXITSTATUS(status) == 0 && result.is_object() &&
        result.value("status", "") == "done") {
      log::info("[sweep] {}: done, {} {:.4f} ({:.0f}s)", t->name, result.value("main_metric", ""),
                result.value("main", 0.0), result.value("seconds", 0.0));
      continue;
    }
    ++failures;
    if (exited && WEXITSTATUS(status) == 3) {
      log::warn("[sweep] {}: interrupted; rerun the sweep to resume it from its checkpoint",
                t->name);
      continue;
    }
    std::string why = exited ? fmt::format("exit code {}", WEXITSTATUS(status))
                             : fmt::format("killed by signal {} ({})", WTERMSIG(status),
                                           strsignal(WTERMSIG(status)));
    if (!result.is_object() || result.value("status", "") != "failed") {
      const json record = {{"status", "failed"},
                           {"trial", t->name},
                           {"error", fmt::format("{}; last lines of train.log:\n{}", why,
                                                 last_lines(tdir / "train.log", 5))}};
      write_file_atomic(tdir / "result.json", record.dump(1) + "\n");
    }
    const auto error = read_result(tdir).value("error", why);
    log::error("[sweep] {}: failed ({}): {}", t->name, why, error.substr(0, error.find('\n')));
  }

  const auto board = write_leaderboard(dir);
  log::info("[sweep] leaderboard: {}", (dir / "leaderboard.md").string());
  if (board.value("complete", false) && recipe.output.export_best && board.contains("best")) {
    const auto best_trial = dir / "trials" / board["best"]["trial"].get<std::string>();
    export_model(best_trial, dir / "best_model");
  } else if (!board.value("complete", false)) {
    log::info("[sweep] {} of {} trials done; the best model is exported when all are",
              board.value("done", 0), board["trials"].size());
  }
  return failures == 0 ? 0 : 1;
}

json write_leaderboard(const fs::path& dir) {
  const auto plan = json::parse(read_file(dir / "plan.json"));
  struct Group {
    json hyperparameters = json::array();  // [[key, value], ...] without the seed
    std::vector<json> trials;
    std::vector<double> scores;
    std::map<std::string, std::vector<double>> metrics;
    int failed = 0;
    double mean = 0, std = 0;  // of scores, once computed
  };
  std::vector<std::string> order;
  std::map<std::string, Group> groups;
  std::string main_metric;
  std::set<std::string> metric_names;
  json all = json::array();
  std::vector<std::string> row_groups;  // the group key of each row of `all`
  int done = 0;
  for (const auto& t : plan["trials"]) {
    json hp = json::array();
    std::string key, seed;
    for (const auto& kv : t["hyperparameters"]) {
      if (kv[0] == "seed") {
        seed = kv[1];
        continue;
      }
      hp.push_back(kv);
      key += kv[0].get<std::string>() + "=" + kv[1].get<std::string>() + " ";
    }
    if (!groups.count(key)) order.push_back(key);
    auto& g = groups[key];
    g.hyperparameters = hp;
    const auto result = read_result(dir / "trials" / t["name"].get<std::string>());
    json row = {{"trial", t["name"]},
                {"seed", seed},
                {"hyperparameters", t["hyperparameters"]},
                {"status", result.is_object() ? result.value("status", "pending") : "pending"}};
    if (row["status"] == "done") {
      ++done;
      main_metric = result["main_metric"];
      row["main"] = result["main"];
      row["metrics"] = result["metrics"];
      row["losses"] = result.value("losses", json::array());
      g.scores.push_back(result["main"]);
      for (const auto& [name, value] : result["metrics"].items()) {
        g.metrics[name].push_back(value.get<double>());
        metric_names.insert(name);
      }
    } else if (row["status"] == "failed") {
      ++g.failed;
      row["error"] = result.value("error", "");
    }
    g.trials.push_back(row);
    all.push_back(row);
    row_groups.push_back(key);
  }
  json board = {{"main_metric", main_metric},
                {"done", done},
                {"complete", done == static_cast<int>(all.size())},
                {"trials", all},
                {"settings", json::array()}};
  std::vector<json> settings;
  for (const auto& key : order) {
    auto& g = groups[key];
    json s = {{"hyperparameters", g.hyperparameters},
              {"runs", g.trials.size()},
              {"done", g.scores.size()},
              {"failed", g.failed}};
    if (!g.scores.empty()) {
      for (double v : g.scores) g.mean += v;
      g.mean /= static_cast<double>(g.scores.size());
      double var = 0;
      for (double v : g.scores) var += (v - g.mean) * (v - g.mean);
      g.std = g.scores.size() > 1 ? std::sqrt(var / static_cast<double>(g.scores.size() - 1)) : 0.0;
      s["mean"] = g.mean;
      s["std"] = g.std;
      json means = json::object();
      for (const auto& [name, values] : g.metrics) {
        double m = 0;
        for (double v : values) m += v;
        means[name] = m / static_cast<double>(values.size());
      }
      s["metrics_mean"] = means;
      const auto best =
          std::max_element(g.trials.begin(), g.trials.end(), [](const json& a, const json& b) {
            return a.value("main", -1e300) < b.value("main", -1e300);
          });
      s["best_trial"] = (*best)["trial"];
    }
    settings.push_back(s);
  }
  std::stable_sort(settings.begin(), settings.end(), [](const json& a, const json& b) {
    return a.value("mean", -1e300) > b.value("mean", -1e300);
  });
  board["settings"] = settings;
  if (!settings.empty() && settings.front().contains("mean"))
    board["best"] = {{"hyperparameters", settings.front()["hyperparameters"]},
                     {"trial", settings.front()["best_trial"]},
                     {"mean", settings.front()["mean"]},
                     {"std", settings.front()["std"]}};

  // Markdown and CSV.
  std::vector<std::string> keys;
  if (!plan["trials"].empty())
    for (const auto& kv : plan["trials"][0]["hyperparameters"])
      if (kv[0] != "seed") keys.push_back(kv[0]);
  std::vector<std::string> others;
  for (const auto& m : metric_names)
    if (m != main_metric) others.push_back(m);
  std::string md = fmt::format(
      "# Leaderboard: {}\n\n{} of {} trials done; dev {} as mean ± std over seeds.\n\n",
      plan.value("name", ""), done, all.size(), main_metric.empty() ? "score" : main_metric);
  std::string header = "| rank |", rule = "|---|";
  for (const auto& k : keys) header += " " + k + " |", rule += "---|";
  header += fmt::format(" seeds | {} |", main_metric.empty() ? "score" : main_metric),
      rule += "---|---|";
  for (const auto& m : others) header += " " + m + " |", rule += "---|";
  header += " failed |", rule += "---|";
  md += header + "\n" + rule + "\n";
  int rank = 0;
  for (const auto& s : settings) {
    std::string line = s.contains("mean") ? fmt::format("| {} |", ++rank) : "| - |";
    for (const auto& kv : s["hyperparameters"]) line += " " + kv[1].get<std::string>() + " |";
    line += fmt::format(" {}/{} |", s["done"].get<int>(), s["runs"].get<int>());
    line += s.contains("mean")
                ? fmt::format(" {:.4f} ± {:.4f} |", s["mean"].get<double>(), s["std"].get<double>())
                : " - |";
    for (const auto& m : others)
      line += s.contains("metrics_mean") && s["metrics_mean"].contains(m)
                  ? fmt::format(" {:.4f} |", s["metrics_mean"][m].get<double>())
                  : " - |";
    line += fmt::format(" {} |", s["failed"].get<int>());
    md += line + "\n";
  }
  if (board.contains("best"))
    md += fmt::format("\nBest setting by mean dev {}: trial `{}` is its best seed.\n", main_metric,
                      board["best"]["trial"].get<std::string>());
  md += "\n## Trials\n\n| trial | status | " +
        (main_metric.empty() ? std::string("score") : main_metric) +
        " | error |\n|---|---|---|---|\n";
  std::string csv = "trial";
  for (const auto& k : keys) csv += "," + k;
  csv += ",seed,status," + (main_metric.empty() ? std::string("score") : main_metric);
  for (const auto& m : others) csv += "," + m;
  csv += ",setting_mean,setting_std\n";
  for (size_t r = 0; r < all.size(); ++r) {
    const auto& row = all[r];
    std::string error = row.value("error", "");
    error = error.substr(0, error.find('\n'));
    std::replace(error.begin(), error.end(), '|', '/');
    md += fmt::format("| {} | {} | {} | {} |\n", row["trial"].get<std::string>(),
                      row["status"].get<std::string>(),
                      row.contains("main") ? fmt::format("{:.4f}", row["main"].get<double>()) : "-",
                      error);
    csv += row["trial"].get<std::string>();
    for (const auto& kv : row["hyperparameters"])
      if (kv[0] != "seed") csv += "," + kv[1].get<std::string>();
    csv += "," + row["seed"].get<std::string>() + "," + row["status"].get<std::string>() + ",";
    if (row.contains("main")) csv += fmt::format("{}", row["main"].get<double>());
    for (const auto& m : others) {
      csv += ",";
      if (row.contains("metrics") && row["metrics"].contains(m))
        csv += fmt::format("{}", row["metrics"][m].get<double>());
    }
    const auto& g = groups[row_groups[r]];
    csv += g.scores.empty() ? std::string(",,\n") : fmt::format(",{},{}\n", g.mean, g.std);
  }
  write_file_atomic(dir / "leaderboard.md", md);
  write_file_atomic(dir / "leaderboard.csv", csv);
  write_file_atomic(dir / "leaderboard.json", board.dump(1) + "\n");
  write_file_atomic(dir / "leaderboard.svg", sweep_plot(board));
  return board;
}

}  // namespace bert::recipes
