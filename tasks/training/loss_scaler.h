#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace bert::tasks {

/// Dynamic loss scaling for fp16 training (torch.cuda.amp.GradScaler's rule): the loss is
/// multiplied by `scale` before backward; before the optimizer step the gradients are divided
/// by it and checked; a step with an inf/NaN gradient is skipped and the scale halved; after
/// `growth_interval` clean steps in a row the scale doubles.
class LossScaler {
 public:
  explicit LossScaler(double initial_scale = 65536.0, int64_t growth_interval = 2000)
      : scale_(initial_scale), growth_interval_(growth_interval) {}

  double scale() const { return scale_; }
  int64_t clean_steps() const { return clean_steps_; }
  /// Restores the state of a checkpoint.
  void restore(double scale, int64_t clean_steps) {
    scale_ = scale;
    clean_steps_ = clean_steps;
  }

  /// Divides every defined gradient of `parameters` by the scale; returns true when all of
  /// them are finite (the optimizer may step).
  bool unscale(const std::vector<torch::Tensor>& parameters) const;
  /// Updates the scale after a step attempt (`finite`: what unscale() returned).
  void update(bool finite);

 private:
  double scale_;
  int64_t growth_interval_;
  int64_t clean_steps_ = 0;
};

}  // namespace bert::tasks
