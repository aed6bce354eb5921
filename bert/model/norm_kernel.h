#pragma once

#include <cstdint>

namespace bert::kernels {

/// Where add_layer_norm_f32 writes, for `rows` rows from the first: `out` [rows, cols] always;
/// where not null, the sum s [rows, cols] itself, and each row's mean and rstd [rows] (what
/// LibTorch's layer_norm backward takes).
struct LayerNormOutputs {
  float* out = nullptr;
  float* sum = nullptr;
  float* mean = nullptr;
  float* rstd = nullptr;
};

/// LayerNorm over each of `rows` rows of `cols` (row-major) of the sum s = x + residual:
/// out[r, c] = (s[r, c] * rstd + (-mean * rstd)) * gamma[c] + beta[c], mean and the biased
/// variance of the row's s (about its mean, in a second pass), rstd = 1 / sqrt(variance + eps):
/// LibTorch's expression for its CPU layer_norm, its moments summed in another order (the two
/// agree within ~1e-6 relative). s is float32 (x widened, then one float32 addition, as LibTorch
/// adds a bf16 tensor to a float32 one); `residual` may be null (s = x). x is float32, or bf16
/// (raw bits) where `x_bf16`. `to.out` may be `residual` or x (float32) itself. Vectorised for
/// AVX-512, AVX2 or baseline x86-64, chosen at run time; the caller splits rows across threads.
void add_layer_norm_f32(const void* x,
                        bool x_bf16,
                        const float* residual,
                        const float* gamma,
                        const float* beta,
                        int64_t rows,
                        int64_t cols,
                        float eps,
                        const LayerNormOutputs& to);

}  // namespace bert::kernels
