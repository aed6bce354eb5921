#include "bert/common/threads.h"

#include <gtest/gtest.h>
#include <malloc.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bert/common/cpu_allocator.h"
#include "bert/common/parallel.h"
#include "bert/model/onednn_detail.h"
#include "bert/model/onednn_linear.h"
#include "tests/support/test_support.h"

namespace bert {
namespace {

/// Sets (or, with null, unsets) an environment variable for the scope; restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_.c_str(), old_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

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

// Only BERTFT_MALLOC=system gives the heap back; another value (a typo included) keeps it.
TEST(KeepFreedMemory, OnlySystemLeavesGlibcsDefaults) {
  if (const char* choice = std::getenv("BERTFT_MALLOC"); choice && std::string(choice) == "system")
    GTEST_SKIP() << "BERTFT_MALLOC=system: this process keeps glibc's defaults";
  {
    const ScopedEnv malloc_choice("BERTFT_MALLOC", "system");
    EXPECT_FALSE(keep_freed_memory());
  }
  const ScopedEnv malloc_choice("BERTFT_MALLOC", "kept");
  EXPECT_TRUE(keep_freed_memory());
}

// With the heap kept, a tensor's freed block must take the next tensor of its size: LibTorch's
// posix_memalign(64) needs 64 bytes more than the block it freed (glibc before 2.38), so every
// layer's activations went to new memory and bert-base inference at 32x128 peaked ~150 MiB higher.
TEST(KeepFreedMemory, AFreedTensorBlockTakesTheNextTensorOfItsSize) {
  if (!keep_freed_memory()) GTEST_SKIP() << "BERTFT_MALLOC=system, or glibc refused the settings";
  const auto options = torch::TensorOptions().dtype(torch::kFloat);
  constexpr int64_t kFloats = 3 << 20;  // 12 MiB, a bert-base hidden state at 32x128
  for (int round = 0; round < 3; ++round) {
    auto first = torch::empty({kFloats}, options);
    const auto second = torch::empty({kFloats}, options);  // first's block is not the heap top
    const void* freed = first.data_ptr();
    first.reset();
    const auto next = torch::empty({kFloats}, options);
    EXPECT_EQ(next.data_ptr(), freed) << "round " << round;
  }
}

TEST(HeapCpuAllocator, AlignsTo64BytesAndFreesThroughItsRawDeleter) {
  HeapCpuAllocator allocator;
  for (const size_t bytes : {size_t{1}, size_t{63}, size_t{64}, size_t{4097}, size_t{12} << 20}) {
    auto block = allocator.allocate(bytes);
    ASSERT_NE(block.get(), nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(block.get()) % HeapCpuAllocator::kAlignment, 0u);
    EXPECT_EQ(block.get(), block.get_context());  // raw_allocate's contract
    std::memset(block.get(), 0x5a, bytes);        // every byte is the tensor's
    void* raw = allocator.raw_allocate(bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(raw) % HeapCpuAllocator::kAlignment, 0u);
    std::memset(raw, 0xa5, bytes);
    allocator.raw_deallocate(raw);
  }
  EXPECT_EQ(allocator.allocate(0).get(), nullptr);  // as LibTorch's: no block for no bytes
  // A size whose block (the size, the alignment and the block's address) would wrap around is
  // refused, not served by a small block; one that cannot be had says so.
  const size_t most = std::numeric_limits<size_t>::max();
  for (const size_t bytes : {most, most - 8, most - HeapCpuAllocator::kAlignment})
    EXPECT_THROW(allocator.allocate(bytes), c10::Error) << bytes;
  try {
    allocator.allocate(most / 2);
    ADD_FAILURE() << "allocated " << most / 2 << " bytes";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("CPU allocator: not enough memory"), std::string::npos)
        << e.what();
  }
}

// OpenBLAS falls back to old kernels on a CPU model newer than itself (Debian 12's took
// "Prescott", SSE3, on an Intel Xeon of model 207 with AVX-512: 5x slower fp32 GEMMs); bertft then
// names the kernels the CPU can run, and leaves every other choice alone.
TEST(OpenBlasCore, OnlyAFallbackToCoresWithoutAvx2IsOverridden) {
  EXPECT_EQ(openblas_core_override("Prescott", true, true), "SkylakeX");
  EXPECT_EQ(openblas_core_override("Nehalem", true, false), "Haswell");
  EXPECT_EQ(openblas_core_override("Sandybridge", true, true), "SkylakeX");
  EXPECT_EQ(openblas_core_override("Prescott", false, false), "");  // the CPU has no AVX2 either
  for (const char* kept : {"Haswell", "SkylakeX", "Cooperlake", "Zen", "SapphireRapids", ""})
    EXPECT_EQ(openblas_core_override(kept, true, true), "") << kept;
}

// OpenMP threads keep libgomp's spinning only where oneDNN runs the fp32 GEMMs; where OpenBLAS
// runs them (its own threads then wait on spinning ones) they sleep at once.
TEST(OpenMpWaitPolicy, ThreadsSpinOnlyWhereOneDnnRunsTheFp32Gemms) {
  EXPECT_TRUE(openmp_threads_spin(/*onednn_avx2=*/true, nullptr, /*onednn=*/true));
  EXPECT_TRUE(openmp_threads_spin(true, "auto", true));
  EXPECT_FALSE(openmp_threads_spin(true, "blas", true));
  EXPECT_FALSE(openmp_threads_spin(false, nullptr, true));  // no AVX2 for oneDNN: OpenBLAS
  EXPECT_TRUE(openmp_threads_spin(false, "onednn", true));
  EXPECT_FALSE(openmp_threads_spin(true, nullptr, /*onednn=*/false));  // a build without oneDNN
  EXPECT_FALSE(openmp_threads_spin(true, "onednn", false));
}

// oneDNN's ISA cap as oneDNN 2.6 reads it (each value checked against get_effective_cpu_isa() on
// an AVX-512 CPU): the spin rule must not take AVX2 where the cap keeps oneDNN's GEMMs off it.
TEST(OpenMpWaitPolicy, OneDnnIsaCapIsReadAsOneDnnReadsIt) {
  for (const char* below : {"SSE41", "AVX", "AVX2", "avx2", "Avx2", "AVX2_VNNI"})
    EXPECT_FALSE(onednn_isa_cap_allows_avx512(below)) << below;
  for (const char* allows : {"ALL", "all", "AVX512_CORE", "avx512_core", "AVX512_CORE_BF16",
                             "AVX512_CORE_AMX", "AVX512_MIC", "AVX2_VNNI_2", "", "bogus"})
    EXPECT_TRUE(onednn_isa_cap_allows_avx512(allows)) << allows;
  EXPECT_TRUE(onednn_isa_cap_allows_avx512(nullptr));
  for (const char* below : {"SSE41", "sse41", "AVX", "avx"})
    EXPECT_FALSE(onednn_isa_cap_allows_avx2(below)) << below;
  for (const char* allows : {"AVX2", "avx2", "AVX2_VNNI", "AVX512_CORE", "ALL", "", "bogus"})
    EXPECT_TRUE(onednn_isa_cap_allows_avx2(allows)) << allows;
  EXPECT_TRUE(onednn_isa_cap_allows_avx2(nullptr));
}

// oneDNN takes DNNL_MAX_CPU_ISA where ONEDNN_MAX_CPU_ISA is unset or set to nothing.
TEST(OpenMpWaitPolicy, AnEmptyOneDnnCapGivesWayToTheDnnlOne) {
  const ScopedEnv dnnl("DNNL_MAX_CPU_ISA", "AVX2");
  {
    const ScopedEnv onednn("ONEDNN_MAX_CPU_ISA", "");
    ASSERT_NE(onednn_isa_cap(), nullptr);
    EXPECT_STREQ(onednn_isa_cap(), "AVX2");
  }
  {
    const ScopedEnv onednn("ONEDNN_MAX_CPU_ISA", nullptr);
    ASSERT_NE(onednn_isa_cap(), nullptr);
    EXPECT_STREQ(onednn_isa_cap(), "AVX2");
  }
  const ScopedEnv onednn("ONEDNN_MAX_CPU_ISA", "AVX512_CORE");
  EXPECT_STREQ(onednn_isa_cap(), "AVX512_CORE");
}

// The switches that keep an old path for side-by-side measurements (BERTFT_BF16_PACK=off and
// the like) take their one value only: set to anything else, or to nothing, they are off.
TEST(EnvSwitch, OnlyTheNamedValueTurnsItOn) {
  const char* name = "BERTFT_TEST_SWITCH";
  {
    const ScopedEnv unset(name, nullptr);
    EXPECT_FALSE(detail::env_is(name, "off"));
  }
  for (const char* other : {"", "on", "of", "offf", "OFF"}) {
    const ScopedEnv set(name, other);
    EXPECT_FALSE(detail::env_is(name, "off")) << other;
  }
  const ScopedEnv off(name, "off");
  EXPECT_TRUE(detail::env_is(name, "off"));
}

// oneDNN's ISAs as bit sets (dnnl_cpu_isa_t's values in oneDNN 2.6): one includes another only
// with all of its bits. avx2 (0x7) shares bits with avx512_core (0x27) and avx2_vnni (0x407) with
// avx512_core_vnni (0x67); with "some bits" an AVX2 cap would pass for AVX-512 (and the FFN
// backward's split, the int8 path's choice of 7-bit activations would follow it).
TEST(OneDnnIsa, AnIsaIncludesAnotherOnlyWithAllOfItsBits) {
  constexpr unsigned avx2 = 0x7, avx512_core = 0x27, vnni = 0x67, bf16 = 0xe7, avx2_vnni = 0x407;
  EXPECT_TRUE(detail::isa_includes(avx512_core, avx2));
  EXPECT_TRUE(detail::isa_includes(bf16, vnni));
  EXPECT_TRUE(detail::isa_includes(avx2_vnni, avx2));
  EXPECT_TRUE(detail::isa_includes(avx2, avx2));
  EXPECT_FALSE(detail::isa_includes(avx2, avx512_core));
  EXPECT_FALSE(detail::isa_includes(avx512_core, vnni));
  EXPECT_FALSE(detail::isa_includes(avx2_vnni, vnni));
  EXPECT_FALSE(detail::isa_includes(bf16, avx2_vnni));
}

// --threads 0 (and any count below 1) means every core the machine has, never zero threads.
TEST(ConfigureThreads, ZeroOrLessTakesEveryCore) {
  const int before = torch::get_num_threads();
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  EXPECT_EQ(configure_threads(0), cores);
  EXPECT_EQ(configure_threads(-1), cores);
  EXPECT_EQ(configure_threads(1), 1);
  configure_threads(before);
}

// The spin rule, decided before oneDNN starts, and fp32_gemm(), which asks oneDNN, agree in this
// process (run under ONEDNN_MAX_CPU_ISA=AVX or AVX2 too: the cap moves both).
TEST(OpenMpWaitPolicy, SpinRuleAgreesWithTheFp32Engine) {
  if (!onednn_built()) GTEST_SKIP() << "no oneDNN in this build";
  if (std::getenv("BERTFT_FP32_GEMM") != nullptr) GTEST_SKIP() << "BERTFT_FP32_GEMM is set";
  const bool onednn_avx2 =
      __builtin_cpu_supports("avx2") && onednn_isa_cap_allows_avx2(onednn_isa_cap());
  EXPECT_EQ(fp32_gemm().engine == Fp32Gemm::kOneDnn, onednn_avx2) << fp32_gemm().reason;
}

// The re-execution for the load-time settings runs the file itself: through the /proc/self/exe
// link every bertft process was named "exe" (in top, and to pgrep bertft).
TEST(SelfExecutable, IsTheFileNotTheProcLink) {
  const std::string self = self_executable();
  EXPECT_EQ(self.substr(self.rfind('/') + 1), "bert_tests");
  std::ifstream comm("/proc/self/comm");
  std::string name;
  std::getline(comm, name);
  EXPECT_EQ(name, "bert_tests");  // this process, re-executed by its main (tests/support/main.cpp)
}

// bertft's own kernels (the fused AdamW, dropout) split their loops through bert::parallel_for.
// at::parallel_for called from a source compiled without -fopenmp, as bertft's are, ran every
// chunk on the calling thread: AdamW and dropout used one of the two cores.
TEST(ParallelFor, SplitsTheRangeAcrossLibTorchsThreadsAndCoversItOnce) {
  // Only the fuzz targets' build goes without OpenMP, and it builds no tests: here threads are a
  // must, not a reason to skip.
  ASSERT_TRUE(parallel_for_has_threads()) << "bert/common/parallel.cpp built without OpenMP";
  std::mutex mutex;
  std::set<std::thread::id> threads;
  std::vector<int> hits(1000, 0);
  {
    const testing::TwoThreads two;
    parallel_for(0, 1000, 10, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) ++hits[i];
      // keep each chunk busy long enough that one thread cannot take them all
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      const std::lock_guard<std::mutex> lock(mutex);
      threads.insert(std::this_thread::get_id());
    });
  }
  EXPECT_EQ(threads.size(), 2u);
  EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), 1000);
}

TEST(ParallelFor, RunsAnEmptyRangeNotAtAllAndASmallOneOnTheCallingThread) {
  int calls = 0;
  parallel_for(5, 5, 1, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
  std::thread::id where;
  parallel_for(0, 100, 1000, [&](int64_t begin, int64_t end) {
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 100);
    where = std::this_thread::get_id();
  });
  EXPECT_EQ(where, std::this_thread::get_id());
}

}  // namespace
}  // namespace bert
