#pragma once

#include <torch/torch.h>

#include "bert/model/bert_config.h"
#include "bert/model/dropout.h"

namespace bert {

/// RoBERTa's position ids for `input_ids` [batch, seq]: pad_token_id + 1, + 2, ... counting only
/// non-padding tokens; pad_token_id on padding. [batch, seq] int64.
torch::Tensor position_ids_after_padding(const torch::Tensor& input_ids, int64_t pad_token_id);

/// Token + absolute position + segment embeddings, summed, then LayerNorm and dropout, all of
/// width config.embedding_dim(). Children (HF names): word_embeddings, position_embeddings,
/// token_type_embeddings (absent when type_vocab_size is 0, as in DistilBERT), LayerNorm,
/// dropout. Position ids are 0..seq-1, or RoBERTa's (position_ids_after_padding).
class BertEmbeddingsImpl : public torch::nn::Module {
 public:
  explicit BertEmbeddingsImpl(const BertConfig& config);

  /// input_ids [batch, seq] int64; token_type_ids [batch, seq] int64 or undefined (all 0);
  /// position_ids [batch or 1, seq] int64 or undefined (the family's). Token types are ignored
  /// with one token type (all 0) or none. Returns [batch, seq, embedding_dim].
  /// Throws c10::Error if seq exceeds config.max_sequence_length().
  torch::Tensor forward(const torch::Tensor& input_ids,
                        const torch::Tensor& token_type_ids = {},
                        const torch::Tensor& position_ids = {});

  torch::nn::Embedding word_embeddings{nullptr};
  torch::nn::Embedding position_embeddings{nullptr};
  torch::nn::Embedding token_type_embeddings{nullptr};
  torch::nn::LayerNorm layer_norm{nullptr};
  Dropout dropout{nullptr};

 private:
  bool positions_after_padding_;
  int64_t pad_token_id_;
  int64_t max_sequence_length_;
};
TORCH_MODULE(BertEmbeddings);

}  // namespace bert
