#pragma once

namespace bert {

/// Sets LibTorch's intra-op thread count (LibTorch starts with 1 thread on some machines).
/// `requested <= 0` means one per hardware thread. Returns the count now in effect.
int configure_threads(int requested);

/// libgomp reads OMP_WAIT_POLICY once, when it loads. Its default lets idle OpenMP threads spin,
/// which here made a small BERT train 3x slower (61 s vs 184 s for an SST-2 epoch, hidden 128)
/// and HF's bert-base fp32 training 20-25% slower; only bert-base bf16 gains (~5%) from spinning.
/// So when the variable is unset, this sets it to "passive" and re-executes the program with the
/// same arguments; a user's own setting always wins. Returns when nothing was to be done or the
/// re-execution failed (the program then runs on with the default).
void prefer_passive_openmp(char** argv);

}  // namespace bert
