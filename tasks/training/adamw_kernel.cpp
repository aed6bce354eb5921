#include "tasks/training/adamw_kernel.h"

#include <cmath>

namespace bert::tasks {

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void adamw_update(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v, int64_t n,
                  float decay, float b1, float one_minus_b1, float b2, float one_minus_b2, float bc2_sqrt, float epsilon,
                  float neg_step, float grad_scale) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] * grad_scale;
    const float mi = m[i] * b1 + one_minus_b1 * gi;
    const float vi = v[i] * b2 + one_minus_b2 * gi * gi;  // addcmul: value * t1 * t2
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) / bc2_sqrt + epsilon;
    p[i] = p[i] * decay + neg_step * mi / denom;  // addcdiv: value * t1 / t2
  }
}

}  // namespace bert::tasks
