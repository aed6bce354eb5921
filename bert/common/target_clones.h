#pragma once

/// Put before a kernel's definition: GCC builds it in an AVX-512, an AVX2 and a baseline x86-64
/// version and picks one at load time by the CPU (nothing elsewhere). For bertft's hand-written
/// loops (dropout, AdamW, clipping's norm), which LibTorch's own dispatch does not reach.
#if defined(__x86_64__) && defined(__GNUC__)
#define BERTFT_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define BERTFT_CLONES
#endif
