#include "tasks/training/schedule.h"

#include <algorithm>
#include <cmath>

namespace bert {
const std::vector<std::pair<const char*, tasks::ScheduleType>>&
EnumNames<tasks::ScheduleType>::get() {
  using S = tasks::ScheduleType;
  static const std::vector<std::pair<const char*, S>> names = {
      {"linear", S::kLinear},
      {"cosine", S::kCosine},
      {"cosine_with_restarts", S::kCosineWithRestarts},
      {"polynomial", S::kPolynomial},
      {"constant", S::kConstant},
      {"constant_with_warmup", S::kConstantWithWarmup}};
  return names;
}
}  // namespace bert

namespace bert::tasks {
namespace {

constexpr double kPi = 3.14159265358979323846;

}  // namespace

LrSchedule::LrSchedule(
    ScheduleType type, double peak, int64_t warmup_steps, int64_t total_steps, ScheduleShape shape)
    : type_(type),
      peak_(peak),
      warmup_(std::max<int64_t>(0, warmup_steps)),
      total_(std::max<int64_t>(1, total_steps)),
      shape_(shape) {}

double LrSchedule::at(int64_t step) const {
  return peak_ * factor(step);
}

double LrSchedule::factor(int64_t step) const {
  if (type_ == ScheduleType::kConstant) return 1.0;
  const auto s = static_cast<double>(step);
  if (step < warmup_) return s / static_cast<double>(std::max<int64_t>(1, warmup_));
  const auto decay_steps = static_cast<double>(std::max<int64_t>(1, total_ - warmup_));
  const double progress = (s - static_cast<double>(warmup_)) / decay_steps;
  switch (type_) {
    case ScheduleType::kConstant:
    case ScheduleType::kConstantWithWarmup:
      return 1.0;
    case ScheduleType::kLinear:
      return std::max(0.0, static_cast<double>(total_ - step) / decay_steps);
    case ScheduleType::kCosine: {
      const double cycles = shape_.num_cycles.value_or(0.5);
      return std::max(0.0, 0.5 * (1.0 + std::cos(kPi * cycles * 2.0 * progress)));
    }
    case ScheduleType::kCosineWithRestarts: {
      if (progress >= 1.0) return 0.0;
      const double cycles = shape_.num_cycles.value_or(1.0);
      return std::max(0.0, 0.5 * (1.0 + std::cos(kPi * std::fmod(cycles * progress, 1.0))));
    }
    case ScheduleType::kPolynomial: {
      if (step > total_) return shape_.lr_end / peak_;
      const double remaining = 1.0 - progress;
      return ((peak_ - shape_.lr_end) * std::pow(remaining, shape_.power) + shape_.lr_end) / peak_;
    }
  }
  return 1.0;
}

int64_t warmup_steps_for(int64_t total_steps, double warmup_ratio, int64_t warmup_steps) {
  if (warmup_steps >= 0) return warmup_steps;
  return static_cast<int64_t>(std::ceil(static_cast<double>(total_steps) * warmup_ratio));
}

}  // namespace bert::tasks
