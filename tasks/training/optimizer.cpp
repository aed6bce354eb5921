#include "tasks/training/optimizer.h"

#include "bert/common/strings.h"

namespace bert::tasks {

bool is_no_decay_parameter(const std::string& name) {
  return ends_with(name, "bias") || name.find("LayerNorm.") != std::string::npos;
}

std::unique_ptr<torch::optim::AdamW> make_adamw(const torch::nn::Module& model, const AdamWSettings& s) {
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& p : model.named_parameters()) {
    if (!p.value().requires_grad()) continue;
    (is_no_decay_parameter(p.key()) ? no_decay : decay).push_back(p.value());
  }
  const auto options = [&](double weight_decay) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(s.learning_rate).betas({s.beta1, s.beta2}).eps(s.eps).weight_decay(weight_decay));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, options(s.weight_decay));
  groups.emplace_back(no_decay, options(0.0));
  return std::make_unique<torch::optim::AdamW>(std::move(groups),
                                               torch::optim::AdamWOptions(s.learning_rate).betas({s.beta1, s.beta2}).eps(s.eps));
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double learning_rate) {
  for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(learning_rate);
}

}  // namespace bert::tasks
