#include "bert/model/attention.h"

#include <cmath>

namespace bert {

BertSelfAttentionImpl::BertSelfAttentionImpl(const BertConfig& c)
    : num_heads_(c.num_attention_heads()), head_dim_(c.head_dim()) {
  TORCH_CHECK(c.hidden_size() % c.num_attention_heads() == 0, "hidden_size (", c.hidden_size(),
              ") must be divisible by num_attention_heads (", c.num_attention_heads(), ")");
  query_ = register_module("query", torch::nn::Linear(c.hidden_size(), c.hidden_size()));
  key_ = register_module("key", torch::nn::Linear(c.hidden_size(), c.hidden_size()));
  value_ = register_module("value", torch::nn::Linear(c.hidden_size(), c.hidden_size()));
  dropout_ = register_module("dropout", Dropout(c.attention_probs_dropout_prob()));
}

torch::Tensor BertSelfAttentionImpl::split_heads(const torch::Tensor& x) const {
  const int64_t batch = x.size(0), seq = x.size(1);
  return x
      .view({batch, seq, num_heads_, head_dim_})  // [batch, seq, heads, head_dim]
      .transpose(1, 2);                           // [batch, heads, seq, head_dim]
}

torch::Tensor BertSelfAttentionImpl::forward(const torch::Tensor& hidden,
                                             const torch::Tensor& additive_mask,
                                             torch::Tensor* probs_out) {
  const int64_t batch = hidden.size(0), seq = hidden.size(1);
  const torch::Tensor q = split_heads(query_(hidden));  // [batch, heads, seq, head_dim]
  const torch::Tensor k = split_heads(key_(hidden));    // [batch, heads, seq, head_dim]
  const torch::Tensor v = split_heads(value_(hidden));  // [batch, heads, seq, head_dim]

  // Same order of operations as HF: scores, then the scale, then the mask.
  torch::Tensor scores = torch::matmul(q, k.transpose(-1, -2))  // [batch, heads, seq, seq]
                         / std::sqrt(static_cast<double>(head_dim_));
  if (additive_mask.defined())
    scores = scores + additive_mask;  // mask broadcasts over heads, queries
  torch::Tensor probs = torch::softmax(scores, /*dim=*/-1);
  if (probs_out != nullptr) *probs_out = probs;
  probs = dropout_(probs);
  return torch::matmul(probs, v)  // [batch, heads, seq, head_dim]
      .transpose(1, 2)            // [batch, seq, heads, head_dim]
      .reshape({batch, seq, num_heads_ * head_dim_});
}

BertSelfOutputImpl::BertSelfOutputImpl(const BertConfig& c) {
  dense_ = register_module("dense", torch::nn::Linear(c.hidden_size(), c.hidden_size()));
  layer_norm_ = register_module(
      "LayerNorm",
      torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.hidden_size()}).eps(c.layer_norm_eps())));
  dropout_ = register_module("dropout", Dropout(c.hidden_dropout_prob()));
}

torch::Tensor BertSelfOutputImpl::forward(const torch::Tensor& hidden,
                                          const torch::Tensor& residual) {
  return layer_norm_(dropout_(dense_(hidden)) + residual);
}

BertAttentionImpl::BertAttentionImpl(const BertConfig& c) {
  self_ = register_module("self", BertSelfAttention(c));
  output_ = register_module("output", BertSelfOutput(c));
}

torch::Tensor BertAttentionImpl::forward(const torch::Tensor& hidden,
                                         const torch::Tensor& additive_mask,
                                         torch::Tensor* probs_out) {
  return output_(self_->forward(hidden, additive_mask, probs_out), hidden);
}

}  // namespace bert
