#include "tasks/training/trainer_options.h"

#include <fmt/format.h>

#include <algorithm>

#include "tasks/training/optimizer.h"

namespace bert::tasks {

void TrainerOptions::validate(const YamlReader& reader, ErrorList& errors) const {
  const auto positive = [&](const char* key, double value) {
    if (!(value > 0)) errors.add(fmt::format("{}: must be > 0, got {}", reader.where(key), value));
  };
  positive("epochs", static_cast<double>(epochs));
  positive("batch_size", static_cast<double>(batch_size));
  positive("eval_batch_size", static_cast<double>(eval_batch_size));
  positive("learning_rate", learning_rate);
  positive("adam_epsilon", adam_epsilon);
  positive("gradient_accumulation_steps", static_cast<double>(gradient_accumulation_steps));
  positive("dist_timeout", static_cast<double>(dist_timeout));
  if (weight_decay < 0) errors.add(reader.where("weight_decay") + ": must be >= 0");
  if (warmup_ratio < 0 || warmup_ratio > 1)
    errors.add(reader.where("warmup_ratio") + ": must be in [0, 1]");
  if (adam_beta1 < 0 || adam_beta1 >= 1)
    errors.add(reader.where("adam_beta1") + ": must be in [0, 1)");
  if (adam_beta2 < 0 || adam_beta2 >= 1)
    errors.add(reader.where("adam_beta2") + ": must be in [0, 1)");
  if (max_grad_norm < 0) errors.add(reader.where("max_grad_norm") + ": must be >= 0");
  if (label_smoothing < 0 || label_smoothing >= 1)
    errors.add(reader.where("label_smoothing") + ": must be in [0, 1)");
  if (num_cycles && !(*num_cycles > 0)) errors.add(reader.where("num_cycles") + ": must be > 0");
  if (lr_scheduler_type == ScheduleType::kPolynomial) {
    if (!(power > 0)) errors.add(reader.where("power") + ": must be > 0");
    if (!(lr_end < learning_rate))
      errors.add(
          fmt::format("{}: the polynomial schedule decays from learning_rate ({}) down to "
                      "lr_end ({}); lr_end must be smaller",
                      reader.where("lr_end"), learning_rate, lr_end));
  }
  const auto& factories = optimizer_factories();
  if (std::none_of(factories.begin(), factories.end(),
                   [&](const OptimizerFactory& f) { return f.name == optimizer; })) {
    std::vector<std::string> names;
    for (const auto& f : factories) names.push_back(f.name);
    const auto guess = nearest_key(optimizer, names);
    std::string all;
    for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
    errors.add(fmt::format("{}: unknown optimizer '{}'{}; expected one of: {}",
                           reader.where("optimizer"), optimizer,
                           guess.empty() ? "" : fmt::format(" (did you mean '{}'?)", guess), all));
  }
  try {
    const torch::Device d(device);
    if (precision == Precision::kFp16 && !d.is_cuda())
      errors.add(
          fmt::format("{}: fp16 needs a CUDA device (loss-scaled half precision); on CPU use bf16",
                      reader.where("precision")));
  } catch (const std::exception&) {
    errors.add(fmt::format("{}: unknown device '{}'; expected cpu, cuda or cuda:N",
                           reader.where("device"), device));
  }
}

}  // namespace bert::tasks
