#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "bert/common/yaml.h"

namespace bert::tasks {

enum class Precision {
  kAuto,  ///< bf16 where the device runs it clearly faster than fp32 (probed), else fp32
  kFp32,  ///< plain float32
  kBf16,  ///< bf16 autocast (CPU oneDNN/AMX, CUDA); float32 weights and optimizer
  kFp16,  ///< fp16 autocast with dynamic loss scaling (CUDA only); float32 weights and optimizer
};

/// What `auto` became, and why (for the log).
struct PrecisionChoice {
  Precision precision = Precision::kFp32;
  std::string reason;
};

/// The decision from a probe's timings of the same GEMM: bf16 when it takes under 0.8 of
/// fp32's time (a clear gain; on CPUs without bf16 instructions it is ~100x slower), else fp32.
PrecisionChoice choose_precision(double fp32_seconds,
                                 double bf16_seconds,
                                 const std::string& device);

/// The choice on `device` from GEMMs timed in fp32 and bf16, each through the engine bertft's
/// projections take for that type (a 64x256x256 one, then, unless bf16 is clearly slow, a
/// 256x768x768 one; best of 5; some milliseconds).
PrecisionChoice probe_precision(const torch::Device& device);

/// `requested` itself, or for kAuto probe_precision(device), probed once per device per process.
PrecisionChoice resolve_precision(Precision requested, const torch::Device& device);

/// Autocast for the forward passes in its scope on `device`: bf16 (CPU oneDNN, CUDA) or fp16
/// (CUDA) by `precision`, nothing for fp32. Switches it off and clears the cast cache on exit.
/// `precision` must be resolved (not kAuto).
class AutocastScope {
 public:
  AutocastScope(Precision precision, const torch::Device& device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool enabled_, cuda_;
};

}  // namespace bert::tasks

namespace bert {
template <>
struct EnumNames<tasks::Precision> {
  static const std::vector<std::pair<const char*, tasks::Precision>>& get();
};
}  // namespace bert
