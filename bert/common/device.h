#pragma once

#include <torch/torch.h>

#include <string>

namespace bert {

/// `value` (a recipe's training.device, a --device option) as a device this process can use:
/// cpu, cuda or cuda:N. ConfigError "<where>: ..." for another string, for CUDA where this
/// LibTorch has none or sees no GPU, and for a CUDA index beyond the GPUs it sees (LibTorch's own
/// messages name neither the option nor the value).
torch::Device usable_device(const std::string& value, const std::string& where);

}  // namespace bert
