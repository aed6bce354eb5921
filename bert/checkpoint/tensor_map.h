#pragma once

#include <torch/torch.h>

#include <map>
#include <string>

namespace bert {

/// Named tensors in key order, as read from or written to a checkpoint file.
using TensorMap = std::map<std::string, torch::Tensor>;

}  // namespace bert
