#include "recipes/runner/leaderboard.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bert/common/file_util.h"
#include "recipes/runner/plot.h"
#include "recipes/runner/run_dir.h"

namespace bert::recipes {
namespace {

using json = nlohmann::json;
using tasks::metrics::MetricGoal;

/// One trial of the plan with what its result.json says.
struct Row {
  const SweepPlan::Entry* entry = nullptr;
  std::string seed;
  std::vector<std::pair<std::string, std::string>> setting;  ///< hyperparameters but the seed
  std::optional<TrialResult> result;
  std::string status() const {
    if (!result) return "pending";
    return result->done() ? "done" : "failed";
  }
};

/// The trials of one setting, pooled over seeds.
struct Setting {
  std::vector<std::pair<std::string, std::string>> hyperparameters;
  std::vector<const Row*> rows;
  std::vector<double> scores;
  std::map<std::string, std::vector<double>> metrics;
  int failed = 0;
  double mean = 0, std = 0;
  const Row* best = nullptr;  ///< its best done trial
};

double mean_of(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

/// Sample standard deviation (0 for one value).
double std_of(const std::vector<double>& v, double mean) {
  if (v.size() < 2) return 0.0;
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  return std::sqrt(var / static_cast<double>(v.size() - 1));
}

json pairs_json(const std::vector<std::pair<std::string, std::string>>& pairs) {
  json out = json::array();
  for (const auto& [k, v] : pairs) out.push_back({k, v});
  return out;
}

/// `text` as one Markdown table cell: a '|' would end the cell.
std::string md_cell(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string first_line(const std::string& text) {
  return md_cell(text.substr(0, text.find('\n')));
}

/// `text` as one CSV field (RFC 4180): quoted where it holds a comma, a quote or a line break,
/// as a sweep value may (a list or mapping in flow style: task.labels' "[neg, pos]").
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace

json write_leaderboard(const std::filesystem::path& dir) {
  const SweepDir sweep(dir);
  const auto plan = SweepPlan::read(sweep);

  // Rows in plan order; settings in order of first appearance.
  std::vector<Row> rows;
  rows.reserve(plan.trials.size());
  std::string main_metric;
  MetricGoal goal = MetricGoal::kMaximize;
  std::set<std::string> metric_names;
  int done = 0;
  for (const auto& entry : plan.trials) {
    Row row;
    row.entry = &entry;
    for (const auto& kv : entry.hyperparameters)
      (kv.first == "seed" ? (void)(row.seed = kv.second) : row.setting.push_back(kv));
    row.result = TrialResult::read(sweep.trial(entry.name));
    if (row.result && row.result->done()) {
      ++done;
      main_metric = row.result->main_metric;
      goal = row.result->goal;
      for (const auto& [name, value] : row.result->metrics) metric_names.insert(name);
    }
    rows.push_back(std::move(row));
  }
  const auto better = [&](double a, double b) { return tasks::metrics::improves(goal, a, b); };
  std::vector<Setting> settings;
  std::vector<size_t> setting_of(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    auto it = std::find_if(settings.begin(), settings.end(),
                           [&](const Setting& s) { return s.hyperparameters == rows[r].setting; });
    if (it == settings.end()) {
      settings.emplace_back();
      settings.back().hyperparameters = rows[r].setting;
      it = settings.end() - 1;
    }
    setting_of[r] = static_cast<size_t>(it - settings.begin());
    auto& s = *it;
    const auto& row = rows[r];
    s.rows.push_back(&row);
    if (row.status() == "failed") ++s.failed;
    if (row.status() != "done") continue;
    s.scores.push_back(row.result->score());
    for (const auto& [name, value] : row.result->metrics) s.metrics[name].push_back(value);
    if (!s.best || better(row.result->score(), s.best->result->score())) s.best = &row;
  }
  for (auto& s : settings) {
    if (s.scores.empty()) continue;
    s.mean = mean_of(s.scores);
    s.std = std_of(s.scores, s.mean);
  }
  // Ranked by mean in the metric's direction; settings without a finished trial last.
  std::vector<const Setting*> ranked;
  for (const auto& s : settings) ranked.push_back(&s);
  std::stable_sort(ranked.begin(), ranked.end(), [&](const Setting* a, const Setting* b) {
    if (a->scores.empty() || b->scores.empty()) return !a->scores.empty() && b->scores.empty();
    return better(a->mean, b->mean);
  });

  // leaderboard.json
  json all = json::array();
  for (const auto& row : rows) {
    json j = {{"trial", row.entry->name},
              {"seed", row.seed},
              {"hyperparameters", pairs_json(row.entry->hyperparameters)},
              {"status", row.status()}};
    if (row.status() == "done") {
      j["main"] = row.result->score();
      j["metrics"] = row.result->metrics;
      j["losses"] = row.result->losses;
    } else if (row.status() == "failed") {
      j["error"] = row.result->error;
    }
    all.push_back(j);
  }
  json settings_json = json::array();
  for (const auto* s : ranked) {
    json j = {{"hyperparameters", pairs_json(s->hyperparameters)},
              {"runs", s->rows.size()},
              {"done", s->scores.size()},
              {"failed", s->failed}};
    if (!s->scores.empty()) {
      j["mean"] = s->mean;
      j["std"] = s->std;
      json means = json::object();
      for (const auto& [name, values] : s->metrics) means[name] = mean_of(values);
      j["metrics_mean"] = means;
      j["best_trial"] = s->best->entry->name;
    }
    settings_json.push_back(j);
  }
  json board = {{"main_metric", main_metric},
                {"goal", tasks::metrics::goal_name(goal)},
                {"done", done},
                {"complete", done == static_cast<int>(rows.size())},
                {"trials", all},
                {"settings", settings_json}};
  if (!ranked.empty() && !ranked.front()->scores.empty()) {
    const auto& best = *ranked.front();
    board["best"] = {{"hyperparameters", pairs_json(best.hyperparameters)},
                     {"trial", best.best->entry->name},
                     {"mean", best.mean},
                     {"std", best.std}};
  }

  // leaderboard.md and leaderboard.csv
  std::vector<std::string> keys;
  if (!plan.trials.empty())
    for (const auto& kv : plan.trials[0].hyperparameters)
      if (kv.first != "seed") keys.push_back(kv.first);
  std::vector<std::string> others;
  for (const auto& m : metric_names)
    if (m != main_metric) others.push_back(m);
  const std::string metric = main_metric.empty() ? "score" : main_metric;
  const char* direction = goal == MetricGoal::kMaximize ? "higher" : "lower";
  std::string md = fmt::format(
      "# Leaderboard: {}\n\n{} of {} trials done; dev {} as mean ± std over seeds ({} is "
      "better).\n\n",
      plan.name, done, rows.size(), metric, direction);
  std::string header = "| rank |", rule = "|---|";
  for (const auto& k : keys) header += " " + k + " |", rule += "---|";
  header += fmt::format(" seeds | {} |", metric), rule += "---|---|";
  for (const auto& m : others) header += " " + m + " |", rule += "---|";
  header += " failed |", rule += "---|";
  md += header + "\n" + rule + "\n";
  int rank = 0;
  for (const auto* s : ranked) {
    std::string line = s->scores.empty() ? "| - |" : fmt::format("| {} |", ++rank);
    for (const auto& kv : s->hyperparameters) line += " " + md_cell(kv.second) + " |";
    line += fmt::format(" {}/{} |", s->scores.size(), s->rows.size());
    line += s->scores.empty() ? " - |" : fmt::format(" {:.4f} ± {:.4f} |", s->mean, s->std);
    for (const auto& m : others)
      line += s->metrics.count(m) ? fmt::format(" {:.4f} |", mean_of(s->metrics.at(m))) : " - |";
    line += fmt::format(" {} |", s->failed);
    md += line + "\n";
  }
  if (board.contains("best"))
    md += fmt::format("\nBest setting by mean dev {}: trial `{}` is its best seed.\n", main_metric,
                      board["best"]["trial"].get<std::string>());
  md += "\n## Trials\n\n| trial | status | " + metric + " | error |\n|---|---|---|---|\n";
  std::string csv = "trial";
  for (const auto& k : keys) csv += "," + k;
  csv += ",seed,status," + metric;
  for (const auto& m : others) csv += "," + m;
  csv += ",setting_mean,setting_std\n";
  for (size_t r = 0; r < rows.size(); ++r) {
    const auto& row = rows[r];
    const bool is_done = row.status() == "done";
    md += fmt::format("| {} | {} | {} | {} |\n", row.entry->name, row.status(),
                      is_done ? fmt::format("{:.4f}", row.result->score()) : "-",
                      row.status() == "failed" ? first_line(row.result->error) : "");
    csv += row.entry->name;
    for (const auto& kv : row.setting) csv += "," + csv_field(kv.second);
    csv += "," + row.seed + "," + row.status() + ",";
    if (is_done) csv += fmt::format("{}", row.result->score());
    for (const auto& m : others) {
      csv += ",";
      if (is_done && row.result->metrics.count(m))
        csv += fmt::format("{}", row.result->metrics.at(m));
    }
    const auto& s = settings[setting_of[r]];
    csv += s.scores.empty() ? std::string(",,\n") : fmt::format(",{},{}\n", s.mean, s.std);
  }
  write_file_atomic(sweep.leaderboard("md"), md);
  write_file_atomic(sweep.leaderboard("csv"), csv);
  write_file_atomic(sweep.leaderboard("json"), board.dump(1) + "\n");
  write_file_atomic(sweep.leaderboard("svg"), sweep_plot(board));
  return board;
}

}  // namespace bert::recipes
