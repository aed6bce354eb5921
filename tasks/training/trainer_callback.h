#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "tasks/metrics/metric_info.h"
#include "tasks/task_adapter.h"
#include "tasks/training/distributed.h"
#include "tasks/training/loss_scaler.h"
#include "tasks/training/train_state.h"
#include "tasks/training/trainer_options.h"

namespace bert::tasks {

/// What fit() did.
struct TrainResult {
  Evaluation best;  ///< the best evaluation (by the adapter's main metric and its goal)
  metrics::MetricGoal goal = metrics::MetricGoal::kMaximize;  ///< of best.main_metric
  int64_t best_step = 0;
  int64_t steps = 0;
  bool stopped_early = false;
  bool interrupted = false;    ///< a part stopped the run after a checkpoint (resume continues it)
  int64_t resumed_from = 0;    ///< step of the checkpoint the run resumed from (0 = fresh start)
  std::vector<double> losses;  ///< mean training loss per logged interval
  double communication_seconds = 0;  ///< data-parallel: all-reduce time not hidden by backward
};

/// A run as the parts see it: its fixed plan, the objects it trains and its mutable state.
/// Owned by Trainer::fit() for the run's duration.
struct TrainContext {
  TrainContext(const TrainerOptions& options,
               const TaskAdapter& adapter,
               TaskModel model,
               torch::optim::Optimizer& optimizer,
               LossScaler& scaler,
               torch::Device device)
      : options(options),
        adapter(adapter),
        model(std::move(model)),
        optimizer(optimizer),
        scaler(scaler),
        device(device) {}

  const TrainerOptions& options;
  const TaskAdapter& adapter;
  TaskModel model;
  torch::optim::Optimizer& optimizer;
  LossScaler& scaler;
  torch::Device device;
  Precision precision = Precision::kFp32;  ///< the options' precision, `auto` resolved
  int64_t steps_per_epoch = 0;
  int64_t epochs = 0;         ///< epochs the run spans (max_steps may end the last one early)
  int64_t total_steps = 0;    ///< optimizer steps of the whole run
  int64_t skipped_steps = 0;  ///< fp16 steps skipped for inf/NaN gradients
  TrainState state;
  TrainResult result;
  /// Data-parallel runs: this process's group (null in a single process) and the seconds spent
  /// waiting for gradient all-reduces that backward did not hide.
  DataParallel* group = nullptr;
  double communication_seconds = 0;

  int rank() const { return group ? group->rank() : 0; }
  int world_size() const { return group ? group->world_size() : 1; }
  /// Rank 0, which alone writes files and prints.
  bool lead() const { return rank() == 0; }

  /// Epoch position of the current step (1.0 = the end of the first epoch).
  double epoch_position() const {
    return static_cast<double>(state.step) / static_cast<double>(steps_per_epoch);
  }
};

/// What the loop does after the current optimizer step. The loop sets log/evaluate/save from
/// the options' cadence; parts may add to it (a stop is always checkpointed first).
struct TrainControl {
  bool log = false;
  bool evaluate = false;
  bool save = false;
  bool stop = false;
};

/// Figures of the current logging interval, after an optimizer step.
struct StepStats {
  int64_t step = 0;
  double epoch = 0;
  double loss = 0;  ///< mean training loss of the interval's batches
  double learning_rate = 0;
  double examples_per_second = 0;
  double eta_seconds = 0;
};

/// One part of a training run with one job (progress, metrics log, checkpoints, best weights,
/// early stopping, interrupts, ...), on the pattern of HF's TrainerCallback and marian's
/// TrainingObserver. fit() calls every part at each event, in the order given. In a
/// data-parallel run every rank runs its parts: one that changes the control must decide the
/// same on every rank (from the state, the step or the evaluation, which all ranks share), and
/// one that writes files writes on rank 0 only (TrainContext::lead()).
class TrainerCallback {
 public:
  virtual ~TrainerCallback() = default;
  /// Before the first step. Parts restore what they keep of a resumed run here (the checkpoint
  /// part restores the state, so it comes first). May set control.stop.
  virtual void on_train_begin(TrainContext& run, TrainControl& control) {}
  /// After every optimizer step.
  virtual void on_step_end(TrainContext& run, const StepStats& stats, TrainControl& control) {}
  /// At the end of each logging interval (`log_every`).
  virtual void on_log(TrainContext& run, const StepStats& stats) {}
  /// After an evaluation on the dev set; `improved` when it is the best so far (the state
  /// already says so). May set control.stop.
  virtual void on_evaluate(TrainContext& run,
                           const Evaluation& evaluation,
                           bool improved,
                           TrainControl& control) {}
  /// When a checkpoint is due, with the state advanced past the current step. May set
  /// control.stop (and result.interrupted).
  virtual void on_save(TrainContext& run, TrainControl& control) {}
  /// After the loop, also when it stopped early or was interrupted.
  virtual void on_train_end(TrainContext& run) {}
};

using TrainerCallbacks = std::vector<std::shared_ptr<TrainerCallback>>;

}  // namespace bert::tasks
