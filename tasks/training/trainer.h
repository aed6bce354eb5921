#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "bert/common/yaml.h"
#include "tasks/task_adapter.h"

namespace bert::tasks {

enum class Precision {
  kFp32,  ///< plain float32
  kBf16,  ///< bf16 autocast (CPU oneDNN/AMX, CUDA); float32 weights and optimizer
  kFp16,  ///< fp16 autocast with dynamic loss scaling (CUDA only); float32 weights and optimizer
};

/// Autocast for the forward passes in its scope on `device`: bf16 (CPU oneDNN, CUDA) or fp16
/// (CUDA) by `precision`, nothing for fp32. Switches it off and clears the cast cache on exit.
class AutocastScope {
 public:
  AutocastScope(Precision precision, const torch::Device& device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool enabled_, cuda_;
};

struct TrainerOptions {
  int64_t epochs = 3;
  int64_t batch_size = 32;
  int64_t eval_batch_size = 64;
  double learning_rate = 2e-5;
  double weight_decay = 0.01;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  double warmup_ratio = 0.1;
  int64_t warmup_steps = -1;   ///< >= 0 overrides warmup_ratio
  double max_grad_norm = 1.0;  ///< 0 = no clipping
  int64_t gradient_accumulation_steps = 1;
  int64_t seed = 42;
  Precision precision = Precision::kFp32;
  std::string device = "cpu";
  int64_t eval_every = 0;        ///< optimizer steps between evaluations; 0 = after each epoch
  bool eval_each_epoch = false;  ///< with eval_every > 0, also evaluate at each epoch's end
  int64_t log_every = 50;
  int64_t early_stopping_patience =
      0;                         ///< evaluations without improvement before stopping; 0 = off
  bool group_by_length = false;  ///< batches of similar lengths (less padding)
  int64_t save_every =
      0;  ///< optimizer steps between resumable checkpoints; 0 = at each evaluation and epoch end
  int64_t keep_checkpoints = 1;  ///< resumable checkpoints kept (the newest); best/ is kept besides
  int64_t threads = 0;           ///< intra-op threads (0 = all cores; the CLI's --threads wins)

  template <class Self, class Visitor>
  static void visit(Self& self, Visitor&& field) {
    field("epochs", self.epochs, "Passes over the training set");
    field("batch_size", self.batch_size, "Examples per optimizer step (before accumulation)");
    field("eval_batch_size", self.eval_batch_size, "Examples per evaluation batch");
    field("learning_rate", self.learning_rate, "Peak AdamW learning rate");
    field("weight_decay", self.weight_decay, "Decoupled weight decay (not on biases / LayerNorm)");
    field("adam_beta1", self.adam_beta1, "AdamW beta1");
    field("adam_beta2", self.adam_beta2, "AdamW beta2");
    field("adam_epsilon", self.adam_epsilon, "AdamW epsilon");
    field("warmup_ratio", self.warmup_ratio, "Fraction of steps with linear warm-up");
    field("warmup_steps", self.warmup_steps, "Warm-up steps (overrides warmup_ratio when >= 0)");
    field("max_grad_norm", self.max_grad_norm, "Gradient clipping norm (0 = off)");
    field("gradient_accumulation_steps", self.gradient_accumulation_steps,
          "Batches per optimizer step");
    field("seed", self.seed, "Seed for data order, head init and dropout");
    field("precision", self.precision, "fp32 | bf16 | fp16 (fp16: CUDA, with loss scaling)");
    field("device", self.device, "cpu | cuda | cuda:N");
    field("eval_every", self.eval_every, "Optimizer steps between evaluations (0 = each epoch)");
    field("eval_each_epoch", self.eval_each_epoch,
          "With eval_every > 0, also evaluate at each epoch's end");
    field("log_every", self.log_every, "Optimizer steps between progress lines");
    field("early_stopping_patience", self.early_stopping_patience,
          "Evaluations without improvement (0 = off)");
    field("group_by_length", self.group_by_length, "Batch features of similar length together");
    field("save_every", self.save_every,
          "Steps between resumable checkpoints (0 = each evaluation and epoch end)");
    field("keep_checkpoints", self.keep_checkpoints,
          "Resumable checkpoints kept besides best/ (the newest)");
    field("threads", self.threads, "Intra-op threads (0 = all cores)");
  }
  /// Adds a message per impossible value (reader locates it).
  void validate(const YamlReader& reader, ErrorList& errors) const;
};

/// What fit() did.
struct TrainResult {
  Evaluation best;  ///< the best evaluation (by the adapter's main metric)
  int64_t best_step = 0;
  int64_t steps = 0;
  bool stopped_early = false;
  bool interrupted = false;    ///< the interrupt hook stopped the run (resume continues it)
  int64_t resumed_from = 0;    ///< step of the checkpoint the run resumed from (0 = fresh start)
  std::vector<double> losses;  ///< mean training loss per logged interval
};

/// The generic fine-tuning loop over a TaskAdapter: seeded shuffling (optionally length
/// grouped), dynamic padding, optional bf16 autocast, gradient accumulation and clipping,
/// AdamW with HF's decay groups, linear warm-up/decay, evaluation every N steps or epoch,
/// best-weights keeping, early stopping, a progress line and a JSONL log.
class Trainer {
 public:
  explicit Trainer(TrainerOptions options) : options_(std::move(options)) {}

  /// Trains `model` on `train` and evaluates on `dev` (may be null: no evaluation, the last
  /// weights count as best). With `output_dir`, appends metrics.jsonl there, writes the best
  /// weights to best/model.safetensors and resumable checkpoints to checkpoints/step-N/ (model,
  /// optimizer, RNG and data position; all written atomically), and resumes from the newest
  /// checkpoint found there: a resumed run ends with the same weights as an uninterrupted one.
  /// At the end the model holds the best weights.
  TrainResult fit(const TaskAdapter& adapter,
                  TaskModel model,
                  const FeatureSet& train,
                  const FeatureSet* dev,
                  const std::filesystem::path& output_dir = {});

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
  /// (shuffled chunks of 50 batches sorted by length, then the batches shuffled).
  static std::vector<std::vector<int64_t>> epoch_batches(const FeatureSet& features,
                                                         int64_t batch_size,
                                                         uint64_t seed,
                                                         bool group_by_length);

 private:
  TrainerOptions options_;
  std::function<bool(int64_t)> interrupt_;
};

}  // namespace bert::tasks

namespace bert {
template <>
struct EnumNames<tasks::Precision> {
  static const std::vector<std::pair<const char*, tasks::Precision>>& get();
};
}  // namespace bert
