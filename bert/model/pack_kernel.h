#pragma once

#include <cstdint>

namespace bert::kernels {

/// Where the elements of a row-major [rows, cols] matrix lie in a blocked layout (oneDNN's
/// packed b of a bf16 product): element (r, c) at data[row[r] + col[c]]. Two shapes have vector
/// paths (AVX-512BW), checked by the layout's maker: `pair_col` (col[c] / 2 for each even c,
/// or null) where each even column and the next are adjacent and every row offset is even (VNNI's
/// pairs along a row: a 32-bit word per pair); `strided_runs` where every col[c] is even and each
/// aligned run of 16 columns lies every other element (VNNI's pairs of rows: a row's run goes to
/// every other bf16 of 32). Every offset fits in 32 bits where either is set.
struct ScatteredLayout {
  uint16_t* data = nullptr;
  const int64_t* row = nullptr;
  const int64_t* col = nullptr;
  const int32_t* pair_col = nullptr;
  int64_t rows = 0, cols = 0;
  bool strided_runs = false;
};

/// bf16(x[j]), rounded as f32_to_bf16 rounds, written where each of the `layouts` layouts at
/// `to` (of one matrix shape) puts element first + j of the matrix (row-major order), j in
/// [0, n); each value rounded once for all of them. Writes nothing else: the layouts' padding
/// stays as it is.
void f32_to_bf16_scattered(
    const float* x, int64_t first, int64_t n, const ScatteredLayout* to, int layouts = 1);

/// Whether f32_to_bf16_scattered takes its vector paths on this CPU (AVX-512BW); for tests.
bool scattered_has_vector_paths();

}  // namespace bert::kernels
