#include "bert/model/norm_kernel.h"

#include <cmath>

#include "bert/common/target_clones.h"
#include "bert/model/vec16.h"

namespace bert::kernels {
namespace {

using namespace vec16;  // NOLINT(google-build-using-namespace): the kernels' own helpers

/// One row: s = x + residual into `sum` (the row stays in L1 for the two passes after), the
/// mean, the variance about it, then the affine map from `sum` into `out` (which may be `sum`).
template <class In>
__attribute__((always_inline)) inline void add_layer_norm_row(const In* x,
                                                              const float* residual,
                                                              const float* __restrict gamma,
                                                              const float* __restrict beta,
                                                              float* sum,
                                                              float* out,
                                                              int64_t cols,
                                                              float eps,
                                                              float& mean,
                                                              float& rstd) {
  const int64_t whole = cols / 16 * 16;
  F32x16 v, r, acc = {};
  for (int64_t j = 0; j < whole; j += 16) {
    load_lanes(v, x + j);
    if (residual != nullptr) {
      load_lanes(r, residual + j);
      v += r;
    }
    store_lanes(sum + j, v);
    acc += v;
  }
  float total = sum_of_lanes(acc);
  for (int64_t j = whole; j < cols; ++j) {
    sum[j] = widen(x[j]) + (residual != nullptr ? residual[j] : 0.0f);
    total += sum[j];
  }
  mean = total / static_cast<float>(cols);
  acc = F32x16{};
  for (int64_t j = 0; j < whole; j += 16) {
    load_lanes(v, sum + j);
    v -= mean;
    acc += v * v;
  }
  float squares = sum_of_lanes(acc);
  for (int64_t j = whole; j < cols; ++j) squares += (sum[j] - mean) * (sum[j] - mean);
  rstd = 1.0f / std::sqrt(squares / static_cast<float>(cols) + eps);
  const float shift = -mean * rstd;
  F32x16 g, b;
  for (int64_t j = 0; j < whole; j += 16) {
    load_lanes(v, sum + j);
    load_lanes(g, gamma + j);
    load_lanes(b, beta + j);
    store_lanes(out + j, (v * rstd + shift) * g + b);
  }
  for (int64_t j = whole; j < cols; ++j) out[j] = (sum[j] * rstd + shift) * gamma[j] + beta[j];
}

template <class In>
__attribute__((always_inline)) inline void add_layer_norm_rows(const In* x,
                                                               const float* residual,
                                                               const float* gamma,
                                                               const float* beta,
                                                               int64_t rows,
                                                               int64_t cols,
                                                               float eps,
                                                               const LayerNormOutputs& to) {
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t at = i * cols;
    float mean, rstd;
    add_layer_norm_row(x + at, residual != nullptr ? residual + at : nullptr, gamma, beta,
                       (to.sum != nullptr ? to.sum : to.out) + at, to.out + at, cols, eps, mean,
                       rstd);
    if (to.mean != nullptr) to.mean[i] = mean;
    if (to.rstd != nullptr) to.rstd[i] = rstd;
  }
}

}  // namespace

BERTFT_CLONES
void add_layer_norm_f32(const void* x,
                        bool x_bf16,
                        const float* residual,
                        const float* gamma,
                        const float* beta,
                        int64_t rows,
                        int64_t cols,
                        float eps,
                        const LayerNormOutputs& to) {
  if (x_bf16)
    add_layer_norm_rows(static_cast<const uint16_t*>(x), residual, gamma, beta, rows, cols, eps,
                        to);
  else
    add_layer_norm_rows(static_cast<const float*>(x), residual, gamma, beta, rows, cols, eps, to);
}

}  // namespace bert::kernels
