#include "bert/common/threads.h"

#include <thread>

#include <torch/torch.h>

namespace bert {

int configure_threads(int requested) {
  int n = requested;
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  if (n <= 0) n = 1;
  torch::set_num_threads(n);
  return torch::get_num_threads();
}

}  // namespace bert
