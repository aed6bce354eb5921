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
  // The rows of the last layer's input whose output the caller reads (all where undefined): the
  // first position, contiguous (the output projection may add it in its GEMM), or the
  // positions last_layer_rows names.
  const bool first_only = options.first_token_only;
  const torch::Tensor rows = options.last_layer_rows;  // taken first where both are set
  const auto queries_of = [first_only, rows](const torch::Tensor& h) -> torch::Tensor {
    if (rows.defined()) {
      TORCH_CHECK(rows.dim() == 2 && rows.size(0) == h.size(0), "last_layer_rows must be [",
                  h.size(0), ", rows], got ", rows.sizes());
      return h.gather(1, rows.unsqueeze(-1).expand({rows.size(0), rows.size(1), h.size(2)}));
    }
    if (first_only) return h.narrow(/*dim=*/1, /*start=*/0, /*length=*/1).contiguous();
    return {};
  };
  const size_t layers = layers_->size();
  for (size_t i = 0; i < layers; ++i) {
    torch::Tensor probs;
    auto* layer = (*layers_)[i]->as<BertLayer>();
    const bool last = i + 1 == layers;
    if (checkpoint) {
      // The rows are taken inside the checkpointed function (kept by value: it runs again in
      // backward), so that their gradient reaches its input.
      hidden = checkpointed(
          [layer, additive_mask, last, queries_of](const torch::Tensor& h) {
            return layer->forward(h, additive_mask, nullptr,
                                  last ? queries_of(h) : torch::Tensor());
          },
          hidden);
    } else {
      hidden = layer->forward(hidden, additive_mask, options.output_attentions ? &probs : nullptr,
                              last ? queries_of(hidden) : torch::Tensor());
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
