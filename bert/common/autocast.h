#pragma once

// LibTorch's autocast state, read and set per device type through one set of calls: LibTorch
// 2.4+'s device-type functions where they exist (there the CPU- and CUDA-specific ones print a
// deprecation warning on every call, hundreds of lines a training step), those specific ones
// before (Debian's LibTorch 1.13). bertft uses autocast on CPU and CUDA only.
#include <ATen/autocast_mode.h>
#include <torch/version.h>

namespace bert::autocast {

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
inline bool enabled(c10::DeviceType device) {
  return at::autocast::is_autocast_enabled(device);
}
inline void set_enabled(c10::DeviceType device, bool on) {
  at::autocast::set_autocast_enabled(device, on);
}
inline at::ScalarType dtype(c10::DeviceType device) {
  return at::autocast::get_autocast_dtype(device);
}
inline void set_dtype(c10::DeviceType device, at::ScalarType type) {
  at::autocast::set_autocast_dtype(device, type);
}
#else
inline bool enabled(c10::DeviceType device) {
  return device == c10::kCPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
}
inline void set_enabled(c10::DeviceType device, bool on) {
  if (device == c10::kCPU) {
    at::autocast::set_cpu_enabled(on);
  } else {
    at::autocast::set_enabled(on);
  }
}
inline at::ScalarType dtype(c10::DeviceType device) {
  return device == c10::kCPU ? at::autocast::get_autocast_cpu_dtype()
                             : at::autocast::get_autocast_gpu_dtype();
}
inline void set_dtype(c10::DeviceType device, at::ScalarType type) {
  if (device == c10::kCPU) {
    at::autocast::set_autocast_cpu_dtype(type);
  } else {
    at::autocast::set_autocast_gpu_dtype(type);
  }
}
#endif

}  // namespace bert::autocast
