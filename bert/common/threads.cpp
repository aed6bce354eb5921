#include "bert/common/threads.h"

#include <malloc.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>

namespace bert {

int configure_threads(int requested) {
  int n = requested;
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  if (n <= 0) n = 1;
  torch::set_num_threads(n);
  return torch::get_num_threads();
}

void prefer_passive_openmp(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  ::setenv("OMP_WAIT_POLICY", "passive", 1);
  ::execv("/proc/self/exe", argv);  // returns only on failure
}

bool keep_freed_memory() {
  const char* choice = std::getenv("BERTFT_MALLOC");
  if (choice != nullptr && std::string(choice) == "system") return false;
  constexpr int kOneGiB = 1 << 30;
  // -1: never trim (mallopt(3)). A finite threshold still let a step that freed more than it at
  // once (bert-base 32x128 fp32 frees ~4 GiB at the end of backward) hand the heap top back.
  return ::mallopt(M_MMAP_THRESHOLD, kOneGiB) == 1 && ::mallopt(M_TRIM_THRESHOLD, -1) == 1;
}

}  // namespace bert
