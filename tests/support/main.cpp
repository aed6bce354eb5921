#include <gtest/gtest.h>

#include "bert/common/threads.h"

// The tests run under the settings bertft itself runs with: its OpenMP wait policy, OpenBLAS's
// kernels named where it fell back to ones without AVX2 (with the Prescott kernels it takes on
// an Intel Xeon of model 207, the tiny model's gradients came out far enough from HF's for
// LibTorch's own AdamW to miss the fixture's weights by 8e-7, its tolerance 2.5e-7), and freed
// memory kept in the process with tensors from bertft's CPU allocator (cpu_allocator.h).
int main(int argc, char** argv) {
  bert::apply_load_time_settings(argv);
  bert::keep_freed_memory();
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
