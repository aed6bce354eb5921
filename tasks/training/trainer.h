#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "tasks/task_adapter.h"
#include "tasks/training/distributed.h"
#include "tasks/training/precision.h"
#include "tasks/training/trainer_callback.h"
#include "tasks/training/trainer_options.h"
#include "tasks/training/training_dir.h"

namespace bert::tasks {

/// The generic fine-tuning loop over a TaskAdapter: seeded shuffling (optionally length
/// grouped), dynamic padding, optional bf16/fp16 autocast, gradient accumulation and clipping,
/// the optimizer and learning-rate schedule the options name, label smoothing, and evaluation
/// every N steps or epoch. Everything else a run does is a part (TrainerCallback): progress,
/// metrics log, checkpoints and resume, best weights, early stopping, interrupts. The loop
/// knows no file names; TrainingDir does.
class Trainer {
 public:
  explicit Trainer(TrainerOptions options) : options_(std::move(options)) {}

  /// Trains `model` on `train` and evaluates on `dev` (may be null: no evaluation, the last
  /// weights count as best) with the standard parts over `output_dir` (none when empty):
  /// metrics.jsonl, best weights, resumable checkpoints (a run resumes from the newest one
  /// found there and ends with the same weights as an uninterrupted one). At the end the model
  /// holds the best weights.
  TrainResult fit(const TaskAdapter& adapter,
                  TaskModel model,
                  const FeatureSet& train,
                  const FeatureSet* dev,
                  const std::filesystem::path& output_dir = {});

  /// The same loop with exactly the parts in `parts` (called in that order).
  TrainResult fit(const TaskAdapter& adapter,
                  TaskModel model,
                  const FeatureSet& train,
                  const FeatureSet* dev,
                  const TrainerCallbacks& parts);

  /// The parts fit(..., output_dir) uses: checkpoints (resume first), best weights, metrics
  /// log, progress, early stopping, the interrupt hook, then the parts added with
  /// add_callback(). Parts that write files are left out when `dir` is empty.
  TrainerCallbacks standard_callbacks(const TrainingDir& dir) const;

  /// Adds a part after the standard ones.
  void add_callback(std::shared_ptr<TrainerCallback> part) { extra_.push_back(std::move(part)); }

  /// Trains data-parallel in `group` (every rank calls fit with the same options and data):
  /// each optimizer step's batch of batch_size examples is split over gradient accumulation
  /// and the ranks, each part's loss weighted by its share so that the summed gradients are
  /// the whole batch's; parameters start as rank 0's; evaluation is sharded and gathered;
  /// rank 0 alone writes files and prints.
  void set_data_parallel(std::shared_ptr<DataParallel> group) { group_ = std::move(group); }
  /// Asked after every step (by every rank of a group, which then agree): true stops the run
  /// after a checkpoint, as interrupted (SIGTERM / SIGINT handlers set it).
  void set_stop_request(std::function<bool()> requested) { stop_request_ = std::move(requested); }

  /// The precision the options ask for, `auto` resolved on the options' device (by fit() when
  /// it ran: every rank of a group agrees on it).
  Precision precision() const;

  /// Per-feature outputs of `model` on `features` (eval mode, no grad, bf16 if configured).
  std::vector<torch::Tensor> predict(const TaskAdapter& adapter,
                                     TaskModel model,
                                     const FeatureSet& features) const;
  Evaluation evaluate(const TaskAdapter& adapter,
                      TaskModel model,
                      const FeatureSet& features) const;

  const TrainerOptions& options() const { return options_; }

  /// Called after each checkpoint with the step; returning true stops fit() there (the result
  /// says `interrupted`). Tests use it to simulate a crash; a scheduler could use it for
  /// preemption.
  void set_interrupt_hook(std::function<bool(int64_t step)> hook) { interrupt_ = std::move(hook); }

  /// Batches of feature indices for one epoch: shuffled with `seed`, or grouped by length
  /// (shuffled chunks of 50 batches sorted by length, then the batches shuffled). Each is one
  /// optimizer step's examples.
  static std::vector<std::vector<int64_t>> epoch_batches(const FeatureSet& features,
                                                         int64_t batch_size,
                                                         uint64_t seed,
                                                         bool group_by_length);

 private:
  /// This rank's forward and backward passes of one step's batch, then (data-parallel) the
  /// gradient all-reduce and the agreement on the step's loss and on a stop request. Returns
  /// the whole batch's loss and whether any rank asked to stop.
  std::pair<double, bool> accumulate(TrainContext& run,
                                     const FeatureSet& train,
                                     const std::vector<int64_t>& batch,
                                     GradientSync* sync) const;
  /// Forward and backward of one part of a step's batch, its loss weighted by `weight` (its
  /// share of the step's examples) and the fp16 scale; returns the unweighted loss.
  double backward(TrainContext& run, const Batch& batch, double weight) const;
  /// Unscales (fp16), clips and steps; zeroes the gradients.
  void optimizer_step(TrainContext& run,
                      const std::vector<torch::Tensor>& parameters,
                      double lr) const;
  /// What the options' cadence asks for after the current step.
  TrainControl due(const TrainContext& run, bool epoch_end) const;
  /// Evaluates on `dev`, updates the best-so-far state and tells the parts.
  void evaluate_and_report(TrainContext& run,
                           const FeatureSet& dev,
                           const TrainerCallbacks& parts,
                           TrainControl& control) const;

  TrainerOptions options_;
  std::function<bool(int64_t)> interrupt_;
  std::function<bool()> stop_request_;
  TrainerCallbacks extra_;
  std::shared_ptr<DataParallel> group_;
  mutable std::optional<Precision> precision_;  ///< `auto` resolved
};

/// Part `part` of `parts` contiguous, nearly equal parts of `batch` (the first ones one longer
/// when it does not divide; empty when there are more parts than examples).
std::vector<int64_t> batch_part(const std::vector<int64_t>& batch, int64_t part, int64_t parts);

/// `loss` smoothed as HF's LabelSmoother does it: (1 - epsilon) * loss + epsilon * the mean over
/// labelled positions of -mean_c log_softmax(logits)_c (logits [..., classes], labels [...] with
/// kIgnoreIndex where there is none). Equals torch's cross_entropy with label_smoothing when
/// `loss` is the plain cross-entropy.
torch::Tensor smoothed_loss(const torch::Tensor& loss,
                            const torch::Tensor& logits,
                            const torch::Tensor& labels,
                            double epsilon);

}  // namespace bert::tasks
