#include "bert/model/dropout_kernel.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "bert/common/target_clones.h"
#include "bert/model/vec16.h"

namespace bert::kernels {
namespace {

using namespace vec16;  // NOLINT(google-build-using-namespace): the kernels' own helpers

/// murmur3's 32-bit finaliser, in place: every input bit reaches every output bit. On one
/// uint32_t or on the 16 lanes of a U32x16 (vec16.h), the same operations.
template <class Word>
__attribute__((always_inline)) inline void fmix32_in_place(Word& h) {
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
}
inline uint32_t fmix32(uint32_t h) {
  fmix32_in_place(h);
  return h;
}
/// Two keyed finaliser rounds over the element index: independent-looking bits per element and
/// per key pair (keys come from LibTorch's generator, one pair per dropout call).
inline uint32_t mask_hash(uint64_t i, uint32_t key0, uint32_t key1) {
  const uint32_t lo = static_cast<uint32_t>(i), hi = static_cast<uint32_t>(i >> 32);
  return fmix32(fmix32(lo * 0x9E3779B1u + key0) ^ (key1 + hi * 0x632BE5ABu));
}

/// How many elements from `first` the 16-lane loops take: whole groups of 16 whose indices are
/// below 2^32, where mask_hash's high word is 0 (the lanes hash the low word only; same bits).
inline int64_t lane_elements(uint64_t first, int64_t n) {
  constexpr uint64_t kLowWord = uint64_t{1} << 32;
  if (first >= kLowWord) return 0;
  return std::min<int64_t>(n, static_cast<int64_t>(kLowWord - first)) / 16 * 16;
}

/// Into `keep`: scale's bits in the lanes of the 16 elements from `index` that are kept, else 0.
/// (An out-parameter, not a returned vector: clang refuses a 64-byte vector return in the
/// clones built without AVX-512, whose calling convention for it would differ.)
__attribute__((always_inline)) inline void keep_lanes(U32x16& keep,
                                                      uint32_t index,
                                                      uint32_t key0,
                                                      uint32_t key1,
                                                      uint32_t threshold,
                                                      uint32_t scale_bits) {
  const U32x16 lanes = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  U32x16 hash = (index + lanes) * 0x9E3779B1u + key0;
  fmix32_in_place(hash);
  hash ^= key1;
  fmix32_in_place(hash);
  keep = reinterpret_cast<U32x16>(hash >= threshold) & scale_bits;
}

/// y[j] = x[j] * (keep(offset + j) ? scale : 0), computed in float32, for each pair of types;
/// inlined into each exported kernel's ISA clones.
template <class In, class Out>
__attribute__((always_inline)) inline void dropout_loop(
    const In* __restrict x, Out* __restrict y, int64_t n, int64_t offset, const DropoutMask& mask) {
  const uint32_t k0 = mask.key0, k1 = mask.key1, threshold = mask.threshold;
  const float scale = mask.scale;
  const uint32_t scale_bits = float_bits(scale);
  const uint64_t first = static_cast<uint64_t>(offset);
  const int64_t lanes = lane_elements(first, n);
  for (int64_t j = 0; j < lanes; j += 16) {
    F32x16 in;
    load_lanes(in, x + j);
    U32x16 keep;
    keep_lanes(keep, static_cast<uint32_t>(first + j), k0, k1, threshold, scale_bits);
    store_lanes(y + j, in * reinterpret_cast<F32x16>(keep));
  }
  for (int64_t j = lanes; j < n; ++j) {
    const float keep =
        mask_hash(first + static_cast<uint64_t>(j), k0, k1) >= threshold ? scale : 0.0f;
    narrow(widen(x[j]) * keep, y + j);
  }
}

}  // namespace

bool softmax_f32_vectorised() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx512 = __builtin_cpu_supports("avx512f");  // the clone the loader picks
  return avx512;
#else
  return false;
#endif
}

BERTFT_CLONES
void softmax_f32(float* __restrict x, int64_t rows, int64_t cols) {
  const int64_t whole = cols / 16 * 16, rest = cols - whole;
  const float lowest = -std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * cols;
    F32x16 v, top = lowest - F32x16{};
    // The maximum: NaN lanes lose every comparison; the row's sum then makes the row NaN.
    for (int64_t j = 0; j < whole; j += 16) {
      load_lanes(v, row + j);
      top = v > top ? v : top;
    }
    if (rest > 0) {
      load_part(v, row + whole, rest, lowest);
      top = v > top ? v : top;
    }
    const float m = max_of_lanes(top);
    F32x16 sum = {};
    for (int64_t j = 0; j < whole; j += 16) {
      load_lanes(v, row + j);
      v -= m;
      exp_lanes(v);
      store_lanes(row + j, v);
      sum += v;
    }
    if (rest > 0) {
      load_part(v, row + whole, rest, lowest);  // e^-inf: 0, nothing added
      v -= m;
      exp_lanes(v);
      store_part(row + whole, v, rest);
      sum += v;
    }
    const float inverse = 1.0f / sum_of_lanes(sum);
    for (int64_t j = 0; j < whole; j += 16) {
      load_lanes(v, row + j);
      store_lanes(row + j, v * inverse);
    }
    for (int64_t j = whole; j < cols; ++j) row[j] *= inverse;
  }
}

BERTFT_CLONES
void dropout_f32(const float* __restrict x,
                 float* __restrict y,
                 int64_t n,
                 int64_t offset,
                 const DropoutMask& mask) {
  dropout_loop(x, y, n, offset, mask);
}

BERTFT_CLONES
void dropout_bf16(const uint16_t* __restrict x,
                  uint16_t* __restrict y,
                  int64_t n,
                  int64_t offset,
                  const DropoutMask& mask) {
  dropout_loop(x, y, n, offset, mask);
}

BERTFT_CLONES
void dropout_f32_to_bf16(const float* __restrict x,
                         uint16_t* __restrict y,
                         int64_t n,
                         int64_t offset,
                         const DropoutMask& mask) {
  dropout_loop(x, y, n, offset, mask);
}

BERTFT_CLONES
void softmax_grad_f32(const float* __restrict p,
                      const float* __restrict g,
                      float* __restrict out,
                      int64_t rows,
                      int64_t cols,
                      int64_t offset,
                      const DropoutMask* mask) {
  const DropoutMask none;
  const DropoutMask& m = mask != nullptr ? *mask : none;
  const uint32_t scale_bits = float_bits(m.scale);
  for (int64_t r = 0; r < rows; ++r) {
    const float* pr = p + r * cols;
    const float* gr = g + r * cols;
    float* o = out + r * cols;
    const uint64_t first = static_cast<uint64_t>(offset + r * cols);
    const int64_t lanes = mask != nullptr ? lane_elements(first, cols) : cols / 16 * 16;
    // d into out, and the 16 lanes of sum p d (their total in a fixed order: the same on any
    // thread and chunking).
    F32x16 sum = {};
    for (int64_t j = 0; j < lanes; j += 16) {
      F32x16 d, pv;
      load_lanes(d, gr + j);
      load_lanes(pv, pr + j);
      if (mask != nullptr) {
        U32x16 keep;
        keep_lanes(keep, static_cast<uint32_t>(first + j), m.key0, m.key1, m.threshold, scale_bits);
        d = d * reinterpret_cast<F32x16>(keep);
      }
      store_lanes(o + j, d);
      sum += pv * d;
    }
    float dot = 0.0f;
    for (int lane = 0; lane < 16; ++lane) dot += sum[lane];
    for (int64_t j = lanes; j < cols; ++j) {
      float d = gr[j];
      if (mask != nullptr)
        d *= mask_hash(first + static_cast<uint64_t>(j), m.key0, m.key1) >= m.threshold ? m.scale
                                                                                        : 0.0f;
      o[j] = d;
      dot += pr[j] * d;
    }
    const int64_t whole = cols / 16 * 16;
    for (int64_t j = 0; j < whole; j += 16) {
      F32x16 d, pv;
      load_lanes(d, o + j);
      load_lanes(pv, pr + j);
      store_lanes(o + j, pv * (d - dot));
    }
    for (int64_t j = whole; j < cols; ++j) o[j] = pr[j] * (o[j] - dot);
  }
}

BERTFT_CLONES
void f32_to_bf16(const float* __restrict x, uint16_t* __restrict y, int64_t n) {
  const int64_t lanes = n / 16 * 16;
  for (int64_t j = 0; j < lanes; j += 16) {
    F32x16 in;
    load_lanes(in, x + j);
    store_lanes(y + j, in);
  }
  for (int64_t j = lanes; j < n; ++j) narrow(x[j], y + j);
}

}  // namespace bert::kernels
