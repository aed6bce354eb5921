#include "bert/model/embeddings.h"

namespace bert {

BertEmbeddingsImpl::BertEmbeddingsImpl(const BertConfig& c) {
  word_embeddings = register_module(
      "word_embeddings",
      torch::nn::Embedding(torch::nn::EmbeddingOptions(c.vocab_size(), c.hidden_size())
                               .padding_idx(c.pad_token_id())));
  position_embeddings = register_module(
      "position_embeddings", torch::nn::Embedding(c.max_position_embeddings(), c.hidden_size()));
  token_type_embeddings = register_module(
      "token_type_embeddings", torch::nn::Embedding(c.type_vocab_size(), c.hidden_size()));
  layer_norm = register_module(
      "LayerNorm",
      torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.hidden_size()}).eps(c.layer_norm_eps())));
  dropout = register_module("dropout", Dropout(c.hidden_dropout_prob()));
}

torch::Tensor BertEmbeddingsImpl::forward(const torch::Tensor& input_ids,
                                          const torch::Tensor& token_type_ids,
                                          const torch::Tensor& position_ids) {
  TORCH_CHECK(input_ids.dim() == 2, "input_ids must be [batch, seq], got ", input_ids.sizes());
  const int64_t seq = input_ids.size(1);
  const int64_t max_positions = position_embeddings->weight.size(0);
  TORCH_CHECK(seq <= max_positions, "sequence length ", seq, " exceeds max_position_embeddings (",
              max_positions, ")");
  const auto device = input_ids.device();
  const torch::Tensor positions =
      position_ids.defined()
          ? position_ids
          : torch::arange(seq, torch::TensorOptions().dtype(torch::kLong).device(device))
                .unsqueeze(0);  // [1, seq]
  const torch::Tensor types =
      token_type_ids.defined() ? token_type_ids : torch::zeros_like(input_ids);  // [batch, seq]

  torch::Tensor embeddings = word_embeddings(input_ids)         // [batch, seq, hidden]
                             + token_type_embeddings(types)     // [batch, seq, hidden]
                             + position_embeddings(positions);  // [1, seq, hidden]
  return dropout(layer_norm(embeddings));
}

}  // namespace bert
