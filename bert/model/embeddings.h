#pragma once

#include <torch/torch.h>

#include "bert/model/bert_config.h"
#include "bert/model/dropout.h"

namespace bert {

/// Token + absolute position + segment embeddings, summed, then LayerNorm and dropout.
/// Children (HF names): word_embeddings, position_embeddings, token_type_embeddings, LayerNorm,
/// dropout.
class BertEmbeddingsImpl : public torch::nn::Module {
 public:
  explicit BertEmbeddingsImpl(const BertConfig& config);

  /// input_ids [batch, seq] int64; token_type_ids [batch, seq] int64 or undefined (all 0);
  /// position_ids [batch or 1, seq] int64 or undefined (0..seq-1). Returns [batch, seq, hidden].
  /// Throws c10::Error if seq exceeds max_position_embeddings.
  torch::Tensor forward(const torch::Tensor& input_ids,
                        const torch::Tensor& token_type_ids = {},
                        const torch::Tensor& position_ids = {});

  torch::nn::Embedding word_embeddings{nullptr};
  torch::nn::Embedding position_embeddings{nullptr};
  torch::nn::Embedding token_type_embeddings{nullptr};
  torch::nn::LayerNorm layer_norm{nullptr};
  Dropout dropout{nullptr};
};
TORCH_MODULE(BertEmbeddings);

}  // namespace bert
