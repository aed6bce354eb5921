#include "bert/model/bert_model.h"

#include "bert/model/init.h"

namespace bert {

torch::Tensor additive_attention_mask(const torch::Tensor& attention_mask,
                                      torch::ScalarType dtype) {
  TORCH_CHECK(attention_mask.dim() == 2, "attention_mask must be [batch, seq], got ",
              attention_mask.sizes());
  const torch::Tensor keep =
      attention_mask.to(dtype).unsqueeze(1).unsqueeze(2);  // [batch, 1, 1, seq]
  const double lowest = dtype == torch::kDouble     ? std::numeric_limits<double>::lowest()
                        : dtype == torch::kBFloat16 ? -3.3895313892515355e38
                        : dtype == torch::kHalf     ? -65504.0
                                                    : std::numeric_limits<float>::lowest();
  return (1.0 - keep) * lowest;
}

BertModelImpl::BertModelImpl(const BertConfig& config, bool add_pooling_layer) : config_(config) {
  embeddings = register_module("embeddings", BertEmbeddings(config));
  if (config.embedding_dim() != config.hidden_size())
    embeddings_project = register_module(
        "embeddings_project", torch::nn::Linear(config.embedding_dim(), config.hidden_size()));
  encoder = register_module("encoder", BertEncoder(config));
  if (add_pooling_layer) pooler = register_module("pooler", BertPooler(config));
  init_bert_weights(*this, config.initializer_range());
}

BertModelOutput BertModelImpl::forward(const torch::Tensor& input_ids,
                                       const torch::Tensor& attention_mask,
                                       const torch::Tensor& token_type_ids,
                                       const ForwardOptions& options) {
  BertModelOutput out;
  torch::Tensor hidden = embeddings(input_ids, token_type_ids);  // [batch, seq, embedding_dim]
  // [.., hidden]. Under autocast the projection gives bf16/fp16; the residual stream stays in
  // the embeddings' dtype, as for BERT, or the first LayerNorm would see a low-precision sum
  // beside its fp32 weights (LibTorch 1.13's CPU LayerNorm takes one dtype).
  if (!embeddings_project.is_empty()) hidden = embeddings_project(hidden).to(hidden.scalar_type());
  torch::Tensor mask;
  if (attention_mask.defined()) {
    TORCH_CHECK(attention_mask.sizes() == input_ids.sizes(), "attention_mask ",
                attention_mask.sizes(), " must have the shape of input_ids ", input_ids.sizes());
    mask = additive_attention_mask(attention_mask, torch::kFloat);  // [batch, 1, 1, seq]
  }
  encoder->forward(hidden, mask, options, out);
  if (has_pooler()) out.pooler_output = pooler(out.last_hidden_state);
  return out;
}

}  // namespace bert
