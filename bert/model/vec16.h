#pragma once

// 16 float32 lanes as GCC vectors, and the loads, stores and folds bertft's hand-written kernels
// (dropout_kernel.cpp, norm_kernel.cpp) share. Internal to those sources: include it only from a
// kernel source, each of whose exported functions is built in ISA clones (BERTFT_CLONES); the
// helpers are always inlined into each clone.

#include <cstdint>
#include <cstring>

// The 16-lane vectors below are handed only between always-inline helpers inside one ISA clone,
// never across a call boundary, so the warning that a 64-byte vector's calling convention
// differs by ISA does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace bert::kernels::vec16 {

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

/// 16 lanes as GCC vectors: the kernels' loops spell out the lanes (GCC's own vectorisation of the
/// element loops spent most of its time on the 64-bit index and, for bf16, on the conversions:
/// 0.73 ns an element against 0.37 here, float32 0.22 against 0.19, on one AVX-512 core).
typedef uint32_t U32x16 __attribute__((vector_size(64)));
typedef float F32x16 __attribute__((vector_size(64)));
typedef uint16_t U16x16 __attribute__((vector_size(32)));

/// round_bf16 on 16 lanes of float32 bits: nearest even, any NaN as 0x7FC0.
__attribute__((always_inline)) inline void round_lanes(U16x16& out, const U32x16& u) {
  const U32x16 rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const U32x16 nan = reinterpret_cast<U32x16>((u & 0x7FFFFFFFu) > 0x7F800000u);
  out = __builtin_convertvector((rounded & ~nan) | (0x7FC0u & nan), U16x16);
}

/// 16 lanes or one element of float32 or of bf16 (raw bits), as float32 and back (bf16 rounded
/// once to nearest even).
__attribute__((always_inline)) inline void load_lanes(F32x16& v, const float* x) {
  std::memcpy(&v, x, sizeof v);
}
__attribute__((always_inline)) inline void load_lanes(F32x16& v, const uint16_t* x) {
  U16x16 in;
  std::memcpy(&in, x, sizeof in);
  v = reinterpret_cast<F32x16>(__builtin_convertvector(in, U32x16) << 16);
}
__attribute__((always_inline)) inline void store_lanes(float* y, const F32x16& v) {
  std::memcpy(y, &v, sizeof v);
}
__attribute__((always_inline)) inline void store_lanes(uint16_t* y, const F32x16& v) {
  U16x16 out;
  round_lanes(out, reinterpret_cast<const U32x16&>(v));
  std::memcpy(y, &out, sizeof out);
}
inline float widen(float f) {
  return f;
}
inline float widen(uint16_t h) {
  return widen_bf16(h);
}
inline void narrow(float f, float* y) {
  *y = f;
}
inline void narrow(float f, uint16_t* y) {
  *y = round_bf16(f);
}

/// The 16 lanes folded into one by `combine`, as a tree of halves (a fixed order: the same on
/// every thread; a lane-by-lane loop cost as much as a 128-wide row's exponentials).
template <class Combine>
__attribute__((always_inline)) inline float fold_lanes(F32x16 v, Combine combine) {
  v = combine(v,
              __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7));
  v = combine(v,
              __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11));
  v = combine(v,
              __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13));
  v = combine(v,
              __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14));
  return v[0];
}
/// The largest lane (NaN lanes lose every comparison) and the sum of the lanes.
__attribute__((always_inline)) inline float max_of_lanes(F32x16 v) {
  return fold_lanes(
      v, [](F32x16 a, F32x16 b) __attribute__((always_inline)) { return b > a ? b : a; });
}
__attribute__((always_inline)) inline float sum_of_lanes(F32x16 v) {
  return fold_lanes(
      v, [](F32x16 a, F32x16 b) __attribute__((always_inline)) { return a + b; });
}

/// The `count` (< 16) elements from x into 16 lanes, the others `fill`; and back.
__attribute__((always_inline)) inline void load_part(F32x16& v,
                                                     const float* x,
                                                     int64_t count,
                                                     float fill) {
  for (int lane = 0; lane < 16; ++lane) v[lane] = lane < count ? x[lane] : fill;
}
__attribute__((always_inline)) inline void store_part(float* y, const F32x16& v, int64_t count) {
  for (int64_t lane = 0; lane < count; ++lane) y[lane] = v[lane];
}

/// e^v on 16 lanes, in place, for v <= 0 (a score less its row's maximum): 2^n e^r with
/// n = round(v log2 e) and |r| <= ln 2 / 2 (r = v - n ln 2 in two parts, so that n ln 2's
/// rounding stays out of r), e^r by its Taylor polynomial to r^7 (the first term left out,
/// r^8 / 8!, is below 6e-9; measured within 9.7e-8 of e^v over [-87, 0]). Lanes below -86.5
/// give 0: 2^n then stays a normal number (n >= -125), and what is cut is below 2^-124. NaN
/// stays NaN.
__attribute__((always_inline)) inline void exp_lanes(F32x16& v) {
  const F32x16 x = v;
  // Adding 1.5 * 2^23 rounds x log2 e to an integer, which lands in the low mantissa bits.
  const F32x16 shifted = x * 1.44269504088896341f + 12582912.0f;
  const F32x16 n = shifted - 12582912.0f;
  const F32x16 r = (x - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
  F32x16 p = r * (1.0f / 5040) + (1.0f / 720);
  p = p * r + (1.0f / 120);
  p = p * r + (1.0f / 24);
  p = p * r + (1.0f / 6);
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const U32x16 two_n = (reinterpret_cast<U32x16>(shifted) - 0x4B400000u + 127u) << 23;
  p *= reinterpret_cast<F32x16>(two_n);
  const U32x16 cut = reinterpret_cast<U32x16>(x < -86.5f);
  v = reinterpret_cast<F32x16>(reinterpret_cast<U32x16>(p) & ~cut);
}

}  // namespace bert::kernels::vec16
