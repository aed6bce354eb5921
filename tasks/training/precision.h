#pragma once

#include <torch/torch.h>

#include <utility>
#include <vector>

#include "bert/common/yaml.h"

namespace bert::tasks {

enum class Precision {
  kFp32,  ///< plain float32
  kBf16,  ///< bf16 autocast (CPU oneDNN/AMX, CUDA); float32 weights and optimizer
  kFp16,  ///< fp16 autocast with dynamic loss scaling (CUDA only); float32 weights and optimizer
};

/// Autocast for the forward passes in its scope on `device`: bf16 (CPU oneDNN, CUDA) or fp16
/// (CUDA) by `precision`, nothing for fp32. Switches it off and clears the cast cache on exit.
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
