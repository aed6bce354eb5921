#include "bert/model/init.h"

namespace bert {

void init_bert_weights(torch::nn::Module& module, double initializer_range) {
  torch::NoGradGuard no_grad;
  for (auto& child : module.modules(/*include_self=*/false)) {
    if (auto* linear = child->as<torch::nn::Linear>()) {
      linear->weight.normal_(0.0, initializer_range);
      if (linear->bias.defined()) linear->bias.zero_();
    } else if (auto* embedding = child->as<torch::nn::Embedding>()) {
      embedding->weight.normal_(0.0, initializer_range);
      if (const auto& pad = embedding->options.padding_idx(); pad.has_value())
        embedding->weight[*pad].zero_();
    } else if (auto* norm = child->as<torch::nn::LayerNorm>()) {
      norm->weight.fill_(1.0);
      norm->bias.fill_(0.0);
    }
  }
}

}  // namespace bert
