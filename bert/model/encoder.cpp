#include "bert/model/encoder.h"

namespace bert {

BertEncoderImpl::BertEncoderImpl(const BertConfig& c) {
  layers_ = register_module("layer", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_hidden_layers(); ++i) layers_->push_back(BertLayer(c));
}

void BertEncoderImpl::forward(torch::Tensor hidden,
                              const torch::Tensor& additive_mask,
                              const ForwardOptions& options,
                              BertModelOutput& out) {
  if (options.output_hidden_states) out.hidden_states.push_back(hidden);
  for (const auto& module : *layers_) {
    torch::Tensor probs;
    hidden = module->as<BertLayer>()->forward(hidden, additive_mask,
                                              options.output_attentions ? &probs : nullptr);
    if (options.output_hidden_states) out.hidden_states.push_back(hidden);
    if (options.output_attentions) out.attentions.push_back(probs);
  }
  out.last_hidden_state = hidden;
}

BertPoolerImpl::BertPoolerImpl(const BertConfig& c) {
  dense_ = register_module("dense", torch::nn::Linear(c.hidden_size(), c.hidden_size()));
}

torch::Tensor BertPoolerImpl::forward(const torch::Tensor& hidden) {
  return torch::tanh(dense_(hidden.select(/*dim=*/1, /*index=*/0)));  // [batch, hidden]
}

}  // namespace bert
