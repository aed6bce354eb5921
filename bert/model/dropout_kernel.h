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

}  // namespace bert::kernels
