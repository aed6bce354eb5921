#pragma once

#include <cstdint>
#include <functional>

namespace bert {

/// Runs `chunk(begin, end)` over [begin, end) split across LibTorch's intra-op threads, in chunks
/// of at least `grain` elements, as at::parallel_for does. at::parallel_for itself cannot be
/// called from bertft's sources: it is a header template whose OpenMP body
/// (ATen/ParallelOpenMP.h) is compiled only where _OPENMP is defined, and bertft's sources are
/// compiled without -fopenmp (they share one precompiled <torch/torch.h>), so there it ran every
/// chunk on the calling thread. This function's own source is compiled with OpenMP.
void parallel_for(int64_t begin,
                  int64_t end,
                  int64_t grain,
                  const std::function<void(int64_t, int64_t)>& chunk);

/// Whether parallel_for can use more than one thread: false in a build without OpenMP (the fuzz
/// targets' build; every other build requires it), where it runs chunks on the calling thread.
bool parallel_for_has_threads();

}  // namespace bert
