// Compiled with OpenMP and without the precompiled torch header (bert/CMakeLists.txt): see
// parallel.h for why.
#include "bert/common/parallel.h"

#include <ATen/Parallel.h>

namespace bert {

void parallel_for(int64_t begin,
                  int64_t end,
                  int64_t grain,
                  const std::function<void(int64_t, int64_t)>& chunk) {
  at::parallel_for(begin, end, grain, [&](int64_t b, int64_t e) { chunk(b, e); });
}

bool parallel_for_has_threads() {
#ifdef INTRA_OP_PARALLEL  // ATen's headers: defined where its loop can use threads (here OpenMP)
  return true;
#else
  return false;
#endif
}

}  // namespace bert
