#pragma once

#include <torch/torch.h>

#include "bert/model/bert_config.h"
#include "bert/model/dropout.h"
#include "bert/model/linear.h"

namespace bert {

/// Multi-head scaled dot-product self-attention. Children: query, key, value, dropout.
class BertSelfAttentionImpl : public torch::nn::Module {
 public:
  explicit BertSelfAttentionImpl(const BertConfig& config);

  /// hidden [batch, seq, hidden]; additive_mask [batch, 1, 1, seq] float (0 = attend, very
  /// negative = masked) or undefined. Returns the context [batch, seq, hidden]; when
  /// `probs_out` is non-null it receives the attention probabilities [batch, heads, seq, seq].
  /// With `queries` [batch, q_seq, hidden] (rows of `hidden`, e.g. the first position alone)
  /// only those rows attend, to every position of `hidden`: the context is [batch, q_seq,
  /// hidden] and the probabilities [batch, heads, q_seq, seq].
  torch::Tensor forward(const torch::Tensor& hidden,
                        const torch::Tensor& additive_mask,
                        torch::Tensor* probs_out = nullptr,
                        const torch::Tensor& queries = {});

 private:
  torch::Tensor split_heads(const torch::Tensor& x) const;
  /// forward() for a few `rows` of `hidden` without the keys and values of every position, or
  /// undefined where that does not apply or would not save work (see attention.cpp).
  torch::Tensor attend_rows_without_keys(const torch::Tensor& hidden,
                                         const torch::Tensor& additive_mask,
                                         torch::Tensor* probs_out,
                                         const torch::Tensor& rows);

  int64_t num_heads_;
  int64_t head_dim_;
  Linear query_{nullptr}, key_{nullptr}, value_{nullptr};
  Dropout dropout_{nullptr};
};
TORCH_MODULE(BertSelfAttention);

/// Output projection of attention with residual + LayerNorm. Children: dense, LayerNorm, dropout.
class BertSelfOutputImpl : public torch::nn::Module {
 public:
  explicit BertSelfOutputImpl(const BertConfig& config);
  /// LayerNorm(dropout(dense(hidden)) + residual); both [batch, seq, hidden].
  torch::Tensor forward(const torch::Tensor& hidden, const torch::Tensor& residual);

 private:
  Linear dense_{nullptr};
  torch::nn::LayerNorm layer_norm_{nullptr};
  Dropout dropout_{nullptr};
};
TORCH_MODULE(BertSelfOutput);

/// Children: self (BertSelfAttention), output (BertSelfOutput).
class BertAttentionImpl : public torch::nn::Module {
 public:
  explicit BertAttentionImpl(const BertConfig& config);
  /// [batch, seq, hidden] -> [batch, seq, hidden]; with `queries` [batch, rows, hidden] (rows
  /// of `hidden`) the output of those rows alone, [batch, rows, hidden].
  torch::Tensor forward(const torch::Tensor& hidden,
                        const torch::Tensor& additive_mask,
                        torch::Tensor* probs_out = nullptr,
                        const torch::Tensor& queries = {});

 private:
  BertSelfAttention self_{nullptr};
  BertSelfOutput output_{nullptr};
};
TORCH_MODULE(BertAttention);

}  // namespace bert
