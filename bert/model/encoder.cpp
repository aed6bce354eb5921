#include "bert/model/encoder.h"

#include "bert/model/activation_checkpoint.h"
#include "bert/model/onednn_linear.h"

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
  const bool checkpoint =
      checkpointing_ && torch::GradMode::is_enabled() && !options.output_attentions;
  const size_t layers = layers_->size();
  for (size_t i = 0; i < layers; ++i) {
    torch::Tensor probs;
    auto* layer = (*layers_)[i]->as<BertLayer>();
    const bool first_only = options.first_token_only && i + 1 == layers;
    if (checkpoint) {
      hidden = checkpointed(
          [layer, additive_mask, first_only](const torch::Tensor& h) {
            return layer->forward(h, additive_mask, nullptr, first_only);
          },
          hidden);
    } else {
      hidden = layer->forward(hidden, additive_mask, options.output_attentions ? &probs : nullptr,
                              first_only);
    }
    if (options.output_hidden_states) out.hidden_states.push_back(hidden);
    if (options.output_attentions) out.attentions.push_back(probs);
  }
  out.last_hidden_state = hidden;
}

int64_t set_activation_checkpointing(torch::nn::Module& module, bool on) {
  int64_t n = 0;
  for (const auto& m : module.modules(/*include_self=*/true))
    if (auto* encoder = dynamic_cast<BertEncoderImpl*>(m.get())) {
      encoder->set_activation_checkpointing(on);
      ++n;
    }
  return n;
}

BertPoolerImpl::BertPoolerImpl(const BertConfig& c) {
  dense_ = register_module("dense", torch::nn::Linear(c.hidden_size(), c.hidden_size()));
}

torch::Tensor BertPoolerImpl::forward(const torch::Tensor& hidden) {
  // The first token's state [batch, hidden], projected (through oneDNN where the encoder's
  // projections go: a multithreaded BLAS call would leave OpenBLAS's idle thread yielding).
  return torch::tanh(
      fast_linear(hidden.select(/*dim=*/1, /*index=*/0), dense_->weight, dense_->bias));
}

}  // namespace bert
