#include "bert/model/linear.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include "bert/model/onednn_detail.h"
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

/// Whether quantized::linear_dynamic quantizes the activations to 7 bits (reduce_range): x86's
/// u8 x s8 products without VNNI (vpmaddubsw) add pairs of them in 16 bits, which saturate with
/// 8-bit activations (a bert-sized product 19% off fp32 on an AMD EPYC with AVX2 only; within
/// 3% in 7 bits). The oneDNN engine by oneDNN's effective ISA (ONEDNN_MAX_CPU_ISA lowers it),
/// the others by the CPU. PyTorch's own dynamic quantization takes 7 bits on x86 by default.
bool int8_reduced_range() {
  static const bool reduce = [] {
#if defined(__x86_64__) || defined(__i386__)
#ifdef BERTFT_HAVE_DNNL
    if (select_engine() == at::kONEDNN) {
      return !detail::onednn_isa_has(dnnl::cpu_isa::avx512_core_vnni) &&
             !detail::onednn_isa_has(dnnl::cpu_isa::avx2_vnni);
    }
#endif
    // AVX-VNNI: CPUID leaf 7, sub-leaf 1, EAX bit 4, read here because clang 14's
    // __builtin_cpu_supports does not know "avxvnni" (the fuzz build); AVX2 usable (OS state).
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool avx_vnni = __builtin_cpu_supports("avx2") &&
                          __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && ((eax >> 4) & 1u);
    return !__builtin_cpu_supports("avx512vnni") && !avx_vnni;
#else
    return false;
#endif
  }();
  return reduce;
}

torch::jit::Stack call(const char* op, torch::jit::Stack stack) {
  c10::Dispatcher::singleton().findSchemaOrThrow(op, "").callBoxed(&stack);
  return stack;
}

}  // namespace

namespace bf16_shadow {
namespace {

struct Shadow {
  /// The weight's TensorImpl, held weakly: its address is not reused while the entry lives.
  c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> owner;
  Copies copy = {};
  const void* data = nullptr;  ///< the weight's data the copy was made from
  int64_t version = -1;        ///< and its version then
};

/// A ScopedBf16Shadows' choice, and a ScopedBf16ShadowPacking's.
detail::Override shadows, packed_shadows;

std::mutex table_mutex;

std::unordered_map<const c10::TensorImpl*, Shadow>& table() {
  static std::unordered_map<const c10::TensorImpl*, Shadow> shadows;
  return shadows;
}

void drop_orphans() {
  for (auto it = table().begin(); it != table().end();)
    it = it->second.owner.expired() ? table().erase(it) : std::next(it);
}

/// `weight`'s entry, or null; table_mutex held.
Shadow* entry(const torch::Tensor& weight) {
  const auto it = table().find(weight.unsafeGetTensorImpl());
  if (it == table().end()) return nullptr;
  if (it->second.owner.expired()) {
    table().erase(it);
    return nullptr;
  }
  return &it->second;
}

bool matches(const Shadow& s, const torch::Tensor& weight) {
  const bool same_shape = s.copy.packed()
                              ? s.copy.forward.out_features() == weight.size(0) &&
                                    s.copy.forward.in_features() == weight.size(1)
                              : s.copy.plain.defined() && s.copy.plain.sizes() == weight.sizes();
  return same_shape && s.data == weight.data_ptr() && s.version == weight._version();
}

}  // namespace

bool enabled() {
  static const bool on = !detail::env_is("BERTFT_BF16_SHADOW", "off");
  return shadows.on_or(on);
}

bool packing() {
  static const bool on = !detail::env_is("BERTFT_BF16_SHADOW_PACK", "off");
  return packed_shadows.on_or(on);
}

Copies current(const torch::Tensor& weight) {
  TORCH_CHECK(weight.scalar_type() == torch::kFloat && weight.device().is_cpu(),
              "bf16_shadow: float32 CPU weights only, got ", weight.scalar_type(), " on ",
              weight.device());
  const std::lock_guard<std::mutex> lock(table_mutex);
  Shadow* s = entry(weight);
  if (s != nullptr && matches(*s, weight)) return s->copy;
  if (s == nullptr) {
    drop_orphans();
    s = &table()
             .emplace(weight.unsafeGetTensorImpl(),
                      Shadow{c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>(
                          weight.getIntrusivePtr())})
             .first->second;
  }
  s->copy = Copies();  // the old copy's memory first (unless a graph still holds it)
  const torch::NoGradGuard no_grad;
  const torch::Tensor w = weight.detach();
  if (packing() && w.dim() == 2) {
    s->copy.forward = onednn_pack_bf16_weight(w, PackedFor::kForward);
    if (s->copy.forward.defined())
      s->copy.input_grad = onednn_pack_bf16_weight(w, PackedFor::kInputGradient);
    if (!s->copy.input_grad.defined()) s->copy.forward = OneDnnPackedBf16Weight();
  }
  if (!s->copy.packed()) s->copy.plain = w.to(torch::kBFloat16).contiguous();
  s->data = weight.data_ptr();
  s->version = weight._version();
  return s->copy;
}

Copies find_current(const torch::Tensor& weight) {
  const std::lock_guard<std::mutex> lock(table_mutex);
  const Shadow* s = entry(weight);
  return s != nullptr && matches(*s, weight) ? s->copy : Copies();
}

Copies writable(const torch::Tensor& weight) {
  const std::lock_guard<std::mutex> lock(table_mutex);
  const Shadow* s = entry(weight);
  return s != nullptr ? s->copy : Copies();
}

void written(const torch::Tensor& weight) {
  const std::lock_guard<std::mutex> lock(table_mutex);
  Shadow* s = entry(weight);
  if (s == nullptr || !s->copy.defined()) return;
  s->data = weight.data_ptr();
  s->version = weight._version();
  if (s->copy.plain.defined()) torch::autograd::impl::bump_version(s->copy.plain);
  for (const auto* packed : {&s->copy.forward, &s->copy.input_grad})
    if (packed->defined()) torch::autograd::impl::bump_version(packed->storage());
}

void drop(const torch::Tensor& weight) {
  const std::lock_guard<std::mutex> lock(table_mutex);
  table().erase(weight.unsafeGetTensorImpl());
}

size_t count() {
  const std::lock_guard<std::mutex> lock(table_mutex);
  drop_orphans();
  return table().size();
}

}  // namespace bf16_shadow

ScopedBf16ShadowPacking::ScopedBf16ShadowPacking(bool on)
    : ScopedOverride(bf16_shadow::packed_shadows, on ? 1 : 0) {}

ScopedBf16Shadows::ScopedBf16Shadows(bool on) : ScopedOverride(bf16_shadow::shadows, on ? 1 : 0) {}

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

torch::Tensor LinearImpl::bf16_inference(const torch::Tensor& input, bool gelu) {
  if (!keeps_bf16_weight() || bf16_source_ != weight.data_ptr() ||
      bf16_version_ != weight._version()) {
    drop_bf16_weight();  // the old cast's memory first
    const torch::NoGradGuard no_grad;
    const auto shadow = bf16_shadow::find_current(weight);
    bf16_weight_ = shadow.plain;
    bf16_packed_ = shadow.forward;
    if (!shadow.defined()) bf16_packed_ = onednn_pack_bf16_weight(weight);
    if (!keeps_bf16_weight()) bf16_weight_ = weight.to(torch::kBFloat16);
    bf16_source_ = weight.data_ptr();
    bf16_version_ = weight._version();
  }
  if (bf16_packed_.defined()) return onednn_linear_bf16_packed(input, bf16_packed_, bias, gelu);
  return onednn_linear_bf16_cast(input, bf16_weight_, bias, gelu);
}

torch::Tensor LinearImpl::forward(const torch::Tensor& input) {
  if (packed_.isNone()) {
    if (linear_needs_autograd(input, weight, bias)) {
      drop_bf16_weight();
      if (bf16_shadow::enabled() && use_onednn_bf16_linear(input, weight)) {
        const auto copy = bf16_shadow::current(weight);
        if (copy.packed())
          return onednn_linear_bf16_packed_training(input, weight, bias, copy.forward,
                                                    copy.input_grad);
        return onednn_linear_bf16(input, weight, bias, copy.plain);
      }
      bf16_shadow::drop(weight);  // training without bf16 holds no copy
    } else if (use_onednn_bf16_linear(input, weight)) {
      return bf16_inference(input, /*gelu=*/false);
    }
    return fast_linear(input, weight, bias);
  }
  TORCH_CHECK(input.device().is_cpu(), "int8 linear: CPU only, got ", input.device());
  select_engine();
  const torch::Tensor x = input.to(torch::kFloat).contiguous();
  return call("quantized::linear_dynamic", {x, packed_, int8_reduced_range()})[0].toTensor();
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
