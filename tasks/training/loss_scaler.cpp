#include "tasks/training/loss_scaler.h"

namespace bert::tasks {

bool LossScaler::unscale(const std::vector<torch::Tensor>& parameters) const {
  torch::NoGradGuard no_grad;
  bool finite = true;
  for (const auto& p : parameters) {
    auto grad = p.grad();
    if (!grad.defined()) continue;
    grad.div_(scale_);
    if (finite && !torch::isfinite(grad).all().item<bool>()) finite = false;
  }
  return finite;
}

void LossScaler::update(bool finite) {
  if (!finite) {
    scale_ *= 0.5;
    clean_steps_ = 0;
    return;
  }
  if (++clean_steps_ == growth_interval_) {
    scale_ *= 2.0;
    clean_steps_ = 0;
  }
}

}  // namespace bert::tasks
