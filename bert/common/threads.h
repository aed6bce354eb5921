#pragma once

namespace bert {

/// Sets LibTorch's intra-op thread count (LibTorch starts with 1 thread on some machines).
/// `requested <= 0` means one per hardware thread. Returns the count now in effect.
int configure_threads(int requested);

}  // namespace bert
