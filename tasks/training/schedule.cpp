#include "tasks/training/schedule.h"

#include <algorithm>
#include <cmath>

namespace bert::tasks {

LinearSchedule::LinearSchedule(double peak, int64_t warmup_steps, int64_t total_steps)
    : peak_(peak),
      warmup_(std::max<int64_t>(0, warmup_steps)),
      total_(std::max<int64_t>(1, total_steps)) {}

double LinearSchedule::at(int64_t step) const {
  if (step < warmup_)
    return peak_ * static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, warmup_));
  return peak_ * std::max(0.0, static_cast<double>(total_ - step) /
                                   static_cast<double>(std::max<int64_t>(1, total_ - warmup_)));
}

int64_t warmup_steps_for(int64_t total_steps, double warmup_ratio, int64_t warmup_steps) {
  if (warmup_steps >= 0) return warmup_steps;
  return static_cast<int64_t>(std::ceil(static_cast<double>(total_steps) * warmup_ratio));
}

}  // namespace bert::tasks
