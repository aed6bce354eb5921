#include "recipes/runner/run_dir.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/json_util.h"
#include "bert/common/log.h"
#include "bert/common/signals.h"
#include "data/text_file.h"

namespace bert::recipes {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using tasks::metrics::MetricGoal;

// JSON forms of the record fields: plain values through nlohmann, enums by name, an empty
// optional as an absent key.
template <class T>
void put(json& j, const char* key, const T& value) {
  j[key] = value;
}
void put(json& j, const char* key, const std::optional<double>& value) {
  if (value) j[key] = *value;
}
void put(json& j, const char* key, TrialStatus value) {
  j[key] = value == TrialStatus::kDone ? "done" : "failed";
}
void put(json& j, const char* key, MetricGoal value) {
  j[key] = tasks::metrics::goal_name(value);
}

template <class T>
void get(const json& j, const char* key, T& out) {
  j.at(key).get_to(out);
}
void get(const json& j, const char* key, std::optional<double>& out) {
  out = j.at(key).is_null() ? std::nullopt : std::optional<double>(j.at(key).get<double>());
}
void get(const json& j, const char* key, TrialStatus& out) {
  const auto text = j.at(key).get<std::string>();
  if (text != "done" && text != "failed")
    throw DataError(fmt::format("\"{}\" is \"{}\"; expected \"done\" or \"failed\"", key, text));
  out = text == "done" ? TrialStatus::kDone : TrialStatus::kFailed;
}
void get(const json& j, const char* key, MetricGoal& out) {
  const auto text = j.at(key).get<std::string>();
  if (text != "maximize" && text != "minimize")
    throw DataError(
        fmt::format("\"{}\" is \"{}\"; expected \"maximize\" or \"minimize\"", key, text));
  out = text == "maximize" ? MetricGoal::kMaximize : MetricGoal::kMinimize;
}

/// TrialResult's one field list: drives result.json both ways.
template <class Self, class Visitor>
void visit_result(Self& r, Visitor&& field) {
  field("status", r.status);
  field("trial", r.trial);
  field("task", r.task);
  field("main_metric", r.main_metric);
  field("goal", r.goal);
  field("main", r.main);
  field("metrics", r.metrics);
  field("best_step", r.best_step);
  field("steps", r.steps);
  field("stopped_early", r.stopped_early);
  field("losses", r.losses);
  field("labels", r.labels);
  field("train_features", r.train_features);
  field("dev_features", r.dev_features);
  field("seconds", r.seconds);
  field("error", r.error);
}

}  // namespace

ExitCode stopped_code() {
  return stop_signal() == SIGINT ? ExitCode::kInterrupted : ExitCode::kTerminated;
}

fs::path TrialDir::recipe() const {
  return root_ / "recipe.yaml";
}
fs::path TrialDir::log() const {
  return root_ / "train.log";
}
fs::path TrialDir::result() const {
  return root_ / "result.json";
}
fs::path TrialDir::lock() const {
  return root_ / ".lock";
}

fs::path SweepDir::plan() const {
  return root_ / "plan.json";
}
fs::path SweepDir::trials() const {
  return root_ / "trials";
}
TrialDir SweepDir::trial(const std::string& name) const {
  return TrialDir(trials() / name);
}
fs::path SweepDir::cache() const {
  return root_ / "cache";
}
TrialDir SweepDir::train_run() const {
  return TrialDir(root_ / "train");
}
fs::path SweepDir::best_model() const {
  return root_ / "best_model";
}
fs::path SweepDir::test_predictions(const std::string& extension, const std::string& name) const {
  return root_ / ("test_predictions" + (name.empty() ? "" : "_" + name) + extension);
}
fs::path SweepDir::leaderboard(const std::string& extension) const {
  return root_ / ("leaderboard." + extension);
}
bool SweepDir::holds_sweep(const fs::path& dir) {
  const SweepDir d(dir);
  return fs::exists(d.leaderboard("json")) || fs::exists(d.plan());
}

namespace {

/// Opens (creating) a lock file; -1 with errno on failure.
int open_lock(const fs::path& file) {
  if (file.has_parent_path()) fs::create_directories(file.parent_path());
  return ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
}

struct flock whole_file(short type) {
  struct flock l {};
  l.l_type = type;
  l.l_whence = SEEK_SET;
  l.l_start = 0;
  l.l_len = 0;  // to the end, however long
  return l;
}

/// Takes the write lock on `file`: nullopt when `wait` is false and another process holds it.
std::optional<int> lock_file(const fs::path& file, bool wait) {
  const int fd = open_lock(file);
  if (fd < 0) throw Error(fmt::format("{}: cannot open: {}", file.string(), std::strerror(errno)));
  auto l = whole_file(F_WRLCK);
  while (::fcntl(fd, wait ? F_SETLKW : F_SETLK, &l) != 0) {
    const int error = errno;
    if (wait && error == EINTR) continue;
    ::close(fd);
    if (!wait && (error == EACCES || error == EAGAIN)) return std::nullopt;
    throw Error(fmt::format("{}: cannot lock: {}", file.string(), std::strerror(error)));
  }
  return fd;
}

}  // namespace

std::optional<FileLock> FileLock::try_acquire(const fs::path& file) {
  const auto fd = lock_file(file, /*wait=*/false);
  if (!fd) return std::nullopt;
  return FileLock(*fd);
}

FileLock FileLock::acquire(const fs::path& file) {
  return FileLock(*lock_file(file, /*wait=*/true));
}

std::optional<int> FileLock::holder(const fs::path& file) {
  if (!fs::exists(file)) return std::nullopt;
  const int fd = ::open(file.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  auto l = whole_file(F_WRLCK);
  const bool asked = ::fcntl(fd, F_GETLK, &l) == 0;
  ::close(fd);
  if (!asked || l.l_type == F_UNLCK) return std::nullopt;
  return static_cast<int>(l.l_pid);
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

json TrialResult::to_json() const {
  json j = json::object();
  visit_result(*this, [&](const char* key, const auto& value) { put(j, key, value); });
  if (done()) j.erase("error");
  return j;
}

TrialResult TrialResult::from_json(const json& j, const std::string& source) {
  if (!j.is_object()) throw DataError(source + ": expected a JSON object");
  TrialResult r;
  bool has_goal = false;
  visit_result(r, [&](const char* key, auto& value) {
    if (!j.contains(key)) return;
    try {
      get(j, key, value);
    } catch (const std::exception& e) {
      throw DataError(fmt::format("{}: \"{}\": {}", source, key, e.what()));
    }
    has_goal = has_goal || std::string(key) == "goal";
  });
  if (!has_goal) r.goal = tasks::metrics::metric_goal(r.main_metric);
  return r;
}

std::optional<TrialResult> TrialResult::read(const TrialDir& dir) {
  const auto path = dir.result();
  if (!fs::exists(path)) return std::nullopt;
  try {
    return from_json(parse_json_limited(read_file(path)), path.string());
  } catch (const std::exception& e) {
    log::warn("{}: unreadable, taken as no result: {}", path.string(), e.what());
    return std::nullopt;
  }
}

void TrialResult::write(const TrialDir& dir) const {
  write_file_atomic(dir.result(), to_json().dump(1) + "\n");
}

json SweepPlan::to_json() const {
  json trials_json = json::array();
  for (const auto& t : trials) {
    json hp = json::array();
    for (const auto& [k, v] : t.hyperparameters) hp.push_back({k, v});
    trials_json.push_back({{"name", t.name}, {"hyperparameters", hp}});
  }
  return {{"recipe", recipe}, {"name", name}, {"task", task}, {"trials", trials_json}};
}

SweepPlan SweepPlan::from_json(const json& j, const std::string& source) {
  SweepPlan plan;
  try {
    plan.recipe = j.value("recipe", "");
    plan.name = j.value("name", "");
    plan.task = j.value("task", "");
    for (const auto& t : j.at("trials")) {
      Entry e;
      e.name = t.at("name").get<std::string>();
      for (const auto& kv : t.at("hyperparameters"))
        e.hyperparameters.emplace_back(kv.at(0).get<std::string>(), kv.at(1).get<std::string>());
      plan.trials.push_back(std::move(e));
    }
  } catch (const json::exception& e) {
    throw DataError(fmt::format("{}: not a sweep plan: {}", source, e.what()));
  }
  return plan;
}

SweepPlan SweepPlan::read(const SweepDir& dir) {
  return from_json(data::read_json_file(dir.plan()), dir.plan().string());
}

void SweepPlan::write(const SweepDir& dir) const {
  write_file_atomic(dir.plan(), to_json().dump(1) + "\n");
}

}  // namespace bert::recipes
