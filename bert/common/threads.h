#pragma once

namespace bert {

/// Sets LibTorch's intra-op thread count (LibTorch starts with 1 thread on some machines).
/// `requested <= 0` means one per hardware thread. Returns the count now in effect.
int configure_threads(int requested);

/// libgomp reads OMP_WAIT_POLICY once, when it loads. Its default lets idle OpenMP threads spin,
/// which here made a small BERT train 3x slower (184 s vs 61 s for an SST-2 epoch, hidden 128)
/// and a bert-base fp32 train step 1.5x slower (6.0 s vs 3.9 s at 8x128); bert-base bf16 is the
/// one case that may gain from spinning (within this machine's noise).
/// So when the variable is unset, this sets it to "passive" and re-executes the program with the
/// same arguments; a user's own setting always wins. Returns when nothing was to be done or the
/// re-execution failed (the program then runs on with the default).
void prefer_passive_openmp(char** argv);

/// glibc hands large freed blocks back to the kernel (allocations above its dynamic mmap threshold
/// are unmapped on free; the heap top is trimmed past 128 KiB), so every train step faulted its
/// activations in again: 120 000 page faults and about 15% of a bert-base 8x128 fp32 step here.
/// This keeps freed memory in the process for reuse (mmap only above 1 GiB, never a trim: a
/// 1 GiB threshold still let a 32x128 fp32 step hand back the ~4 GiB it frees at once); the peak
/// resident size is that of the largest step, as before. BERTFT_MALLOC=system leaves glibc's
/// defaults (for side-by-side measurements). Returns whether the settings were applied.
bool keep_freed_memory();

}  // namespace bert
