#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "bert/checkpoint/tensor_map.h"
#include "tasks/training/trainer_callback.h"
#include "tasks/training/training_dir.h"

/// The standard parts of a training run (Trainer::standard_callbacks() puts them together).
namespace bert::tasks {

/// A progress bar rewritten in place on a terminal; plain "[train]" lines every log interval
/// elsewhere; one "[eval]" line per evaluation.
class ProgressBar final : public TrainerCallback {
 public:
  ProgressBar();
  void on_step_end(TrainContext& run, const StepStats& stats, TrainControl& control) override;
  void on_log(TrainContext& run, const StepStats& stats) override;
  void on_evaluate(TrainContext& run,
                   const Evaluation& evaluation,
                   bool improved,
                   TrainControl& control) override;
  void on_train_end(TrainContext& run) override { finish_line(); }

 private:
  void finish_line();
  bool tty_;
  bool open_ = false;
};

/// Appends one JSON object per log interval ({"split": "train", loss, learning_rate, ...}) and
/// per evaluation ({"split": "dev", "is_best", "metrics"}) to a JSONL file. A resumed run
/// first drops the records after its checkpoint, so that no step is logged twice.
class MetricsLog final : public TrainerCallback {
 public:
  explicit MetricsLog(std::filesystem::path path) : path_(std::move(path)) {}
  void on_train_begin(TrainContext& run, TrainControl& control) override;
  void on_log(TrainContext& run, const StepStats& stats) override;
  void on_evaluate(TrainContext& run,
                   const Evaluation& evaluation,
                   bool improved,
                   TrainControl& control) override;
  /// Appends `record` as one line (a run's own records after fit(): data.extra_dev's).
  void append(const nlohmann::json& record) const;

 private:
  std::filesystem::path path_;
};

/// Resumable checkpoints in a TrainingDir: at the start, resumes from the newest one (weights,
/// optimizer, RNG, data position, best so far); when a save is due, writes one atomically
/// (a temporary directory renamed into place, then the `latest` pointer) and keeps the newest
/// `keep` of them.
class Checkpoints final : public TrainerCallback {
 public:
  Checkpoints(TrainingDir dir, int64_t keep) : dir_(std::move(dir)), keep_(keep) {}
  void on_train_begin(TrainContext& run, TrainControl& control) override;
  void on_save(TrainContext& run, TrainControl& control) override;

 private:
  /// The newest complete checkpoint (named by the `latest` pointer), or empty.
  std::filesystem::path latest() const;
  TrainingDir dir_;
  int64_t keep_;
};

/// Keeps the best weights: a copy in memory at each improvement (and in `file` when given),
/// put back into the model at the end. Without evaluations the last weights are the best
/// (written to `file` at the end). A resumed run reads the best so far from `file`; only a
/// part with `write` (rank 0) writes it.
class BestWeights final : public TrainerCallback {
 public:
  explicit BestWeights(std::filesystem::path file = {}, bool write = true)
      : file_(std::move(file)), write_(write) {}
  void on_train_begin(TrainContext& run, TrainControl& control) override;
  void on_evaluate(TrainContext& run,
                   const Evaluation& evaluation,
                   bool improved,
                   TrainControl& control) override;
  void on_train_end(TrainContext& run) override;

 private:
  std::filesystem::path file_;
  bool write_;
  TensorMap best_;
};

/// Stops the run after `patience` evaluations in a row without improvement.
class EarlyStopping final : public TrainerCallback {
 public:
  explicit EarlyStopping(int64_t patience) : patience_(patience) {}
  void on_train_begin(TrainContext& run, TrainControl& control) override;
  void on_evaluate(TrainContext& run,
                   const Evaluation& evaluation,
                   bool improved,
                   TrainControl& control) override;

 private:
  bool exhausted(TrainContext& run, TrainControl& control) const;
  int64_t patience_;
};

/// Stops the run after a checkpoint when `should_stop(step)` says so (result.interrupted):
/// tests simulate a crash with it; a scheduler could use it for preemption.
class InterruptHook final : public TrainerCallback {
 public:
  explicit InterruptHook(std::function<bool(int64_t step)> should_stop)
      : should_stop_(std::move(should_stop)) {}
  void on_save(TrainContext& run, TrainControl& control) override;

 private:
  std::function<bool(int64_t)> should_stop_;
};

}  // namespace bert::tasks
