#include "bert/model/dropout_kernel.h"

#include <cstring>

namespace bert::kernels {
namespace {

#if defined(__x86_64__) && defined(__GNUC__)
#define BERTFT_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define BERTFT_CLONES
#endif

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline uint16_t round_bf16(float f) {
  const uint32_t u = float_bits(f);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>((u & 0x7FFFFFFFu) > 0x7F800000u ? 0x7FC0u : rounded);
}
inline float widen_bf16(uint16_t h) {
  return bits_float(static_cast<uint32_t>(h) << 16);
}

/// murmur3's 32-bit finaliser: every input bit reaches every output bit.
inline uint32_t fmix32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return h;
}
/// Two keyed finaliser rounds over the element index: independent-looking bits per element and
/// per key pair (keys come from LibTorch's generator, one pair per dropout call).
inline uint32_t mask_hash(uint64_t i, uint32_t key0, uint32_t key1) {
  const uint32_t lo = static_cast<uint32_t>(i), hi = static_cast<uint32_t>(i >> 32);
  return fmix32(fmix32(lo * 0x9E3779B1u + key0) ^ (key1 + hi * 0x632BE5ABu));
}

}  // namespace

BERTFT_CLONES
void dropout_f32(const float* __restrict x,
                 float* __restrict y,
                 int64_t n,
                 int64_t offset,
                 const DropoutMask& mask) {
  const uint32_t k0 = mask.key0, k1 = mask.key1, threshold = mask.threshold;
  const float scale = mask.scale;
  const uint64_t first = static_cast<uint64_t>(offset);
  for (int64_t j = 0; j < n; ++j) {  // a multiplier, not a branch, so the loop vectorises
    const float keep =
        mask_hash(first + static_cast<uint64_t>(j), k0, k1) >= threshold ? scale : 0.0f;
    y[j] = x[j] * keep;
  }
}

BERTFT_CLONES
void dropout_bf16(const uint16_t* __restrict x,
                  uint16_t* __restrict y,
                  int64_t n,
                  int64_t offset,
                  const DropoutMask& mask) {
  const uint32_t k0 = mask.key0, k1 = mask.key1, threshold = mask.threshold;
  const float scale = mask.scale;
  const uint64_t first = static_cast<uint64_t>(offset);
  for (int64_t j = 0; j < n; ++j) {
    const float keep =
        mask_hash(first + static_cast<uint64_t>(j), k0, k1) >= threshold ? scale : 0.0f;
    y[j] = round_bf16(widen_bf16(x[j]) * keep);
  }
}

}  // namespace bert::kernels
