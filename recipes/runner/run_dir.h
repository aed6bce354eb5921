#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tasks/metrics/metric_info.h"
#include "tasks/training/training_dir.h"

/// The run directories: the one place that spells their file names (the Trainer's own files are
/// tasks::TrainingDir's), plus the typed records kept in them (plan.json, result.json) and the
/// exit codes a run ends with.
namespace bert::recipes {

/// Exit codes of every `bertft` command: nothing else is returned.
enum class ExitCode : int {
  kOk = 0,             ///< done
  kFailed = 1,         ///< a runtime or data error (bad data, checkpoint, a lost rank, a trial
                       ///< another process runs), or a sweep with a failed trial
  kConfigError = 2,    ///< a usage or configuration error (command line, recipe); nothing ran
  kInterrupted = 130,  ///< stopped after a checkpoint by SIGINT (128 + 2); rerun to resume
  kTerminated = 143,   ///< stopped after a checkpoint by SIGTERM (128 + 15) or a stop hook
};
inline int code(ExitCode c) {
  return static_cast<int>(c);
}
/// The code of a run stopped after a checkpoint: kInterrupted for SIGINT, else kTerminated.
ExitCode stopped_code();
/// True for the codes of a run stopped after a checkpoint (resumable).
inline bool stopped(int exit_code) {
  return exit_code == code(ExitCode::kInterrupted) || exit_code == code(ExitCode::kTerminated);
}

/// A trial's directory (`bertft train --out`, or trials/<name>/ of a sweep): the Trainer's
/// files (metrics.jsonl, checkpoints/, best/) plus what the runner keeps.
class TrialDir {
 public:
  explicit TrialDir(std::filesystem::path root) : root_(std::move(root)) {}
  const std::filesystem::path& root() const { return root_; }
  tasks::TrainingDir training() const { return tasks::TrainingDir(root_); }
  std::filesystem::path best_weights() const { return training().best_weights(); }
  std::filesystem::path recipe() const;  ///< recipe.yaml: the resolved recipe it runs
  std::filesystem::path log() const;     ///< train.log: the output of a sweep's trial
  std::filesystem::path result() const;  ///< result.json: TrialResult, once finished or failed
  std::filesystem::path lock() const;    ///< .lock: held while a process runs the trial

 private:
  std::filesystem::path root_;
};

/// A sweep's directory (a recipe's output.dir).
class SweepDir {
 public:
  explicit SweepDir(std::filesystem::path root) : root_(std::move(root)) {}
  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path plan() const;             ///< plan.json: SweepPlan
  std::filesystem::path trials() const;           ///< trials/
  TrialDir trial(const std::string& name) const;  ///< trials/<name>/
  std::filesystem::path cache() const;       ///< cache/: tokenised features shared by the trials
  TrialDir train_run() const;                ///< train/: `bertft train`'s default --out
  std::filesystem::path best_model() const;  ///< best_model/: the exported best trial
  /// test_predictions<extension>: best_model's predictions of data.test (sweep.predict_test);
  /// with a `name`, test_predictions_<name><extension>: data.extra_test's set of that name.
  std::filesystem::path test_predictions(const std::string& extension,
                                         const std::string& name = "") const;
  /// leaderboard.<extension> for md, csv, json, svg.
  std::filesystem::path leaderboard(const std::string& extension) const;
  /// True when `dir` holds a sweep (its plan or leaderboard), not a single trial.
  static bool holds_sweep(const std::filesystem::path& dir);

 private:
  std::filesystem::path root_;
};

/// An fcntl write lock on a file (created when missing), held until destruction or process death;
/// POSIX locks work on NFS through its lock manager. One process at a time runs a trial (its
/// .lock file) or writes an exported model (export_model). The lock belongs to the process:
/// take each file's lock once per process.
class FileLock {
 public:
  /// The lock, or nullopt when another process holds it.
  static std::optional<FileLock> try_acquire(const std::filesystem::path& file);
  /// The lock, once no other process holds it (waits).
  static FileLock acquire(const std::filesystem::path& file);
  /// The pid holding the lock (as the file system reports it; 0 when unknown), or nullopt
  /// when nobody does.
  static std::optional<int> holder(const std::filesystem::path& file);
  FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileLock& operator=(FileLock&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_;
};

enum class TrialStatus { kDone, kFailed };

/// result.json: what a trial reports once it finished (status done) or failed. The goal says
/// which way main is better; results written before it existed take the metric table's.
struct TrialResult {
  TrialStatus status = TrialStatus::kFailed;
  std::string trial;
  std::string task;
  std::string main_metric;
  tasks::metrics::MetricGoal goal = tasks::metrics::MetricGoal::kMaximize;
  std::optional<double> main;  ///< the best evaluation's main metric (done only)
  std::map<std::string, double> metrics;
  int64_t best_step = 0;
  int64_t steps = 0;
  bool stopped_early = false;
  std::vector<double> losses;
  std::vector<std::string> labels;
  int64_t train_features = 0;
  int64_t dev_features = 0;
  double seconds = 0;
  std::string error;  ///< failed only

  bool done() const { return status == TrialStatus::kDone; }
  double score() const { return main.value_or(0.0); }

  nlohmann::json to_json() const;
  /// Absent keys keep their defaults; a present key of the wrong type is a DataError.
  static TrialResult from_json(const nlohmann::json& j, const std::string& source);
  /// The trial's result.json, or nullopt when there is none or it cannot be parsed.
  static std::optional<TrialResult> read(const TrialDir& dir);
  /// Writes result.json atomically.
  void write(const TrialDir& dir) const;
};

/// plan.json: a sweep's trials in order, each with its hyperparameters (grid values as
/// written, then "seed").
struct SweepPlan {
  struct Entry {
    std::string name;
    std::vector<std::pair<std::string, std::string>> hyperparameters;
  };
  std::string recipe;
  std::string name;
  std::string task;
  std::vector<Entry> trials;

  nlohmann::json to_json() const;
  static SweepPlan from_json(const nlohmann::json& j, const std::string& source);
  /// Throws bert::Error naming plan.json when it is missing or damaged.
  static SweepPlan read(const SweepDir& dir);
  void write(const SweepDir& dir) const;
};

}  // namespace bert::recipes
