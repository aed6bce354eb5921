#pragma once

#include <cstdint>

namespace bert::kernels {

/// The CPU loops behind bert::hash_dropout (bert/model/dropout.h), over contiguous buffers.
/// Vectorised for AVX-512, AVX2 or baseline x86-64, chosen at run time. bf16 values are their raw
/// 16 bits.

/// The dropout mask of element `i` (counting from the tensor's first element): a 32-bit hash of
/// (i, key0, key1); the element is kept when the hash is >= threshold (threshold = p * 2^32).
/// The same (keys, i) always give the same decision, whatever the chunking or thread count.
struct DropoutMask {
  uint32_t key0 = 0, key1 = 0, threshold = 0;
  float scale = 1.0f;  ///< 1 / (1 - p): applied to kept elements
};
/// y[j] = x[j] * (keep(offset + j) ? scale : 0) for j in [0, n).
void dropout_f32(const float* x, float* y, int64_t n, int64_t offset, const DropoutMask& mask);
/// The same on bfloat16 (computed in float32, rounded once to nearest even).
void dropout_bf16(
    const uint16_t* x, uint16_t* y, int64_t n, int64_t offset, const DropoutMask& mask);
/// The float32 dropout written as bfloat16: y[j] = bf16(x[j] * (keep(offset + j) ? scale : 0)),
/// rounded once to nearest even (the attention's float32 probabilities into a bf16 product).
void dropout_f32_to_bf16(
    const float* x, uint16_t* y, int64_t n, int64_t offset, const DropoutMask& mask);
/// y[j] = bf16(x[j]), rounded to nearest even (any NaN as 0x7FC0), as LibTorch's conversion.
void f32_to_bf16(const float* x, uint16_t* y, int64_t n);

/// The softmax over each of `rows` rows of `cols` (row-major), in place: x[r, c] =
/// e^(x[r, c] - m) / sum over c' of e^(x[r, c'] - m), m the row's maximum (float32 throughout;
/// e^ within 1e-7 relative of the exact value, and 0 below e^-86.5, where it is under 2^-124).
/// A row with a NaN, or with +inf, or only -inf, is NaN, as LibTorch's softmax. One attention
/// head's probabilities: oneDNN 2.6's softmax took 10 us for 128 x 128 on an AVX-512 core, this
/// 4 (its row maximum and sum folded in registers; oneDNN's rows are as short). Correct on any
/// CPU, fast only where softmax_f32_vectorised().
void softmax_f32(float* x, int64_t rows, int64_t cols);
/// Whether softmax_f32 runs its 16-lane code as vector instructions: where the CPU has AVX-512.
/// GCC 12 lowers a 64-byte vector's float comparisons to one scalar compare a lane in the AVX2
/// and baseline builds (33 us for 128 x 128 on an AVX2 core, oneDNN's AVX2 softmax 10).
bool softmax_f32_vectorised();

/// The softmax's gradient over `rows` rows of `cols` (row-major, one attention head's
/// probabilities): with d the gradient `g` of the softmax's output, first dropped where `mask` is
/// given (d[r, c] = dropout_f32's product for element offset + r * cols + c), out[r, c] =
/// p[r, c] * (d[r, c] - sum over c' of p[r, c'] d[r, c']); p is the softmax's output. One pass
/// where oneDNN took two (its dropout, then its softmax backward, which oneDNN 2.6 runs in its
/// reference loop below AVX-512). `out` must not overlap p or g.
void softmax_grad_f32(const float* p,
                      const float* g,
                      float* out,
                      int64_t rows,
                      int64_t cols,
                      int64_t offset,
                      const DropoutMask* mask);

}  // namespace bert::kernels
