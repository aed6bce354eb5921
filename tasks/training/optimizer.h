#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace bert::tasks {

struct AdamWSettings {
  double learning_rate = 2e-5;
  double weight_decay = 0.01;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;  ///< HF TrainingArguments.adam_epsilon
};

/// True for parameters that get no weight decay: every bias and every LayerNorm parameter
/// (HF Trainer.create_optimizer's rule). Embeddings are decayed.
bool is_no_decay_parameter(const std::string& name);

/// AdamW (torch.optim.AdamW: decoupled weight decay, bias-corrected moments) over `model`'s
/// trainable parameters in two groups: weight_decay for the rest, 0 for is_no_decay_parameter().
/// Group 0 = decayed, group 1 = not decayed. The update of float32 CPU parameters runs fused
/// (one pass per tensor, same arithmetic as torch's AdamW); state and checkpoints are AdamW's.
std::unique_ptr<torch::optim::AdamW> make_adamw(const torch::nn::Module& model,
                                                const AdamWSettings& settings);

/// One optimizer a recipe can name (`training.optimizer`): the extension point for others.
struct OptimizerFactory {
  std::string name;
  std::string description;
  std::function<std::unique_ptr<torch::optim::Optimizer>(const torch::nn::Module&,
                                                         const AdamWSettings&)>
      create;
};

/// Every optimizer by name: "adamw" (make_adamw, the default), "adamw_hf" (transformers' AdamW)
/// and "adamw_torch" (LibTorch's own
/// AdamW, unfused, same groups: a reference for the fused kernel). A new optimizer is one entry.
const std::vector<OptimizerFactory>& optimizer_factories();

/// The optimizer `name` over `model`'s trainable parameters; throws ConfigError listing the
/// names for an unknown one.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::string& name,
                                                        const torch::nn::Module& model,
                                                        const AdamWSettings& settings);

/// Sets the learning rate of every parameter group (any optimizer).
void set_learning_rate(torch::optim::Optimizer& optimizer, double learning_rate);

/// Gradient clipping as torch.nn.utils.clip_grad_norm_(parameters, max_norm) does it (the total
/// 2-norm of the gradients, float32, and the coefficient min(max_norm / (norm + 1e-6), 1) in its
/// float arithmetic); returns the norm. Float32 CPU gradients get their norm in one pass over
/// fixed pieces, summed in double beyond short runs: the same on any number of threads and
/// within a float rounding of the exact norm (LibTorch's per-tensor float norms, which
/// clip_grad_norm_ uses and which other gradients get here, were 2.7e-4 off on bert-base's and
/// took twice as long: bench section clip_norm). For
/// make_adamw's optimizer the multiply by the coefficient is left to its next step(), which folds
/// it into the update pass (one read and write of every gradient less, the same float products);
/// for any other optimizer the gradients are scaled here.
double clip_gradients(torch::optim::Optimizer& optimizer,
                      const std::vector<torch::Tensor>& parameters,
                      double max_norm);

/// Drops every parameter's gradient (torch's `zero_grad(set_to_none=True)`, what HF's Trainer
/// does): the next backward hands its fresh gradient tensors over instead of zero-filling the
/// old ones and adding into them (two passes over every gradient less per step, and no gradient
/// memory held during the forward). Parameters without a gradient in a step are then skipped by
/// AdamW, as in torch. Data-parallel gradients live in all-reduce buckets: zero those in place.
void release_gradients(const std::vector<torch::Tensor>& parameters);

}  // namespace bert::tasks
