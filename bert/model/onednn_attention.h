#pragma once

#include <torch/torch.h>

namespace bert {

/// Whether attention on q [..., seq, head_dim] and k^T [..., head_dim, kv_seq] goes head by head
/// (onednn_attention, onednn_attention_training): float32 or bf16, use_onednn_matmul, and unless
/// BERTFT_ATTENTION=batched (which keeps the batched products, for side-by-side measurements).
/// In bf16 (autocast's projections) the per-head products take bf16 operands as autocast's
/// would, while the scores, softmax, dropout and the softmax's gradient stay float32 in the
/// thread's buffers (the batched path rounds the scores and probabilities to bf16 in memory).
bool use_onednn_attention(const torch::Tensor& q, const torch::Tensor& k_t);

/// softmax(scale * q k^T + mask) v for inference (no autograd, no dropout, the probabilities not
/// kept): q [batch, heads, seq, head_dim], k and v [batch, heads, kv_seq, head_dim] float32 CPU
/// views in any layout (the projections' head-split views are read in place); additive_mask
/// [batch, 1, 1, kv_seq] (0 = attend, very negative = masked) or undefined. Returns the context
/// [batch, seq, heads * head_dim]. (Or all three bf16: the context is bf16; see above.) Head by
/// head, each thread's scores kept in its own cache-sized buffer (never the whole [batch, heads,
/// seq, kv_seq]), the scale and the mask applied in the first GEMM's output pass (rows without a
/// masked position skip the add), the softmax kernels::softmax_f32 (oneDNN's where that is not
/// vectorised), the context written in place. Needs onednn_built().
torch::Tensor onednn_attention(const torch::Tensor& q,
                               const torch::Tensor& k,
                               const torch::Tensor& v,
                               const torch::Tensor& additive_mask,
                               double scale);

/// bf16's lowest finite value: a float32 mask's lowest would round to -inf in bf16 (a fully
/// masked row would then give NaN, not HF's uniform row).
inline constexpr double kBf16Lowest = -3.3895313892515355e38;

/// The same attention through the batched ops: oneDNN's batched matmul over every head (float32,
/// or bf16 under autocast; the mask added in its output pass where `scale` is a power of two,
/// otherwise HF's order: divided by 1 / scale, then the mask added), LibTorch's softmax (its
/// probabilities into `probs_out` when given), hash_dropout with `dropout_p` over all of them,
/// the context written in [batch, seq, hidden] order. Differentiable. The path for requested
/// attentions, under BERTFT_ATTENTION=batched, and what the head-by-head paths fall back on.
torch::Tensor onednn_attention_batched(const torch::Tensor& q,
                                       const torch::Tensor& k,
                                       const torch::Tensor& v,
                                       const torch::Tensor& additive_mask,
                                       double scale,
                                       double dropout_p,
                                       torch::Tensor* probs_out = nullptr);

/// The same for training: dropout(softmax(scale * q k^T + mask), dropout_p) v, differentiable in
/// q, k and v. The probabilities are dropped exactly as hash_dropout drops the whole
/// [batch, heads, seq, kv_seq] tensor of them (one draw of keys from the same generator, each
/// element's decision from its index in that tensor), so the batched path and this one give the
/// same masks after the same seed. Head by head forward and backward: nothing of size
/// [batch, heads, seq, kv_seq] is written to memory or kept for backward, which recomputes each
/// head's probabilities in its thread's buffers (one more q k^T product per head) and takes the
/// softmax's gradient with kernels::softmax_grad_f32 (no double backward). 0 <= dropout_p <= 1 (1
/// takes the batched ops).
torch::Tensor onednn_attention_training(const torch::Tensor& q,
                                        const torch::Tensor& k,
                                        const torch::Tensor& v,
                                        const torch::Tensor& additive_mask,
                                        double scale,
                                        double dropout_p);

}  // namespace bert
