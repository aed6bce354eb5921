#pragma once

#include <torch/torch.h>

#include <string>

#include "bert/common/override.h"
#include "bert/model/onednn_linear.h"

namespace bert {

/// torch::nn::Linear (same parameters "weight" / "bias", same arithmetic) with an optional
/// inference path in dynamic int8: after quantize_int8() the weight is kept as int8 with one
/// scale per output row (symmetric), and forward runs LibTorch's quantized::linear_dynamic
/// (activations quantized per call, in 7 bits where the int8 engine's CPU has no VNNI, else 8;
/// int8 GEMM, fp32 out). The fp32 parameters stay, so the state dict and export are unchanged.
/// The encoder's projections use it.
class LinearImpl : public torch::nn::LinearImpl {
 public:
  using torch::nn::LinearImpl::LinearImpl;

  torch::Tensor forward(const torch::Tensor& input);

  /// Packs the current weight for the int8 path (inference only: no gradient flows through
  /// it). Throws when this LibTorch has no quantized engine.
  void quantize_int8();
  bool is_int8() const { return !packed_.isNone(); }

  /// input x weight^T + bias under CPU bf16 autocast for a forward without autograd through
  /// oneDNN (use_onednn_bf16_linear), from the weight in bf16 (what autocast would cast it to)
  /// kept while the weight is the same tensor at the same version, instead of cast once per
  /// batch: bf16 training's copy where one matches the weight (see bf16_shadow below: no second
  /// copy while training), else the weight packed for this CPU's bf16 kernels
  /// (onednn_pack_bf16_weight), else its plain cast. A forward that records autograd drops it.
  /// `gelu` applies the exact GELU in the GEMM's output pass. Forwards update the kept weight:
  /// one module's bf16 inference is not for concurrent threads.
  torch::Tensor bf16_inference(const torch::Tensor& input, bool gelu);
  /// Whether a bf16 cast of the weight (plain or packed) is kept now.
  bool keeps_bf16_weight() const { return bf16_weight_.defined() || bf16_packed_.defined(); }
  /// Whether the kept cast is the packed one.
  bool keeps_packed_bf16_weight() const { return bf16_packed_.defined(); }
  /// Drops the kept bf16 cast (its memory goes with it).
  void drop_bf16_weight() {
    bf16_weight_ = torch::Tensor();
    bf16_packed_ = OneDnnPackedBf16Weight();
  }

 private:
  c10::IValue packed_;                  ///< LinearPackedParamsBase of the quantized engine
  torch::Tensor bf16_weight_;           ///< the kept cast when plain (or a training copy)
  OneDnnPackedBf16Weight bf16_packed_;  ///< or packed
  const void* bf16_source_ = nullptr;   ///< the weight's data the kept cast was made from
  int64_t bf16_version_ = -1;           ///< and its version then
};
TORCH_MODULE(Linear);

/// bf16 copies of float32 weights kept from one training step to the next under CPU bf16
/// autocast ("shadows"). Without them every projection casts its weight to bf16 in every
/// forward (bert-base: 85M weights read and written each step, and again for each micro-batch
/// of an accumulated step); with them bert::Linear's forwards that record autograd take the kept
/// copy, and the fused AdamW (tasks/training/optimizer.cpp) writes the copy in the pass in
/// which it updates the weight, rounded as the cast rounds. A copy is used only while it
/// matches its weight (the same data, the same version), so any other change to a weight is
/// seen and the weight cast anew: the values are always the cast's. The copies live in one
/// table keyed by the weight, dropped when the weight goes or trains without bf16.
namespace bf16_shadow {

/// Whether bf16 training forwards keep shadows: unless a ScopedBf16Shadows says otherwise or
/// BERTFT_BF16_SHADOW=off (for side-by-side measurements).
bool enabled();

/// Whether the shadows are kept packed where the CPU's bf16 kernels read a packed b
/// (onednn_pack_bf16_weight): two copies, one laid out for the forward's product and one for the
/// input gradient's, written by the fused AdamW straight into those layouts, so that the kernels
/// do not copy the weight into them inside every product. Unless a ScopedBf16ShadowPacking says
/// otherwise or BERTFT_BF16_SHADOW_PACK=off (plain copies, for side-by-side measurements).
bool packing();

/// A weight's kept bf16 copy: plain ([out, in], as the cast gives it) or packed (both layouts).
struct Copies {
  torch::Tensor plain;
  OneDnnPackedBf16Weight forward, input_grad;
  bool defined() const { return plain.defined() || forward.defined(); }
  bool packed() const { return forward.defined(); }
};

/// The bf16 copy of float32 `weight` as its values are now: the kept one where it matches,
/// else `weight` cast now and kept (the stale copy released first, so that its memory can be
/// reused unless a graph still holds it); packed where packing() says so and the CPU's kernels
/// read a packed b.
Copies current(const torch::Tensor& weight);

/// The kept copy matching `weight` now, or an undefined one (nothing is cast).
Copies find_current(const torch::Tensor& weight);

/// The kept copy of `weight`, whatever its version (undefined when none), for a writer that
/// updates the weight and writes its copy in one pass (a packed one through each layout's
/// writer()); it then bumps the weight's version and calls written(weight).
Copies writable(const torch::Tensor& weight);

/// Says that `weight`'s copy was written from its values as they are now (and bumps the copy's
/// version, so that an autograd graph that saved the old copy refuses to run backward, as it
/// would after any in-place change).
void written(const torch::Tensor& weight);

/// Drops `weight`'s copy, if any.
void drop(const torch::Tensor& weight);

/// How many copies are kept (those of weights that are gone are dropped first).
size_t count();

}  // namespace bf16_shadow

/// Turns the packing of bf16 shadows on or off while in scope (tests and measurements alternate
/// both); a copy made before keeps its form.
class ScopedBf16ShadowPacking : detail::ScopedOverride {
 public:
  explicit ScopedBf16ShadowPacking(bool on);
};

/// Turns bf16 shadows on or off while in scope (tests and measurements alternate both).
class ScopedBf16Shadows : detail::ScopedOverride {
 public:
  explicit ScopedBf16Shadows(bool on);
};

/// dense(input) + residual with the residual added in the GEMM's own output pass, where that is
/// what dense would compute anyway (float32 through oneDNN, not int8) and nothing records
/// autograd: the projection output and residual sum of an inference forward, one pass over
/// [tokens, out] fewer. Else undefined (the caller adds the two itself).
torch::Tensor linear_add_if_inference(LinearImpl& dense,
                                      const torch::Tensor& input,
                                      const torch::Tensor& residual);

/// Switches every bert::Linear under `module` (the encoder layers' Q, K, V, attention output and
/// feed-forward projections) to the int8 path; returns how many. Embeddings, LayerNorms, pooler
/// and task heads stay fp32, as with torch.quantization.quantize_dynamic of those layers.
int64_t quantize_dynamic_int8(torch::nn::Module& module);

/// The quantized engine quantize_int8 uses ("ONEDNN", "QNNPACK", ...), chosen among those this
/// LibTorch was built with, or "" when it has none.
std::string int8_engine();

}  // namespace bert
