#include "tasks/training/precision.h"

#include <ATen/autocast_mode.h>

namespace bert {
const std::vector<std::pair<const char*, tasks::Precision>>& EnumNames<tasks::Precision>::get() {
  static const std::vector<std::pair<const char*, tasks::Precision>> names = {
      {"fp32", tasks::Precision::kFp32},
      {"bf16", tasks::Precision::kBf16},
      {"fp16", tasks::Precision::kFp16}};
  return names;
}
}  // namespace bert

namespace bert::tasks {

AutocastScope::AutocastScope(Precision precision, const torch::Device& device)
    : enabled_(precision != Precision::kFp32), cuda_(device.is_cuda()) {
  if (!enabled_) return;
  if (cuda_) {
    at::autocast::set_enabled(true);
    at::autocast::set_autocast_gpu_dtype(precision == Precision::kFp16 ? at::kHalf : at::kBFloat16);
  } else {
    at::autocast::set_cpu_enabled(true);
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
  }
}

AutocastScope::~AutocastScope() {
  if (!enabled_) return;
  at::autocast::clear_cache();
  if (cuda_) {
    at::autocast::set_enabled(false);
  } else {
    at::autocast::set_cpu_enabled(false);
  }
}

}  // namespace bert::tasks
