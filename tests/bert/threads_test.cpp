#include "bert/common/threads.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdlib>
#include <vector>

namespace bert {
namespace {

// The heap keeps what a step frees, however much: bert-base 32x128 fp32 frees ~4 GiB at the end
// of backward, and a finite trim threshold (it was 1 GiB) handed that back to the kernel, so the
// next step faulted it all in again (1.5x slower steps). The blocks are never touched: no RSS.
TEST(KeepFreedMemory, AFreedHeapTopOfMoreThanAGibibyteStaysInTheProcess) {
  if (!keep_freed_memory()) GTEST_SKIP() << "BERTFT_MALLOC=system, or glibc refused the settings";
  constexpr size_t kBlock = size_t{128} << 20, kBlocks = 12;  // 1.5 GiB in all
  std::vector<void*> blocks;
  for (size_t i = 0; i < kBlocks; ++i) blocks.push_back(std::malloc(kBlock));
  const size_t grown = mallinfo2().arena;
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) std::free(*it);
  EXPECT_GE(mallinfo2().arena, grown);
  EXPECT_GE(grown, kBlock * kBlocks);
}

}  // namespace
}  // namespace bert
