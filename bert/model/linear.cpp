#include "bert/model/linear.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <algorithm>

#include "bert/model/onednn_linear.h"

namespace bert {
namespace {

/// Selects (once) the best quantized engine this build has: fbgemm-based ones first (x86
/// servers), then oneDNN (x86, VNNI where the CPU has it), then QNNPACK (portable).
at::QEngine select_engine() {
  static const at::QEngine engine = [] {
    const auto& supported = at::Context::supportedQEngines();
    for (const auto e : {at::kX86, at::kFBGEMM, at::kONEDNN, at::kQNNPACK})
      if (std::find(supported.begin(), supported.end(), e) != supported.end()) {
        at::globalContext().setQEngine(e);
        return e;
      }
    return at::kNoQEngine;
  }();
  if (engine != at::kNoQEngine && at::globalContext().qEngine() != engine)
    at::globalContext().setQEngine(engine);
  return engine;
}

torch::jit::Stack call(const char* op, torch::jit::Stack stack) {
  c10::Dispatcher::singleton().findSchemaOrThrow(op, "").callBoxed(&stack);
  return stack;
}

}  // namespace

std::string int8_engine() {
  const auto e = select_engine();
  return e == at::kNoQEngine ? "" : c10::toString(e);
}

void LinearImpl::quantize_int8() {
  TORCH_CHECK(select_engine() != at::kNoQEngine,
              "int8: this LibTorch was built without a quantized engine (fbgemm, onednn or "
              "qnnpack)");
  torch::NoGradGuard no_grad;
  const torch::Tensor w = weight.detach().to(torch::kCPU, torch::kFloat).contiguous();
  const torch::Tensor scales = (w.abs().amax(1) / 127.0).clamp_min(1e-12).to(torch::kDouble);
  const torch::Tensor zeros = torch::zeros({w.size(0)}, torch::kLong);
  const torch::Tensor q = torch::quantize_per_channel(w, scales, zeros, 0, torch::kQInt8);
  c10::optional<torch::Tensor> b;
  if (bias.defined()) b = bias.detach().to(torch::kCPU, torch::kFloat).contiguous();
  packed_ = call("quantized::linear_prepack", {q, b})[0];
}

const torch::Tensor& LinearImpl::bf16_weight() {
  if (!bf16_weight_.defined() || bf16_source_ != weight.data_ptr() ||
      bf16_version_ != weight._version()) {
    bf16_weight_ = torch::Tensor();  // the old cast's memory first
    const torch::NoGradGuard no_grad;
    bf16_weight_ = weight.to(torch::kBFloat16);
    bf16_source_ = weight.data_ptr();
    bf16_version_ = weight._version();
  }
  return bf16_weight_;
}

torch::Tensor LinearImpl::forward(const torch::Tensor& input) {
  if (packed_.isNone()) {
    if (linear_needs_autograd(input, weight, bias))
      drop_bf16_weight();
    else if (use_onednn_bf16_linear(input, weight))
      return onednn_linear_bf16_cast(input, bf16_weight(), bias, /*gelu=*/false);
    return fast_linear(input, weight, bias);
  }
  TORCH_CHECK(input.device().is_cpu(), "int8 linear: CPU only, got ", input.device());
  select_engine();
  const torch::Tensor x = input.to(torch::kFloat).contiguous();
  return call("quantized::linear_dynamic", {x, packed_, false})[0].toTensor();
}

torch::Tensor linear_add_if_inference(LinearImpl& dense,
                                      const torch::Tensor& input,
                                      const torch::Tensor& residual) {
  const bool fits =
      residual.dim() == input.dim() && input.dim() >= 1 &&
      residual.sizes().slice(0, input.dim() - 1) == input.sizes().slice(0, input.dim() - 1) &&
      residual.size(-1) == dense.weight.size(0);
  if (!fits || dense.is_int8() || linear_needs_autograd(input, dense.weight, dense.bias) ||
      (torch::GradMode::is_enabled() && residual.requires_grad()) ||
      residual.scalar_type() != torch::kFloat || !residual.device().is_cpu() ||
      !use_onednn_linear(input, dense.weight))
    return {};
  return onednn_linear_add(input, dense.weight, dense.bias, residual);
}

int64_t quantize_dynamic_int8(torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& m : module.modules(/*include_self=*/true))
    if (auto* linear = dynamic_cast<LinearImpl*>(m.get())) {
      linear->quantize_int8();
      ++n;
    }
  return n;
}

}  // namespace bert
