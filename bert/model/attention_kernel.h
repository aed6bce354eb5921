#pragma once

#include <cstdint>

namespace bert::kernels {

/// One attention head in bf16 with AVX-512 BF16's pair products (vdpbf16ps), for inference:
/// the scores, their softmax and the context in one pass over the head, the probabilities kept
/// in the core's cache. The same arithmetic as the head-by-head oneDNN path of
/// bert::onednn_attention (bert/model/onednn_attention.h) for bf16 operands: the scores summed
/// in float32 pair by pair, times the scale, plus the mask, softmax_f32's exponential and
/// folds, the probabilities rounded to bf16 and the context summed in float32 pair by pair,
/// rounded to bf16. Written by hand because oneDNN 2.6 runs a head's products on strided
/// operands as gemm:jit at about half its rate and leaves the softmax between them to a
/// separate pass (bench/RESULTS.md, fifty-third session).

/// The head shapes it takes: head_dim 64 and 1 to 128 keys (more keys do not fit its registers).
constexpr int64_t kAttentionHeadDim = 64;
constexpr int64_t kAttentionHeadMaxKeys = 128;

/// Whether attention_head_bf16 runs here: an x86-64 CPU with AVX-512 BF16 (and BW, VL), and not
/// turned off by set_attention_head_bf16(false).
bool attention_head_bf16_available();
/// Turns the kernel off (false), or on again where the CPU has it: the tests compare it with
/// the oneDNN path.
void set_attention_head_bf16(bool on);

/// The scratch one call needs (bytes) for `seq` queries and `kv_seq` keys.
int64_t attention_head_bf16_scratch_bytes(int64_t seq, int64_t kv_seq);

/// One head: out[i] = sum over j of P[i, j] v[j], P[i] = softmax over j of scale (q[i] . k[j])
/// (+ mask[j]); q: `seq` rows of 64 bf16 values `q_row` elements apart, k and v: `kv_seq` rows
/// (1 <= kv_seq <= 128), out: `seq` rows `out_row` apart; mask: `kv_seq` float32 values to add,
/// or null. bf16 values are their raw 16 bits. Only where attention_head_bf16_available().
void attention_head_bf16(const uint16_t* q,
                         int64_t q_row,
                         const uint16_t* k,
                         int64_t k_row,
                         const uint16_t* v,
                         int64_t v_row,
                         uint16_t* out,
                         int64_t out_row,
                         int64_t seq,
                         int64_t kv_seq,
                         float scale,
                         const float* mask,
                         void* scratch);

}  // namespace bert::kernels
