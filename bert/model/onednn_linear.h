#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <utility>

#include "bert/common/override.h"
#include "bert/model/pack_kernel.h"

namespace bert {

/// Which library runs the fp32 GEMMs of bert::Linear on CPU.
enum class Fp32Gemm {
  kBlas,    ///< LibTorch's addmm: whatever libblas.so.3 is (OpenBLAS here)
  kOneDnn,  ///< oneDNN's matmul (the libdnnl LibTorch itself links), called directly
};

/// The engine for this process, and why (for the log).
struct Fp32GemmChoice {
  Fp32Gemm engine = Fp32Gemm::kBlas;
  std::string reason;
};

/// Whether this build has the oneDNN path (libdnnl-dev was found at configure time).
bool onednn_built();

/// Whether oneDNN runs bf16 products on this CPU (tried once: oneDNN 2.6 has none below
/// AVX-512, e.g. on an AVX2-only CPU or under ONEDNN_MAX_CPU_ISA=AVX2). Where it does not, bf16
/// work stays on LibTorch's own paths (autocast), ScopedFp32Gemm(kOneDnn) included.
bool onednn_bf16_available();

/// Whether input x weight^T + bias must be recorded for autograd: grad mode on and any of the
/// three (bias may be undefined) requiring a gradient. onednn_linear_gelu needs it false.
bool linear_needs_autograd(const torch::Tensor& input,
                           const torch::Tensor& weight,
                           const torch::Tensor& bias);

/// The engine of this process, decided once: `BERTFT_FP32_GEMM=blas` or `onednn` as the user
/// says; unset or `auto`, oneDNN where oneDNN has AVX2 or AVX-512 kernels for the CPU (after
/// any ONEDNN_MAX_CPU_ISA cap), else the BLAS. On an AVX-512 Intel Xeon oneDNN's products ran
/// 1.8-2x as fast as OpenBLAS pinned to its Haswell kernels; capped at AVX2 on that Xeon they ran
/// as fast as OpenBLAS's Haswell kernels, and whole bert-base steps 1.1x as fast as on the BLAS
/// (the fused output passes, the attention head by head; bench/RESULTS.md, fifteenth session).
/// A fixed rule rather than a timing, so that every process of a run and a resumed run compute
/// alike. Always kBlas in a build without oneDNN. Throws on another value of the variable.
const Fp32GemmChoice& fp32_gemm();

/// For tests and benchmarks: while it lives, every fp32 CPU forward of bert::Linear (outside
/// autocast) takes `engine`, whatever its size and fp32_gemm(), and bf16 autocast's projections
/// and attention go through oneDNN directly (kOneDnn) or through autocast (kBlas); kOneDnn needs
/// onednn_built(). Process-wide; not for concurrent use.
class ScopedFp32Gemm : detail::ScopedOverride {
 public:
  explicit ScopedFp32Gemm(Fp32Gemm engine);
};

/// For tests and benchmarks: while it lives, oneDNN float32 products whose b is row-major with a
/// side of 2048 or more (bert-base's FFN backward) are computed in two halves (`split`) or whole,
/// whatever BERTFT_GEMM_SPLIT says (unset: halves where oneDNN has AVX-512 kernels for the CPU,
/// else whole; `off`: whole). Process-wide; not for concurrent use.
class ScopedGemmSplit : detail::ScopedOverride {
 public:
  explicit ScopedGemmSplit(bool split);
};

/// A weight's float32 gradient dy^T x [N, K] from bf16 dy [M, N] and x [M, K] (contiguous CPU
/// tensors), as onednn_linear_bf16's backward computes it: by oneDNN's inner-product backward
/// (see ScopedInnerProductWeightGradients), which where `bias` is given also writes the bias's
/// gradient into it (dy's column sums, float32 [N]). Needs oneDNN's bf16 products
/// (onednn_bf16_available()).
torch::Tensor onednn_bf16_weight_gradient(const torch::Tensor& dy,
                                          const torch::Tensor& x,
                                          torch::Tensor* bias = nullptr);

/// For tests and benchmarks: while it lives, bf16 weight gradients come from oneDNN's
/// inner-product backward (`inner_product`) or from a matmul of the transposed dy (the bias's
/// from a product of ones), whatever BERTFT_BF16_IP_WEIGHT_GRAD says (unset: the inner product;
/// `off`: the matmul). Process-wide; not for concurrent use.
class ScopedInnerProductWeightGradients : detail::ScopedOverride {
 public:
  explicit ScopedInnerProductWeightGradients(bool inner_product);
};

/// Whether bert::Linear sends a forward of `rows` x `in` -> `out` features through oneDNN:
/// fp32 weight and input on CPU, no autocast, a GEMM large enough that the call's set-up is
/// noise (rows * in * out >= 2^20; below that LibTorch's own path), and fp32_gemm() says so
/// (or a ScopedFp32Gemm).
bool use_onednn_linear(const torch::Tensor& input, const torch::Tensor& weight);

/// Whether bert::Linear's forward under CPU bf16 autocast goes through onednn_linear_bf16 (a
/// float32 weight, at least 2^20 multiply-adds or a ScopedFp32Gemm(kOneDnn);
/// BERTFT_BF16_LINEAR=autocast keeps LibTorch's autocast path instead).
bool use_onednn_bf16_linear(const torch::Tensor& input, const torch::Tensor& weight);

/// What bf16 autocast's torch::linear computes (input, weight and bias cast to bf16, a bf16
/// result), through oneDNN; its backward gives the weight's (and a float32 input's) gradient
/// straight out of the GEMM in float32, where autocast rounds it to bf16 and casts it back.
/// `weight_bf16`, where given, is the weight already cast (a bf16 shadow, see linear.h): it is
/// used instead of casting the weight again.
torch::Tensor onednn_linear_bf16(const torch::Tensor& input,
                                 const torch::Tensor& weight,
                                 const torch::Tensor& bias,
                                 const torch::Tensor& weight_bf16 = {});

/// Which product a packed bf16 weight [out, in] is laid out for: the forward's (weight^T as
/// b [in, out]) or the input gradient's (weight as b [out, in]).
enum class PackedFor { kForward, kInputGradient };

/// A float32 weight [out, in] cast to bf16 (rounded as autocast's cast rounds) and laid out as
/// oneDNN's bf16 matmul kernels for this CPU read their b operand: their blocked layout. The
/// kernels otherwise copy a plain b into that layout inside every product; stand-alone bf16
/// products of bert-base's shapes ran 1.12-1.20x as fast from the packed weight (an AMD EPYC
/// with avx512_bf16, 1024 and 4096 rows; bench/RESULTS.md). For repeated inference (bert::Linear
/// keeps one while its weight is unchanged) and bf16 training's kept copies (bf16_shadow, whose
/// writer lays out each new value through writer()). Cheap to copy (the packed data is shared).
class OneDnnPackedBf16Weight {
 public:
  struct Impl;
  OneDnnPackedBf16Weight() = default;
  explicit OneDnnPackedBf16Weight(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  bool defined() const { return impl_ != nullptr; }
  int64_t out_features() const;
  int64_t in_features() const;
  PackedFor use() const;
  /// Bytes the packed copy holds.
  int64_t nbytes() const;
  /// The packed bytes (a uint8 tensor; its version counts the writes a writer reports).
  const torch::Tensor& storage() const;
  /// Where weight[n][k] lies in storage() (rows n, columns k), for a writer that keeps the copy
  /// equal to the weight's cast (kernels::f32_to_bf16_scattered). Padding stays zero.
  kernels::ScatteredLayout writer() const;
  const Impl& impl() const { return *impl_; }

 private:
  std::shared_ptr<const Impl> impl_;
};

/// `weight` (float32 [out, in], CPU) packed for `use`'s bf16 products; undefined where there is
/// nothing to gain: this CPU's kernels read the plain layout itself, oneDNN has no bf16 products
/// here, or BERTFT_BF16_PACK=off (for side-by-side measurements).
OneDnnPackedBf16Weight onednn_pack_bf16_weight(const torch::Tensor& weight,
                                               PackedFor use = PackedFor::kForward);

/// What onednn_linear_bf16_cast computes (no autograd; `gelu` in the output pass; the bias cast
/// as autocast casts it), from a packed weight.
torch::Tensor onednn_linear_bf16_packed(const torch::Tensor& input,
                                        const OneDnnPackedBf16Weight& weight,
                                        const torch::Tensor& bias,
                                        bool gelu);

/// What onednn_linear_bf16 computes, with autograd, from the weight's bf16 copies packed for the
/// forward and for the input gradient (bf16 training's kept copies): the same values bit for
/// bit, without the kernels' per-product copy of b. The weight's gradient (from the input and
/// the output gradient) is the float32 one onednn_linear_bf16 gives. A write to `input_grad`
/// reported through its storage's version before backward makes backward refuse to run.
torch::Tensor onednn_linear_bf16_packed_training(const torch::Tensor& input,
                                                 const torch::Tensor& weight,
                                                 const torch::Tensor& bias,
                                                 const OneDnnPackedBf16Weight& forward,
                                                 const OneDnnPackedBf16Weight& input_grad);

/// Whether a batched matmul a [..., M, K] x b [..., K, N] goes through onednn_matmul: fp32 as
/// for bert::Linear (CPU, no autocast, at least 2^20 multiply-adds, the engine oneDNN); bf16
/// operands (autocast's) unless BERTFT_BF16_LINEAR=autocast.
bool use_onednn_matmul(const torch::Tensor& a, const torch::Tensor& b);

/// What onednn_linear_bf16 computes, without autograd, from a weight already cast to bf16 (a
/// cast kept for repeated inference: bert::Linear's bf16_inference); `gelu` applies the exact GELU
/// in the GEMM's output pass, the result bf16 (the GELU of the float32 sum, rounded once;
/// autocast rounds the projection, then its GELU). The bias (float32 or undefined) is cast as
/// autocast casts it.
torch::Tensor onednn_linear_bf16_cast(const torch::Tensor& input,
                                      const torch::Tensor& weight_bf16,
                                      const torch::Tensor& bias,
                                      bool gelu);
/// torch::linear(input, weight, bias), through onednn_linear where use_onednn_linear says so (for
/// projections that are not bert::Linear modules: pooler, task heads, the MLM decoder).
torch::Tensor fast_linear(const torch::Tensor& input,
                          const torch::Tensor& weight,
                          const torch::Tensor& bias);

/// a [..., M, K] x b [..., K, N] (2-D to 4-D, equal batch dims) + `add` (optional, no gradient,
/// each dim 1 or the result's: the attention mask [batch, 1, 1, seq]) added in the GEMM's own
/// output pass, through oneDNN's matmul: CPU tensors, a and b both float32 or both bf16 (the
/// result in their type). Operands are read where they are (a transposed or head-split view
/// needs no copy); the result has `out_strides` (a dense layout) when given, else is contiguous.
/// Differentiable in a and b; each gradient comes laid out as its operand (dense views) so that
/// the heads' gradients need no permute copy.
torch::Tensor onednn_matmul(const torch::Tensor& a,
                            const torch::Tensor& b,
                            const torch::Tensor& add = {},
                            c10::IntArrayRef out_strides = {});

/// input x weight^T + bias + residual ([..., out], input's leading dims) in one GEMM, the
/// residual added in its output pass: in float32 the same sums, rounded the same way, as the
/// projection and the addition done apart. For inference only: throws when grad mode is on and
/// an operand requires grad.
torch::Tensor onednn_linear_add(const torch::Tensor& input,
                                const torch::Tensor& weight,
                                const torch::Tensor& bias,
                                const torch::Tensor& residual);

/// input [..., in] x weight [out, in]^T + bias [out] (bias may be undefined), as torch::linear,
/// through oneDNN's fp32 matmul, reading the operands in place (no packing copies of the
/// transposes). Differentiable in input, weight and bias when grad mode is on (the backward's
/// GEMMs run through oneDNN too; no double backward). fp32 CPU tensors only.
torch::Tensor onednn_linear(const torch::Tensor& input,
                            const torch::Tensor& weight,
                            const torch::Tensor& bias);

/// The same with the exact (erf) GELU applied in the GEMM's own output pass, for inference
/// only: throws when grad mode is on and an operand requires grad. (bf16 inference fuses it
/// through onednn_linear_bf16_cast.)
torch::Tensor onednn_linear_gelu(const torch::Tensor& input,
                                 const torch::Tensor& weight,
                                 const torch::Tensor& bias);

}  // namespace bert
