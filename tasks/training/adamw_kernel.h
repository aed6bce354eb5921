#pragma once

#include <cstdint>

namespace bert::tasks {

/// One AdamW update over `n` contiguous float32 elements of a parameter `p` with gradient `g`
/// (times `grad_scale` first: gradient clipping's coefficient, the float product that clipping's
/// `grad.mul_` would have stored) and moments `m`, `v`, in the order of torch's AdamW ops:
/// p *= decay; m = m*b1 + (1-b1)*g;
/// v = v*b2 + (1-b2)*g*g; p += neg_step * m / (sqrt(v)/bc2_sqrt + eps). Vectorised for AVX-512,
/// AVX2 or baseline x86-64, chosen at run time. No LibTorch here: the file is compiled with
/// -fno-math-errno (so sqrt vectorises) and without the precompiled header.
void adamw_update(float* p,
                  const float* g,
                  float* m,
                  float* v,
                  int64_t n,
                  float decay,
                  float b1,
                  float one_minus_b1,
                  float b2,
                  float one_minus_b2,
                  float bc2_sqrt,
                  float epsilon,
                  float neg_step,
                  float grad_scale = 1.0f);

/// The sum of the squares of `n` contiguous float32 values: float squares summed in float over
/// runs of 16 values a lane, those sums in double (about float32's own precision on the whole
/// sum, where one float sum over millions of values drifts; the same value for the same input
/// on a given CPU). Gradient clipping's norm, over pieces of a gradient.
double sum_of_squares(const float* g, int64_t n);

}  // namespace bert::tasks
