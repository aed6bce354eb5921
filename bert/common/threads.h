#pragma once

#include <string>

namespace bert {

/// Sets LibTorch's intra-op thread count (LibTorch starts with 1 thread on some machines).
/// `requested <= 0` means one per hardware thread. Returns the count now in effect.
int configure_threads(int requested);

/// This program's file (/proc/self/exe resolved; the link itself where it cannot be read).
std::string self_executable();

/// The core OpenBLAS chose for its kernels when it loaded ("SkylakeX", "Haswell", "Zen", ...), or
/// "" where libblas.so.3 is not OpenBLAS.
std::string openblas_core();

/// What OPENBLAS_CORETYPE should say on a CPU whose OpenBLAS chose `detected`: where it chose a
/// core without AVX2 on a CPU with AVX2 and FMA, "SkylakeX" (with AVX-512 F, BW, VL, DQ and CD) or
/// "Haswell"; else "" (its choice stands). OpenBLAS picks its kernels by CPU model, and a model
/// newer than the library falls back to old ones: Debian 12's OpenBLAS 0.3.21 took "Prescott"
/// (SSE3) on an Intel Xeon of model 207 with AVX-512, where LibTorch's fp32 matmul then ran at
/// 0.034 TF/s against 0.166 with OPENBLAS_CORETYPE=SkylakeX.
std::string openblas_core_override(const std::string& detected, bool avx2_fma, bool avx512);

/// Whether idle OpenMP threads should keep libgomp's default (they spin a while before they
/// sleep) rather than sleep at once ("passive"): where fp32 GEMMs go to oneDNN (`onednn`: this
/// build has it; `fp32_gemm`: $BERTFT_FP32_GEMM, as fp32_gemm() decides: "onednn", or
/// `onednn_avx2`, oneDNN with AVX2 kernels for the CPU, unless "blas"). There every GEMM runs on
/// the OpenMP threads, and spinning between them made
/// a bert-base fp32 training step 8x128 ~9% faster (2.36-2.87 s against 2.73-3.06 s in 7
/// alternated rounds, Intel Xeon with AVX-512, 2026-11-27; inference 32x128 and the quickstart
/// the same). Where OpenBLAS runs them, its own threads wait on spinning OpenMP threads: there
/// libgomp's default made a small BERT train 3x slower (184 s vs 61 s for an SST-2 epoch, hidden
/// 128) and a bert-base fp32 step 1.5x slower (6.0 s vs 3.9 s at 8x128, AMD EPYC with AVX2).
bool openmp_threads_spin(bool onednn_avx2, const char* fp32_gemm, bool onednn);

/// Whether oneDNN's ISA cap leaves it AVX-512 (avx512_core): `cap` is $ONEDNN_MAX_CPU_ISA, or
/// $DNNL_MAX_CPU_ISA where that is unset or empty (null: neither). As oneDNN 2.6 reads it
/// (checked against its get_effective_cpu_isa()): case-insensitive; SSE41, AVX, AVX2 and
/// AVX2_VNNI cap below AVX-512; ALL, the AVX512 ones, an empty or unknown value (AVX2_VNNI_2,
/// which 2.6 does not know) do not. (oneDNN's bf16 products need AVX-512.)
bool onednn_isa_cap_allows_avx512(const char* cap);

/// Whether oneDNN's ISA cap leaves it AVX2 (read as onednn_isa_cap_allows_avx512 reads it: SSE41
/// and AVX cap below). The spin rule, which runs before oneDNN starts, takes the CPU's AVX2 only
/// where this holds, so that it agrees with fp32_gemm(), which asks oneDNN for its effective ISA.
bool onednn_isa_cap_allows_avx2(const char* cap);

/// oneDNN's ISA cap as it reads it: $ONEDNN_MAX_CPU_ISA, or $DNNL_MAX_CPU_ISA where that is
/// unset or empty; null for neither.
const char* onednn_isa_cap();

/// Settings that libraries read once, when they load, so only a fresh process can change them:
/// - OMP_WAIT_POLICY: unset (and no GOMP_SPINCOUNT), it becomes "passive" unless
///   openmp_threads_spin() says otherwise.
/// - OPENBLAS_CORETYPE: unset, it becomes openblas_core_override's answer where there is one.
/// When either was set here, this re-executes the program with the same arguments; a user's own
/// setting always wins. Returns when nothing was to be done or the re-execution failed (the
/// program then runs on with the defaults).
void apply_load_time_settings(char** argv);

/// glibc hands large freed blocks back to the kernel (allocations above its dynamic mmap threshold
/// are unmapped on free; the heap top is trimmed past 128 KiB), so every train step faulted its
/// activations in again: 120 000 page faults and about 15% of a bert-base 8x128 fp32 step here.
/// This keeps freed memory in the process for reuse (mmap only above 1 GiB, never a trim: a
/// 1 GiB threshold still let a 32x128 fp32 step hand back the ~4 GiB it frees at once); the peak
/// resident size is that of the largest step, as before. Tensors then come from
/// HeapCpuAllocator (cpu_allocator.h), whose freed blocks fit the next tensor of their size.
/// BERTFT_MALLOC=system leaves glibc's defaults and LibTorch's allocator (for side-by-side
/// measurements). Returns whether the settings were applied.
bool keep_freed_memory();

}  // namespace bert
