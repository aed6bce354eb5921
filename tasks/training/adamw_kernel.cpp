#include "tasks/training/adamw_kernel.h"

#include <cmath>

#include "bert/common/target_clones.h"

namespace bert::tasks {

BERTFT_CLONES void adamw_update(float* __restrict p,
                                const float* __restrict g,
                                float* __restrict m,
                                float* __restrict v,
                                int64_t n,
                                float decay,
                                float b1,
                                float one_minus_b1,
                                float b2,
                                float one_minus_b2,
                                float bc2_sqrt,
                                float epsilon,
                                float neg_step,
                                float grad_scale) {
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

BERTFT_CLONES double sum_of_squares(const float* __restrict g, int64_t n) {
  // Float squares summed in 32 float lanes over runs of 512 values (16 to a lane: the vector
  // speed of a float sum), each run's lanes then added into 32 double lanes (all double ran at
  // two thirds of the memory speed: its conversions are the bottleneck).
  constexpr int kLanes = 32, kRun = 512;
  double wide[kLanes] = {};
  int64_t i = 0;
  for (; i + kRun <= n; i += kRun) {
    float lanes[kLanes] = {};
    for (int64_t k = i; k < i + kRun; k += kLanes)
      for (int j = 0; j < kLanes; ++j) lanes[j] += g[k + j] * g[k + j];
    for (int j = 0; j < kLanes; ++j) wide[j] += lanes[j];
  }
  double tail = 0;
  for (; i < n; ++i) tail += static_cast<double>(g[i]) * g[i];
  for (int width = kLanes / 2; width > 0; width /= 2)  // pairwise, in a fixed order
    for (int j = 0; j < width; ++j) wide[j] += wide[j + width];
  return wide[0] + tail;
}

}  // namespace bert::tasks
