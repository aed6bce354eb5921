#include "bert/model/layer_norm.h"

#include <algorithm>
#include <array>

#include "bert/common/parallel.h"
#include "bert/model/bf16_twin.h"
#include "bert/model/dropout_kernel.h"
#include "bert/model/norm_kernel.h"
#include "bert/model/onednn_detail.h"

namespace bert {
namespace {

struct Normalized {
  torch::Tensor out, sum, mean, rstd;  // sum, mean and rstd where asked to keep them
  torch::Tensor twin;                  // out in bf16, where asked for
};

/// The kernel over x's rows (contiguous copies where x or residual is not), split across threads;
/// with `twin`, each chunk of rows is also written in bf16 while it is in cache.
Normalized normalize(const torch::Tensor& x,
                     const torch::Tensor& residual,
                     const torch::Tensor& weight,
                     const torch::Tensor& bias,
                     double eps,
                     bool keep,
                     bool twin = false) {
  const torch::Tensor in = x.contiguous();
  const torch::Tensor res = residual.defined() ? residual.contiguous() : torch::Tensor();
  const auto floats = x.options().dtype(torch::kFloat);
  const int64_t cols = x.size(-1), rows = x.numel() / cols;
  Normalized n;
  n.out = torch::empty(x.sizes(), floats);
  if (keep) {
    n.sum = torch::empty(x.sizes(), floats);
    auto stat_shape = x.sizes().vec();
    stat_shape.back() = 1;  // LibTorch's shape for a layer_norm's moments
    n.mean = torch::empty(stat_shape, floats);
    n.rstd = torch::empty(stat_shape, floats);
  }
  if (twin) n.twin = torch::empty(x.sizes(), x.options().dtype(torch::kBFloat16));
  const auto data = [](const torch::Tensor& t) {
    return t.defined() ? t.data_ptr<float>() : nullptr;
  };
  const float* r = data(res);
  const float* gamma = weight.data_ptr<float>();
  const float* beta = bias.data_ptr<float>();
  const float e = static_cast<float>(eps);
  float *out = data(n.out), *sum = data(n.sum), *mean = data(n.mean), *rstd = data(n.rstd);
  auto* low = twin ? static_cast<uint16_t*>(n.twin.data_ptr()) : nullptr;
  const int64_t grain = std::max<int64_t>(1, 8192 / cols);  // ~32 KiB of output a chunk
  const bool bf16 = in.scalar_type() == torch::kBFloat16;
  const auto* from = static_cast<const char*>(in.data_ptr());
  const int64_t row_bytes = cols * static_cast<int64_t>(in.element_size());
  parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    const int64_t at = begin * cols;
    kernels::LayerNormOutputs to;
    to.out = out + at;
    if (keep) {
      to.sum = sum + at;
      to.mean = mean + begin;
      to.rstd = rstd + begin;
    }
    kernels::add_layer_norm_f32(from + begin * row_bytes, bf16, r != nullptr ? r + at : nullptr,
                                gamma, beta, end - begin, cols, e, to);
    if (low != nullptr) kernels::f32_to_bf16(to.out, low + at, (end - begin) * cols);
  });
  return n;
}

/// The kernel's forward with LibTorch's layer_norm backward from its sum and moments.
struct AddLayerNormFunction : public torch::autograd::Function<AddLayerNormFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& x,
                               const c10::optional<torch::Tensor>& residual,
                               const torch::Tensor& weight,
                               const torch::Tensor& bias,
                               double eps) {
    const bool has_residual = residual.has_value() && residual->defined();
    Normalized n = normalize(x, has_residual ? *residual : torch::Tensor(), weight, bias, eps,
                             /*keep=*/true);
    ctx->save_for_backward({n.sum, n.mean, n.rstd, weight, bias});
    ctx->saved_data["residual"] = has_residual;
    return n.out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& sum = saved[0];
    // needs_input_grad counts the tensors given (no residual: x, weight, bias); the gradients
    // returned go by argument (x, residual, weight, bias, eps).
    const bool has_residual = ctx->saved_data["residual"].toBool();
    const size_t weight_input = has_residual ? 2 : 1;
    const bool to_x = ctx->needs_input_grad(0);
    const bool to_residual = has_residual && ctx->needs_input_grad(1);
    const std::array<bool, 3> mask = {to_x || to_residual, ctx->needs_input_grad(weight_input),
                                      ctx->needs_input_grad(weight_input + 1)};
    auto [d_sum, d_weight, d_bias] = at::native_layer_norm_backward(
        grads[0].contiguous(), sum, {sum.size(-1)}, saved[1], saved[2], saved[3], saved[4], mask);
    // x's gradient is float32 here; autograd casts it to x's dtype (bf16 under autocast), as it
    // does for the sum's.
    torch::autograd::variable_list out(5);
    if (to_x) out[0] = d_sum;
    if (to_residual) out[1] = d_sum;
    out[2] = d_weight;
    out[3] = d_bias;
    return out;
  }
};

}  // namespace

bool add_layer_norm_fused(const torch::nn::LayerNormImpl& norm,
                          const torch::Tensor& x,
                          const torch::Tensor& residual) {
  static const bool off = detail::env_is("BERTFT_FUSED_LAYER_NORM", "off");
  const auto& w = norm.weight;
  const auto& b = norm.bias;
  if (off || x.dim() < 1 || x.numel() == 0 || !x.device().is_cpu() || !w.defined() || !b.defined())
    return false;
  const int64_t cols = x.size(-1);
  const auto is_vector = [cols](const torch::Tensor& t) {
    return t.dim() == 1 && t.size(0) == cols && t.scalar_type() == torch::kFloat &&
           t.device().is_cpu() && t.is_contiguous();
  };
  if (norm.options.normalized_shape() != std::vector<int64_t>{cols} || !is_vector(w) ||
      !is_vector(b))
    return false;
  if (!residual.defined()) return x.scalar_type() == torch::kFloat;
  return (x.scalar_type() == torch::kFloat || x.scalar_type() == torch::kBFloat16) &&
         residual.scalar_type() == torch::kFloat && residual.sizes() == x.sizes() &&
         residual.device().is_cpu();
}

torch::Tensor add_layer_norm(torch::nn::LayerNormImpl& norm,
                             const torch::Tensor& x,
                             const torch::Tensor& residual) {
  if (!add_layer_norm_fused(norm, x, residual))
    return norm.forward(residual.defined() ? x + residual : x);
  const double eps = norm.options.eps();
  const bool records = torch::GradMode::is_enabled() &&
                       (x.requires_grad() || (residual.defined() && residual.requires_grad()) ||
                        norm.weight.requires_grad() || norm.bias.requires_grad());
  if (records) {
    // An optional, not an undefined tensor: autograd records every tensor argument as an input.
    const auto r = residual.defined() ? c10::optional<torch::Tensor>(residual) : c10::nullopt;
    return AddLayerNormFunction::apply(x, r, norm.weight, norm.bias, eps);
  }
  // Under bf16 autocast the output's bf16 rounding is what the next projections take.
  const bool twin = bf16_twin::wanted();
  Normalized n = normalize(x, residual, norm.weight, norm.bias, eps, /*keep=*/false, twin);
  return twin ? bf16_twin::remember(n.out, n.twin) : std::move(n.out);
}

}  // namespace bert
