#include "bert/model/attention_kernel.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <stdexcept>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "bert/model/transpose16.h"
#include "bert/model/vec16.h"
#ifndef __clang__
// GCC 12's AVX-512 unpack intrinsics pass _mm512_undefined_epi32() (a self-initialised
// variable) as the unused merge operand, which -Wmaybe-uninitialized reports in every caller.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define BERTFT_ATTENTION_KERNEL 1
#endif

namespace bert::kernels {
namespace {

std::atomic<bool> turned_on{true};

/// The layout of one call's scratch: k's pairs transposed, v's rows interleaved in pairs, the
/// queries' rows packed, the probabilities' rows (bf16, `width` wide: zeros past the keys).
struct Scratch {
  int64_t width, pairs;  ///< keys rounded up to 16; pairs of keys
  uint32_t *k_pairs, *v_pairs;
  uint16_t *queries, *probs;

  Scratch(int64_t seq, int64_t kv_seq, void* base)
      : width((kv_seq + 15) / 16 * 16), pairs((kv_seq + 1) / 2) {
    k_pairs = static_cast<uint32_t*>(base);
    v_pairs = k_pairs + kAttentionHeadDim / 2 * width;
    queries = reinterpret_cast<uint16_t*>(v_pairs + pairs * kAttentionHeadDim);
    probs = queries + seq * kAttentionHeadDim;
  }
  static int64_t bytes(int64_t seq, int64_t kv_seq) {
    const int64_t width = (kv_seq + 15) / 16 * 16, pairs = (kv_seq + 1) / 2;
    return static_cast<int64_t>(sizeof(uint32_t)) *
               (kAttentionHeadDim / 2 * width + pairs * kAttentionHeadDim) +
           static_cast<int64_t>(sizeof(uint16_t)) * (seq * kAttentionHeadDim + seq * width);
  }
};

#ifdef BERTFT_ATTENTION_KERNEL

using namespace vec16;  // NOLINT(google-build-using-namespace): the kernels' own helpers

#define BERTFT_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define BERTFT_AVX512_BF16_INLINE BERTFT_AVX512_BF16 __attribute__((always_inline)) inline

BERTFT_AVX512_BF16_INLINE F32x16 as_lanes(const __m512& v) {
  return reinterpret_cast<const F32x16&>(v);
}
/// The pair of bf16 values at p in all 16 lanes, as a pair product's operand.
BERTFT_AVX512_BF16_INLINE __m512bh pair_in_lanes(const uint16_t* p) {
  uint32_t pair;
  std::memcpy(&pair, p, sizeof pair);
  return reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(pair)));
}

/// k's pairs of columns as rows: k_pairs[p * width + j] = (k[j][2p], k[j][2p + 1]), zeros for
/// j >= kv_seq; 16 x 16 transposes of 32-bit pairs.
BERTFT_AVX512_BF16 void pack_keys(const uint16_t* k, int64_t k_row, int64_t kv_seq, Scratch& s) {
  for (int64_t j0 = 0; j0 < s.width; j0 += 16)
    for (int half = 0; half < 2; ++half) {
      __m512i r[16];
      for (int x = 0; x < 16; ++x)
        r[x] = j0 + x < kv_seq ? _mm512_loadu_si512(k + (j0 + x) * k_row + 32 * half)
                               : _mm512_setzero_si512();
      transpose16(r);  // r[x]: pair column x of the 16 rows
      for (int x = 0; x < 16; ++x)
        _mm512_storeu_si512(s.k_pairs + (16 * half + x) * s.width + j0, r[x]);
    }
}

/// v's rows in pairs, interleaved: v_pairs[jj * 64 + d] = (v[2 jj][d], v[2 jj + 1][d]), a zero
/// row past kv_seq.
BERTFT_AVX512_BF16 void pack_values(const uint16_t* v, int64_t v_row, int64_t kv_seq, Scratch& s) {
  // Lane 2i from the first row's 16 values, 2i + 1 from the second's (indices 32+: the second).
  const __m512i low = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8,
                                       39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  const __m512i high = _mm512_add_epi16(low, _mm512_set1_epi16(16));
  for (int64_t jj = 0; jj < s.pairs; ++jj) {
    const uint16_t* first = v + 2 * jj * v_row;
    const bool second_row = 2 * jj + 1 < kv_seq;
    for (int half = 0; half < 2; ++half) {
      const __m512i a = _mm512_loadu_si512(first + 32 * half);
      const __m512i b =
          second_row ? _mm512_loadu_si512(first + v_row + 32 * half) : _mm512_setzero_si512();
      uint32_t* out = s.v_pairs + jj * kAttentionHeadDim + 32 * half;
      _mm512_storeu_si512(out, _mm512_permutex2var_epi16(a, low, b));
      _mm512_storeu_si512(out + 16, _mm512_permutex2var_epi16(a, high, b));
    }
  }
}

/// The probabilities of every query row, 3 rows at a time, their `Vectors` x 16 scores each in
/// registers: the pair products over the 32 pairs of head_dim, then scale, mask, the softmax
/// of softmax_f32 (the same operations in the same order), rounded to bf16 into s.probs.
template <int Vectors>
BERTFT_AVX512_BF16 void probabilities(
    int64_t seq, int64_t kv_seq, float scale, const float* mask, Scratch& s) {
  constexpr int kRows = 3;
  const float lowest = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < seq; i += kRows) {
    const int64_t rows = std::min<int64_t>(kRows, seq - i);
    const uint16_t* q[kRows];
    for (int r = 0; r < kRows; ++r)  // past the last row: the last row again, not stored
      q[r] = s.queries + (i + std::min<int64_t>(r, rows - 1)) * kAttentionHeadDim;
    __m512 acc[kRows][Vectors];
    for (int r = 0; r < kRows; ++r)
      for (int c = 0; c < Vectors; ++c) acc[r][c] = _mm512_setzero_ps();
    for (int p = 0; p < kAttentionHeadDim / 2; ++p) {
      __m512bh qp[kRows];
      for (int r = 0; r < kRows; ++r) qp[r] = pair_in_lanes(q[r] + 2 * p);
      const uint32_t* kp = s.k_pairs + p * s.width;
      for (int c = 0; c < Vectors; ++c) {
        const __m512bh keys = reinterpret_cast<__m512bh>(_mm512_loadu_si512(kp + 16 * c));
        for (int r = 0; r < kRows; ++r) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], qp[r], keys);
      }
    }
    F32x16 top[kRows];
    for (int r = 0; r < kRows; ++r) {
      top[r] = lowest - F32x16{};
      for (int c = 0; c < Vectors; ++c) {
        __m512 x = _mm512_mul_ps(acc[r][c], _mm512_set1_ps(scale));
        // The scale's rounding, then the mask's (no fused multiply-add), as oneDNN's output pass.
        asm("" : "+v"(x));
        if (mask != nullptr) {
          const __mmask16 real = 16 * c + 16 <= kv_seq
                                     ? __mmask16{0xFFFF}
                                     : static_cast<__mmask16>((1u << (kv_seq - 16 * c)) - 1);
          x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(real, mask + 16 * c));
        }
        if (16 * c + 16 > kv_seq)  // past the keys: -inf, as softmax_f32's partial loads
          x = _mm512_mask_blend_ps(static_cast<__mmask16>((1u << (kv_seq - 16 * c)) - 1),
                                   _mm512_set1_ps(lowest), x);
        acc[r][c] = x;
        const F32x16 v = as_lanes(x);
        top[r] = v > top[r] ? v : top[r];
      }
    }
    for (int r = 0; r < kRows; ++r) {
      const float m = max_of_lanes(top[r]);
      F32x16 sum = {}, e[Vectors];
      for (int c = 0; c < Vectors; ++c) {
        e[c] = as_lanes(acc[r][c]);
        e[c] -= m;
        exp_lanes(e[c]);
        sum += e[c];
      }
      if (r >= rows) continue;
      const float inverse = 1.0f / sum_of_lanes(sum);
      uint16_t* row = s.probs + (i + r) * s.width;
      for (int c = 0; c < Vectors; ++c) store_lanes(row + 16 * c, e[c] * inverse);
    }
  }
}

/// out = P v, 6 query rows at a time, the context's 64 values of each in 4 registers.
BERTFT_AVX512_BF16 void context(int64_t seq, uint16_t* out, int64_t out_row, const Scratch& s) {
  constexpr int kRows = 6, kVectors = kAttentionHeadDim / 16;
  for (int64_t i = 0; i < seq; i += kRows) {
    const int64_t rows = std::min<int64_t>(kRows, seq - i);
    const uint16_t* p[kRows];
    for (int r = 0; r < kRows; ++r) p[r] = s.probs + (i + std::min<int64_t>(r, rows - 1)) * s.width;
    __m512 acc[kRows][kVectors];
    for (int r = 0; r < kRows; ++r)
      for (int c = 0; c < kVectors; ++c) acc[r][c] = _mm512_setzero_ps();
    for (int64_t jj = 0; jj < s.pairs; ++jj) {
      __m512bh values[kVectors];
      for (int c = 0; c < kVectors; ++c)
        values[c] = reinterpret_cast<__m512bh>(
            _mm512_loadu_si512(s.v_pairs + jj * kAttentionHeadDim + 16 * c));
      for (int r = 0; r < kRows; ++r) {
        const __m512bh pair = pair_in_lanes(p[r] + 2 * jj);
        for (int c = 0; c < kVectors; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], pair, values[c]);
      }
    }
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < kVectors; ++c)
        store_lanes(out + (i + r) * out_row + 16 * c, as_lanes(acc[r][c]));
  }
}

BERTFT_AVX512_BF16 void head(const uint16_t* q,
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
                             void* scratch) {
  Scratch s(seq, kv_seq, scratch);
  pack_keys(k, k_row, kv_seq, s);
  pack_values(v, v_row, kv_seq, s);
  // The queries' rows side by side: read 3 at a time, 64 times each, from the cache.
  for (int64_t i = 0; i < seq; ++i)
    std::memcpy(s.queries + i * kAttentionHeadDim, q + i * q_row, kAttentionHeadDim * 2);
  switch (s.width / 16) {
    case 1:
      probabilities<1>(seq, kv_seq, scale, mask, s);
      break;
    case 2:
      probabilities<2>(seq, kv_seq, scale, mask, s);
      break;
    case 3:
      probabilities<3>(seq, kv_seq, scale, mask, s);
      break;
    case 4:
      probabilities<4>(seq, kv_seq, scale, mask, s);
      break;
    case 5:
      probabilities<5>(seq, kv_seq, scale, mask, s);
      break;
    case 6:
      probabilities<6>(seq, kv_seq, scale, mask, s);
      break;
    case 7:
      probabilities<7>(seq, kv_seq, scale, mask, s);
      break;
    default:
      probabilities<8>(seq, kv_seq, scale, mask, s);
      break;
  }
  context(seq, out, out_row, s);
}

#endif

}  // namespace

bool attention_head_bf16_available() {
#ifdef BERTFT_ATTENTION_KERNEL
  static const bool cpu = __builtin_cpu_supports("avx512bf16") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return cpu && turned_on.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

void set_attention_head_bf16(bool on) {
  turned_on.store(on, std::memory_order_relaxed);
}

int64_t attention_head_bf16_scratch_bytes(int64_t seq, int64_t kv_seq) {
  return Scratch::bytes(seq, kv_seq);
}

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
                         void* scratch) {
  if (!attention_head_bf16_available() || kv_seq < 1 || kv_seq > kAttentionHeadMaxKeys || seq < 0)
    throw std::invalid_argument(
        "attention_head_bf16: needs AVX-512 BF16 and 1 to 128 keys (use the oneDNN path)");
#ifdef BERTFT_ATTENTION_KERNEL
  head(q, q_row, k, k_row, v, v_row, out, out_row, seq, kv_seq, scale, mask, scratch);
#else
  (void)q, (void)q_row, (void)k, (void)k_row, (void)v, (void)v_row, (void)out, (void)out_row,
      (void)seq, (void)scale, (void)mask, (void)scratch;
#endif
}

}  // namespace bert::kernels
