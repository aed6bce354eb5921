#include "bert/model/attention.h"

#include <cmath>

#include "bert/common/autocast.h"
#include "bert/model/layer_norm.h"
#include "bert/model/onednn_attention.h"
#include "bert/model/onednn_linear.h"

namespace bert {

BertSelfAttentionImpl::BertSelfAttentionImpl(const BertConfig& c)
    : num_heads_(c.num_attention_heads()), head_dim_(c.head_dim()) {
  TORCH_CHECK(c.hidden_size() % c.num_attention_heads() == 0, "hidden_size (", c.hidden_size(),
              ") must be divisible by num_attention_heads (", c.num_attention_heads(), ")");
  query_ = register_module("query", Linear(c.hidden_size(), c.hidden_size()));
  key_ = register_module("key", Linear(c.hidden_size(), c.hidden_size()));
  value_ = register_module("value", Linear(c.hidden_size(), c.hidden_size()));
  dropout_ = register_module("dropout", Dropout(c.attention_probs_dropout_prob()));
}

torch::Tensor BertSelfAttentionImpl::split_heads(const torch::Tensor& x) const {
  const int64_t batch = x.size(0), seq = x.size(1);
  return x
      .view({batch, seq, num_heads_, head_dim_})  // [batch, seq, heads, head_dim]
      .transpose(1, 2);                           // [batch, heads, seq, head_dim]
}

namespace {

/// The additive mask [batch, 1, 1, seq] as baddbmm's input [batch * heads, 1, seq]. Under
/// autocast baddbmm casts it to the low-precision type, where fp32's lowest would round to -inf
/// (a fully masked row would then give NaN, not HF's uniform row): clamp to that type's lowest.
torch::Tensor mask_for_heads(const torch::Tensor& additive_mask, int64_t heads) {
  const int64_t batch = additive_mask.size(0), seq = additive_mask.size(-1);
  torch::Tensor mask =
      additive_mask.expand({batch, heads, 1, seq}).reshape({batch * heads, 1, seq});
  const bool cpu = autocast::enabled(c10::kCPU), gpu = autocast::enabled(c10::kCUDA);
  if (cpu || gpu) {
    const auto low = cpu ? autocast::dtype(c10::kCPU) : autocast::dtype(c10::kCUDA);
    mask = mask.clamp_min(low == torch::kHalf ? -65504.0 : kBf16Lowest);
  }
  return mask;
}

/// Whether 1/sqrt(head_dim) is a power of two (head_dim 64 as in every BERT size, 4, 16, 256):
/// scaling by it then commutes with rounding.
bool exact_scale(int64_t head_dim) {
  const double root = std::sqrt(static_cast<double>(head_dim));
  int exponent = 0;
  return root * root == static_cast<double>(head_dim) && std::frexp(root, &exponent) == 0.5;
}

}  // namespace

// For a few query rows (a sentence head's first position) the keys and values of every position
// cost far more than the rows' own attention. Per head h, with W^k_h, b^k_h the head's rows of the
// key projection: q_h . k_h(x_s) = (q_h W^k_h) . x_s + q_h . b^k_h, whose second term is the same
// for every position s (kept, a scalar per row and head, though softmax ignores it); and since a
// row's probabilities p_s sum to one, sum_s p_s v_h(x_s) = (sum_s p_s x_s) W^v_h^T + b^v_h. So each
// row's query goes back through the key weights (one [heads, width] per row), its scores and mix of
// positions are taken against the hidden states themselves, and the mix goes through the value
// weights: per row 2 width^2 + 2 heads seq width multiply-adds instead of the projections' 2 seq
// width^2 for the sequence (and in training their backward too). With dropout the probabilities'
// dropped sum weighs the value bias (hash_dropout over the probabilities as [batch, rows, heads,
// seq]). In float32 without autocast or int8 projections; the sums run in another order than the
// plain path's, so the result equals it to rounding (tests: within 1e-5).
torch::Tensor BertSelfAttentionImpl::attend_rows_without_keys(const torch::Tensor& hidden,
                                                              const torch::Tensor& additive_mask,
                                                              torch::Tensor* probs_out,
                                                              const torch::Tensor& rows) {
  const int64_t batch = hidden.size(0), seq = hidden.size(1), width = hidden.size(2);
  const int64_t count = rows.size(1), heads = num_heads_, dim = head_dim_;
  if (key_->is_int8() || value_->is_int8() || query_->is_int8() ||
      hidden.scalar_type() != torch::kFloat || key_->weight.scalar_type() != torch::kFloat ||
      autocast::enabled(hidden.device().type()))
    return {};
  // A padding mask [batch or 1, 1, 1, seq] (as the plain paths take), or none.
  if (additive_mask.defined() &&
      (additive_mask.dim() != 4 || additive_mask.size(1) != 1 || additive_mask.size(2) != 1))
    return {};
  if (count * (width + heads * seq) >= seq * (width + count)) return {};
  const int64_t n = batch * count;
  // Small batched products (a few MFLOP each): LibTorch's bmm runs such shapes at ~1 GFLOP/s
  // here, and with head-split or transposed operands copies them first; onednn_matmul reads them
  // in place. `strides` lays the [heads, n, ...] results out as [n, heads, ...].
  const auto product = [](const torch::Tensor& a, const torch::Tensor& b,
                          c10::IntArrayRef strides = {}) {
    return use_onednn_matmul(a, b) ? onednn_matmul(a, b, {}, strides) : torch::matmul(a, b);
  };
  const torch::Tensor q = query_(rows).view({n, heads, dim});
  // [batch, rows * heads, width]: each head's query through the head's key weights.
  const torch::Tensor through_keys =
      product(q.transpose(0, 1), key_->weight.view({heads, dim, width}), {width, heads * width, 1})
          .transpose(0, 1)
          .reshape({batch, count * heads, width});
  torch::Tensor scores = product(through_keys, hidden.transpose(1, 2));  // [batch, rows*heads, seq]
  // The key bias's term, the same for every position: no change to the probabilities, but the
  // scores are HF's and the bias gets its gradient (zero to rounding, as HF's).
  if (key_->bias.defined())
    scores.add_((q * key_->bias.view({heads, dim})).sum(-1).view({batch, count * heads, 1}));
  scores.mul_(1.0 / std::sqrt(static_cast<double>(dim)));
  if (additive_mask.defined()) scores.add_(additive_mask.view({additive_mask.size(0), 1, seq}));
  const torch::Tensor probs = torch::softmax(scores, /*dim=*/-1);
  if (probs_out != nullptr)  // [batch, heads, rows, seq]
    *probs_out = probs.view({batch, count, heads, seq}).transpose(1, 2);
  const torch::Tensor dropped = dropout_(probs);
  // [n, heads, width]: each row's and head's mix of the positions' hidden states.
  const torch::Tensor mixed = product(dropped, hidden).view({n, heads, width});
  torch::Tensor context =  // [n, heads, dim]
      product(mixed.transpose(0, 1), value_->weight.view({heads, dim, width}).transpose(1, 2),
              {dim, heads * dim, 1})
          .transpose(0, 1);
  if (value_->bias.defined()) {
    const torch::Tensor bias = value_->bias.view({heads, dim});
    if (dropout_->active())
      context = context + dropped.sum(-1).view({n, heads, 1}) * bias;
    else
      context = context + bias;
  }
  return context.reshape({batch, count, width});
}

torch::Tensor BertSelfAttentionImpl::forward(const torch::Tensor& hidden,
                                             const torch::Tensor& additive_mask,
                                             torch::Tensor* probs_out,
                                             const torch::Tensor& queries) {
  if (queries.defined())
    if (auto context = attend_rows_without_keys(hidden, additive_mask, probs_out, queries);
        context.defined())
      return context;
  const torch::Tensor& rows = queries.defined() ? queries : hidden;
  const int64_t batch = hidden.size(0), seq = rows.size(1), kv_seq = hidden.size(1);
  const int64_t heads = num_heads_;
  // [batch, heads, seq or kv_seq, head_dim] views of the projections' [batch, seq, hidden].
  const torch::Tensor q = split_heads(query_(rows));
  const torch::Tensor k = split_heads(key_(hidden));
  const torch::Tensor v = split_heads(value_(hidden));
  // In float32 or bf16 on oneDNN, unless the probabilities are asked for: head by head, the scores
  // never written out whole (in training, each head's probabilities recomputed for backward).
  // (Where 1/sqrt(head_dim) is not a power of two, its product differs from HF's quotient by at
  // most an ulp of each score.)
  if (probs_out == nullptr && use_onednn_attention(q, k.transpose(-1, -2))) {
    const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
    const bool grad = torch::GradMode::is_enabled() &&
                      (q.requires_grad() || k.requires_grad() || v.requires_grad());
    if (!grad && !dropout_->active()) return onednn_attention(q, k, v, additive_mask, scale);
    return onednn_attention_training(q, k, v, additive_mask, scale,
                                     dropout_->active() ? dropout_->p : 0.0);
  }
  if (use_onednn_matmul(q, k.transpose(-1, -2)))
    return onednn_attention_batched(q, k, v, additive_mask,
                                    1.0 / std::sqrt(static_cast<double>(head_dim_)),
                                    dropout_->active() ? dropout_->p : 0.0, probs_out);

  // [batch * heads, seq, head_dim]: copies out of the projections' [batch, seq, heads, head_dim].
  const auto flat = [&](const torch::Tensor& x) {
    return x.reshape({batch * heads, x.size(2), head_dim_});
  };
  // HF computes (q k^T) / sqrt(head_dim) + mask in three passes over [batch, heads, seq, seq].
  // Where 1/sqrt(head_dim) is a power of two scaling commutes with rounding, and one baddbmm
  // (alpha * q k^T + mask) gives HF's scores bit for bit in the GEMM's own output pass.
  // Otherwise HF's order in place: bmm, divide, add.
  const double root = std::sqrt(static_cast<double>(head_dim_));
  const bool masked = additive_mask.defined();
  const torch::Tensor mask = masked ? mask_for_heads(additive_mask, heads) : torch::Tensor();
  torch::Tensor scores;  // [batch * heads, seq, kv_seq]
  if (exact_scale(head_dim_)) {
    const torch::Tensor input = masked ? mask : torch::zeros({1, 1, 1}, q.options());
    scores = torch::baddbmm(input, flat(q), flat(k).transpose(1, 2), /*beta=*/masked ? 1.0 : 0.0,
                            /*alpha=*/1.0 / root);
  } else {
    scores = torch::bmm(flat(q), flat(k).transpose(1, 2)).div_(root);
    if (masked) scores.add_(mask);
  }
  torch::Tensor probs = torch::softmax(scores, /*dim=*/-1);
  if (probs_out != nullptr) *probs_out = probs.view({batch, heads, seq, kv_seq});
  probs = dropout_(probs);
  return torch::bmm(probs, flat(v))  // [batch * heads, seq, head_dim]
      .view({batch, heads, seq, head_dim_})
      .transpose(1, 2)  // [batch, seq, heads, head_dim]
      .reshape({batch, seq, heads * head_dim_});
}

BertSelfOutputImpl::BertSelfOutputImpl(const BertConfig& c) {
  dense_ = register_module("dense", Linear(c.hidden_size(), c.hidden_size()));
  layer_norm_ = register_module(
      "LayerNorm",
      torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.hidden_size()}).eps(c.layer_norm_eps())));
  // DistilBERT adds the attention output to the residual without dropout.
  const bool dropout = c.family() != ModelFamily::kDistilBert;
  dropout_ = register_module("dropout", Dropout(dropout ? c.hidden_dropout_prob() : 0.0));
}

torch::Tensor BertSelfOutputImpl::forward(const torch::Tensor& hidden,
                                          const torch::Tensor& residual) {
  if (!dropout_->active())
    if (const auto sum = linear_add_if_inference(*dense_, hidden, residual); sum.defined())
      return add_layer_norm(*layer_norm_, sum);
  return add_layer_norm(*layer_norm_, dropout_(dense_(hidden)), residual);
}

BertAttentionImpl::BertAttentionImpl(const BertConfig& c) {
  self_ = register_module("self", BertSelfAttention(c));
  output_ = register_module("output", BertSelfOutput(c));
}

torch::Tensor BertAttentionImpl::forward(const torch::Tensor& hidden,
                                         const torch::Tensor& additive_mask,
                                         torch::Tensor* probs_out,
                                         const torch::Tensor& queries) {
  const torch::Tensor context = self_->forward(hidden, additive_mask, probs_out, queries);
  return output_(context, queries.defined() ? queries : hidden);
}

}  // namespace bert
