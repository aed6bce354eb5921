#pragma once

#include <cstdint>

namespace bert::tasks {

/// HF get_linear_schedule_with_warmup: the learning rate for optimizer step `step` (0-based):
/// peak * step / warmup while step < warmup, then peak * max(0, (total - step) / (total -
/// warmup)). Step 0 therefore has lr 0 when there is warm-up, as in HF's Trainer.
class LinearSchedule {
 public:
  LinearSchedule(double peak, int64_t warmup_steps, int64_t total_steps);
  double at(int64_t step) const;
  int64_t warmup_steps() const { return warmup_; }
  int64_t total_steps() const { return total_; }

 private:
  double peak_;
  int64_t warmup_, total_;
};

/// Warm-up steps from an explicit count (if >= 0) or a ratio of the total (rounded up, as HF's
/// TrainingArguments.get_warmup_steps).
int64_t warmup_steps_for(int64_t total_steps, double warmup_ratio, int64_t warmup_steps);

}  // namespace bert::tasks
