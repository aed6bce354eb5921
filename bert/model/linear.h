#pragma once

#include <torch/torch.h>

#include <string>

namespace bert {

/// torch::nn::Linear (same parameters "weight" / "bias", same arithmetic) with an optional
/// inference path in dynamic int8: after quantize_int8() the weight is kept as int8 with one
/// scale per output row (symmetric), and forward runs LibTorch's quantized::linear_dynamic
/// (activations quantized per call, int8 GEMM, fp32 out). The fp32 parameters stay, so the
/// state dict and export are unchanged. The encoder's projections use it.
class LinearImpl : public torch::nn::LinearImpl {
 public:
  using torch::nn::LinearImpl::LinearImpl;

  torch::Tensor forward(const torch::Tensor& input);

  /// Packs the current weight for the int8 path (inference only: no gradient flows through
  /// it). Throws when this LibTorch has no quantized engine.
  void quantize_int8();
  bool is_int8() const { return !packed_.isNone(); }

  /// The weight cast to bf16, for forwards without autograd under CPU bf16 autocast (what
  /// autocast would cast it to): cast once and kept while the weight is the same tensor at the
  /// same version, instead of once per batch. A forward that records autograd drops it, so that
  /// training holds no second copy. Forwards update it: one module's bf16 inference is not for
  /// concurrent threads.
  const torch::Tensor& bf16_weight();
  /// Whether a bf16 cast of the weight is kept now.
  bool keeps_bf16_weight() const { return bf16_weight_.defined(); }
  /// Drops the kept bf16 cast (its memory goes with it).
  void drop_bf16_weight() { bf16_weight_ = torch::Tensor(); }

 private:
  c10::IValue packed_;  ///< LinearPackedParamsBase of the quantized engine
  torch::Tensor bf16_weight_;
  const void* bf16_source_ = nullptr;  ///< the weight's data the cast was made from
  int64_t bf16_version_ = -1;          ///< and its version then
};
TORCH_MODULE(Linear);

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
