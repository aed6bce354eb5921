#include "bert/model/pack_kernel.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "bert/model/dropout_kernel.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "bert/model/transpose16.h"
#define BERTFT_PACK_VECTORS 1
#if !defined(__clang__)
// GCC 12 warns that its own intrinsics' undefined pass-through operand (_mm512_undefined_epi32)
// may be used uninitialized; it is not used.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

namespace bert::kernels {
namespace {

/// One run of a row, its bf16 values already rounded: element (r, c + j) = bits[j], j < len.
void write_run_scalar(
    const uint16_t* bits, int64_t r, int64_t c, int64_t len, const ScatteredLayout& to) {
  uint16_t* base = to.data + to.row[r];
  for (int64_t j = 0; j < len; ++j) base[to.col[c + j]] = bits[j];
}

#ifdef BERTFT_PACK_VECTORS

/// A whole 64-byte line of the layout: written past the caches where it is aligned (a streaming
/// store needs no read of the line first; the copies are read again only by the next forward, long
/// after they have left the caches), else a plain store. f32_to_bf16_scattered fences once at its
/// end.
__attribute__((target("avx512f"))) inline void store_line(void* to, __m512i v) {
  if ((reinterpret_cast<uintptr_t>(to) & 63) == 0)
    _mm512_stream_si512(static_cast<__m512i*>(to), v);
  else
    _mm512_storeu_si512(to, v);
}

/// Pairs along the row: 16 pairs (32 values) a 32-bit scatter.
__attribute__((target("avx512f,avx512bw"))) void write_pairs(
    const uint16_t* bits, int64_t r, int64_t c, int64_t len, const ScatteredLayout& to) {
  int64_t j = 0;
  if (c % 2 != 0) {  // an odd first column: its pair's other half belongs to another run
    write_run_scalar(bits, r, c, 1, to);
    j = 1;
  }
  const __m512i row = _mm512_set1_epi32(static_cast<int32_t>(to.row[r] / 2));
  for (; j + 32 <= len; j += 32) {
    const __m512i index = _mm512_add_epi32(row, _mm512_loadu_si512(to.pair_col + (c + j) / 2));
    _mm512_i32scatter_epi32(to.data, index, _mm512_loadu_si512(bits + j), 4);
  }
  write_run_scalar(bits + j, r, c + j, len - j, to);
}

/// Runs of 16 columns every other element: a row's 16 values widened to 32 bits, shifted into
/// the odd halves where the row's offset is odd, and stored under a mask of the halves it owns.
__attribute__((target("avx512f,avx512bw"))) void write_strided(
    const uint16_t* bits, int64_t r, int64_t c, int64_t len, const ScatteredLayout& to) {
  int64_t j = 0;
  const int64_t head = std::min(len, (16 - c % 16) % 16);
  write_run_scalar(bits, r, c, head, to);
  j = head;
  const int64_t odd = to.row[r] & 1;
  uint16_t* base = to.data + (to.row[r] - odd);
  const __mmask32 mask = odd ? 0xAAAAAAAAu : 0x55555555u;
  for (; j + 16 <= len; j += 16) {
    __m512i v =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits + j)));
    if (odd) v = _mm512_slli_epi32(v, 16);
    _mm512_mask_storeu_epi16(base + to.col[c + j], mask, v);
  }
  write_run_scalar(bits + j, r, c + j, len - j, to);
}

/// Pairs along the rows, 16 whole rows r0.. whose pairs lie side by side (row[r0 + i] ==
/// row[r0] + 2i): 16 pairs of the 16 rows transposed, so that each pair's 16 rows go out in one
/// 64-byte store. `bits` holds the rows' bf16 values, [16, cols].
__attribute__((target("avx512f,avx512bw"))) void write_pairs_16_rows(const uint16_t* bits,
                                                                     int64_t r0,
                                                                     const ScatteredLayout& to) {
  const int64_t cols = to.cols, pairs = cols / 2;
  uint32_t* base = reinterpret_cast<uint32_t*>(to.data + to.row[r0]);
  int64_t p = 0;
  for (; p + 16 <= pairs; p += 16) {
    __m512i m[16];
    for (int i = 0; i < 16; ++i) m[i] = _mm512_loadu_si512(bits + i * cols + 2 * p);
    transpose16(m);
    for (int j = 0; j < 16; ++j) store_line(base + to.pair_col[p + j], m[j]);
  }
  for (int i = 0; i < 16; ++i)
    write_run_scalar(bits + i * cols + 2 * p, r0 + i, 2 * p, cols - 2 * p, to);
}

/// Runs of 16 columns every other element, rows r and r + 1 side by side (row[r + 1] ==
/// row[r] + 1, row[r] even): each run's 32 values of the two rows in one 64-byte store.
/// `bits` holds the two rows' bf16 values, [2, cols].
__attribute__((target("avx512f,avx512bw"))) void write_strided_2_rows(const uint16_t* bits,
                                                                      int64_t r,
                                                                      const ScatteredLayout& to) {
  const int64_t cols = to.cols;
  uint16_t* base = to.data + to.row[r];
  int64_t c = 0;
  for (; c + 16 <= cols; c += 16) {
    const __m512i a =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits + c)));
    const __m512i b = _mm512_cvtepu16_epi32(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits + cols + c)));
    store_line(base + to.col[c], _mm512_or_si512(a, _mm512_slli_epi32(b, 16)));
  }
  write_run_scalar(bits + c, r, c, cols - c, to);
  write_run_scalar(bits + cols + c, r + 1, c, cols - c, to);
}

/// Whether rows r0 .. r0 + count - 1 lie `step` elements apart from row r0 on.
bool rows_side_by_side(const ScatteredLayout& to, int64_t r0, int64_t count, int64_t step) {
  for (int64_t i = 1; i < count; ++i)
    if (to.row[r0 + i] != to.row[r0] + step * i) return false;
  return true;
}

bool has_avx512bw() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  return has;
}

#endif

/// One run of a row, through the fastest path `to` allows on this CPU.
void write_run(const uint16_t* bits, int64_t r, int64_t c, int64_t len, const ScatteredLayout& to) {
#ifdef BERTFT_PACK_VECTORS
  if (to.pair_col != nullptr && has_avx512bw()) return write_pairs(bits, r, c, len, to);
  if (to.strided_runs && has_avx512bw()) return write_strided(bits, r, c, len, to);
#endif
  write_run_scalar(bits, r, c, len, to);
}

}  // namespace

bool scattered_has_vector_paths() {
#ifdef BERTFT_PACK_VECTORS
  return has_avx512bw();
#else
  return false;
#endif
}

void f32_to_bf16_scattered(
    const float* x, int64_t first, int64_t n, const ScatteredLayout* to, int layouts) {
  if (layouts <= 0) return;
  const int64_t cols = to[0].cols;
  constexpr int64_t kRun = 512;  // rounded once into a buffer in cache, then laid out
  alignas(64) uint16_t bits[kRun];
  for (int64_t done = 0; done < n;) {
    const int64_t at = first + done;
    const int64_t r = at / cols, c = at % cols;
#ifdef BERTFT_PACK_VECTORS
    // 16 whole rows from a multiple of 16 on: laid out a block of rows at a time where a
    // layout puts them side by side (VNNI's pairs: transposed, whole 64-byte stores).
    if (c == 0 && r % 16 == 0 && n - done >= 16 * cols && has_avx512bw()) {
      thread_local std::vector<uint16_t> rows;
      rows.resize(static_cast<size_t>(16 * cols));
      f32_to_bf16(x + done, rows.data(), 16 * cols);
      for (int l = 0; l < layouts; ++l) {
        if (to[l].pair_col != nullptr && rows_side_by_side(to[l], r, 16, 2)) {
          write_pairs_16_rows(rows.data(), r, to[l]);
          continue;
        }
        for (int64_t i = 0; i < 16; ++i) {
          const uint16_t* row = rows.data() + i * cols;
          if (to[l].strided_runs && i % 2 == 0 && to[l].row[r + i] % 2 == 0 &&
              rows_side_by_side(to[l], r + i, 2, 1)) {
            write_strided_2_rows(row, r + i, to[l]);
            ++i;
          } else {
            write_run(row, r + i, 0, cols, to[l]);
          }
        }
      }
      done += 16 * cols;
      continue;
    }
#endif
    const int64_t len = std::min({n - done, cols - c, kRun});
    f32_to_bf16(x + done, bits, len);
    for (int l = 0; l < layouts; ++l) write_run(bits, r, c, len, to[l]);
    done += len;
  }
#ifdef BERTFT_PACK_VECTORS
  _mm_sfence();  // the streaming stores reach memory before any later store (another thread's read)
#endif
}

}  // namespace bert::kernels
