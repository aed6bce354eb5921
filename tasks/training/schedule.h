#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "bert/common/yaml.h"

namespace bert::tasks {

/// The learning-rate schedules of HF's `get_scheduler` (TrainingArguments.lr_scheduler_type),
/// by HF's names.
enum class ScheduleType {
  kLinear,              ///< warm-up, then linear decay to 0 (the BERT paper's)
  kCosine,              ///< warm-up, then cosine decay (num_cycles 0.5: half a wave to 0)
  kCosineWithRestarts,  ///< warm-up, then num_cycles cosine waves, each restarting at the peak
  kPolynomial,          ///< warm-up, then (1 - progress)^power from the peak down to lr_end
  kConstant,            ///< the peak from step 0
  kConstantWithWarmup,  ///< warm-up, then the peak
};

/// The schedules' shape parameters (HF's defaults).
struct ScheduleShape {
  /// Cosine waves after warm-up; default 0.5 for cosine, 1 for cosine_with_restarts.
  std::optional<double> num_cycles;
  double power = 1.0;    ///< polynomial: exponent of the decay
  double lr_end = 1e-7;  ///< polynomial: the final learning rate
};

/// A learning-rate schedule: the rate for optimizer step `step` (0-based) as HF's LambdaLR with
/// the matching get_*_schedule_with_warmup gives it. Step 0 has rate 0 when there is warm-up.
class LrSchedule {
 public:
  LrSchedule(ScheduleType type,
             double peak,
             int64_t warmup_steps,
             int64_t total_steps,
             ScheduleShape shape = {});
  virtual ~LrSchedule() = default;

  double at(int64_t step) const;
  ScheduleType type() const { return type_; }
  double peak() const { return peak_; }
  int64_t warmup_steps() const { return warmup_; }
  int64_t total_steps() const { return total_; }

 private:
  /// The factor of the peak (HF's lr_lambda).
  double factor(int64_t step) const;

  ScheduleType type_;
  double peak_;
  int64_t warmup_, total_;
  ScheduleShape shape_;
};

/// HF get_linear_schedule_with_warmup: peak * step / warmup while step < warmup, then
/// peak * max(0, (total - step) / (total - warmup)).
class LinearSchedule final : public LrSchedule {
 public:
  LinearSchedule(double peak, int64_t warmup_steps, int64_t total_steps)
      : LrSchedule(ScheduleType::kLinear, peak, warmup_steps, total_steps) {}
};

/// Warm-up steps from an explicit count (if >= 0) or a ratio of the total (rounded up, as HF's
/// TrainingArguments.get_warmup_steps).
int64_t warmup_steps_for(int64_t total_steps, double warmup_ratio, int64_t warmup_steps);

}  // namespace bert::tasks

namespace bert {
template <>
struct EnumNames<tasks::ScheduleType> {
  static const std::vector<std::pair<const char*, tasks::ScheduleType>>& get();
};
}  // namespace bert
