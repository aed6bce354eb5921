#include "bert/model/embeddings.h"

#include "bert/model/layer_norm.h"

namespace bert {

BertEmbeddingsImpl::BertEmbeddingsImpl(const BertConfig& c)
    : positions_after_padding_(c.positions_after_padding()),
      pad_token_id_(c.pad_token_id()),
      max_sequence_length_(c.max_sequence_length()) {
  const int64_t dim = c.embedding_dim();
  word_embeddings = register_module(
      "word_embeddings",
      torch::nn::Embedding(
          torch::nn::EmbeddingOptions(c.vocab_size(), dim).padding_idx(c.pad_token_id())));
  auto positions = torch::nn::EmbeddingOptions(c.max_position_embeddings(), dim);
  if (positions_after_padding_) positions.padding_idx(c.pad_token_id());
  position_embeddings = register_module("position_embeddings", torch::nn::Embedding(positions));
  // DistilBERT with sinusoidal_pos_embds: its checkpoint holds the sinusoids, which HF keeps
  // frozen.
  const auto sinusoidal = c.extra().find("sinusoidal_pos_embds");
  if (c.family() == ModelFamily::kDistilBert && sinusoidal != c.extra().end() &&
      sinusoidal->is_boolean() && sinusoidal->get<bool>())
    position_embeddings->weight.set_requires_grad(false);
  if (c.type_vocab_size() > 0)
    token_type_embeddings =
        register_module("token_type_embeddings", torch::nn::Embedding(c.type_vocab_size(), dim));
  layer_norm = register_module(
      "LayerNorm",
      torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(c.layer_norm_eps())));
  dropout = register_module("dropout", Dropout(c.hidden_dropout_prob()));
}

torch::Tensor position_ids_after_padding(const torch::Tensor& input_ids, int64_t pad_token_id) {
  const torch::Tensor tokens = input_ids.ne(pad_token_id).to(torch::kLong);  // [batch, seq]
  return tokens.cumsum(1) * tokens + pad_token_id;
}

torch::Tensor BertEmbeddingsImpl::forward(const torch::Tensor& input_ids,
                                          const torch::Tensor& token_type_ids,
                                          const torch::Tensor& position_ids) {
  TORCH_CHECK(input_ids.dim() == 2, "input_ids must be [batch, seq], got ", input_ids.sizes());
  const int64_t seq = input_ids.size(1);
  TORCH_CHECK(seq <= max_sequence_length_, "sequence length ", seq,
              " exceeds the model's longest input (", max_sequence_length_,
              positions_after_padding_ ? ": max_position_embeddings less pad_token_id + 1)"
                                       : ": max_position_embeddings)");
  const auto device = input_ids.device();
  torch::Tensor positions = position_ids;
  if (!positions.defined())
    positions = positions_after_padding_
                    ? position_ids_after_padding(input_ids, pad_token_id_)  // [batch, seq]
                    : torch::arange(seq, torch::TensorOptions().dtype(torch::kLong).device(device))
                          .unsqueeze(0);  // [1, seq]
  // HF's order of additions: words + token types, then + positions.
  torch::Tensor embeddings = word_embeddings(input_ids);  // [batch, seq, dim]
  if (!token_type_embeddings.is_empty()) {
    // One token type (RoBERTa): every token gets type 0, as HF's tokenizers give it.
    const bool one_type = token_type_embeddings->weight.size(0) == 1;
    embeddings = embeddings + (one_type || !token_type_ids.defined()
                                   ? token_type_embeddings->weight[0]
                                   : token_type_embeddings(token_type_ids));
  }
  embeddings = embeddings + position_embeddings(positions);
  return dropout(add_layer_norm(*layer_norm, embeddings));
}

}  // namespace bert
