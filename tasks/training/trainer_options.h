#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "bert/common/yaml.h"
#include "tasks/training/precision.h"
#include "tasks/training/schedule.h"

namespace bert::tasks {

/// The `training:` section of a recipe: everything the Trainer does, one field list (visit).
struct TrainerOptions {
  int64_t epochs = 3;
  int64_t batch_size = 32;
  int64_t eval_batch_size = 64;
  int64_t max_steps = -1;  ///< > 0: train this many optimizer steps (overrides epochs)
  std::string optimizer = "adamw";
  double learning_rate = 2e-5;
  double weight_decay = 0.01;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  ScheduleType lr_scheduler_type = ScheduleType::kLinear;
  double warmup_ratio = 0.1;
  int64_t warmup_steps = -1;         ///< >= 0 overrides warmup_ratio
  std::optional<double> num_cycles;  ///< cosine schedules (default 0.5 / 1 as HF)
  double power = 1.0;                ///< polynomial schedule
  double lr_end = 1e-7;              ///< polynomial schedule
  double label_smoothing = 0.0;      ///< classification losses (HF's label_smoothing_factor)
  double max_grad_norm = 1.0;        ///< 0 = no clipping
  int64_t gradient_accumulation_steps = 1;
  int64_t seed = 42;
  Precision precision = Precision::kAuto;
  std::string device = "cpu";
  int64_t eval_every = 0;        ///< optimizer steps between evaluations; 0 = after each epoch
  bool eval_each_epoch = false;  ///< with eval_every > 0, also evaluate at each epoch's end
  int64_t log_every = 50;
  int64_t early_stopping_patience = 0;    ///< evaluations without improvement; 0 = off
  bool group_by_length = false;           ///< batches of similar lengths (less padding)
  bool activation_checkpointing = false;  ///< recompute encoder layers in backward (less memory)
  int64_t save_every = 0;  ///< steps between resumable checkpoints; 0 = at each evaluation and
                           ///< epoch end
  int64_t keep_checkpoints = 1;  ///< resumable checkpoints kept (the newest); best/ besides
  int64_t threads = 0;           ///< intra-op threads (0 = all cores; the CLI's --threads wins)
  int64_t dist_timeout = 600;    ///< data-parallel: seconds a collective waits for the others

  template <class Self, class Visitor>
  static void visit(Self& self, Visitor&& field) {
    field("epochs", self.epochs, "Passes over the training set");
    field("batch_size", self.batch_size,
          "Examples per optimizer step: processes x accumulation x per-process batch");
    field("eval_batch_size", self.eval_batch_size, "Examples per evaluation batch");
    field("max_steps", self.max_steps, "Optimizer steps to train (> 0 overrides epochs)");
    field("optimizer", self.optimizer,
          "adamw (fused, torch's arithmetic) | adamw_hf | adamw_torch");
    field("learning_rate", self.learning_rate, "Peak learning rate");
    field("weight_decay", self.weight_decay, "Decoupled weight decay (not on biases / LayerNorm)");
    field("adam_beta1", self.adam_beta1, "AdamW beta1");
    field("adam_beta2", self.adam_beta2, "AdamW beta2");
    field("adam_epsilon", self.adam_epsilon, "AdamW epsilon");
    field("lr_scheduler_type", self.lr_scheduler_type,
          "linear | cosine | cosine_with_restarts | polynomial | constant | constant_with_warmup");
    field("warmup_ratio", self.warmup_ratio, "Fraction of steps with linear warm-up");
    field("warmup_steps", self.warmup_steps, "Warm-up steps (overrides warmup_ratio when >= 0)");
    field("num_cycles", self.num_cycles, "Cosine waves (default 0.5 cosine, 1 with restarts)");
    field("power", self.power, "Polynomial decay exponent");
    field("lr_end", self.lr_end, "Polynomial schedule's final learning rate");
    field("label_smoothing", self.label_smoothing, "Label smoothing of classification losses");
    field("max_grad_norm", self.max_grad_norm, "Gradient clipping norm (0 = off)");
    field("gradient_accumulation_steps", self.gradient_accumulation_steps,
          "Batches per optimizer step");
    field("seed", self.seed, "Seed for data order, head init and dropout");
    field("precision", self.precision,
          "auto (bf16 where the device runs it fast, probed; else fp32) | fp32 | bf16 | fp16 "
          "(CUDA, with loss scaling)");
    field("device", self.device, "cpu | cuda | cuda:N");
    field("eval_every", self.eval_every, "Optimizer steps between evaluations (0 = each epoch)");
    field("eval_each_epoch", self.eval_each_epoch,
          "With eval_every > 0, also evaluate at each epoch's end");
    field("log_every", self.log_every, "Optimizer steps between progress lines");
    field("early_stopping_patience", self.early_stopping_patience,
          "Evaluations without improvement (0 = off)");
    field("group_by_length", self.group_by_length, "Batch features of similar length together");
    field("activation_checkpointing", self.activation_checkpointing,
          "Keep only each encoder layer's input and recompute the layer in backward: much less "
          "memory at long sequences or BERT-large, about a third more compute; same gradients");
    field("save_every", self.save_every,
          "Steps between resumable checkpoints (0 = each evaluation and epoch end)");
    field("keep_checkpoints", self.keep_checkpoints,
          "Resumable checkpoints kept besides best/ (the newest)");
    field("threads", self.threads, "Intra-op threads (0 = all cores)");
    field("dist_timeout", self.dist_timeout,
          "Data-parallel: seconds a collective waits for the other ranks before failing");
  }
  /// Adds a message per impossible value (reader locates it).
  void validate(const YamlReader& reader, ErrorList& errors) const;

  /// The shape parameters of lr_scheduler_type.
  ScheduleShape schedule_shape() const { return {num_cycles, power, lr_end}; }
};

}  // namespace bert::tasks
