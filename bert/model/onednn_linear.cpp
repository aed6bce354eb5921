#include "bert/model/onednn_linear.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <stdexcept>

#ifdef BERTFT_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace bert {
namespace {

/// `t` as a 2-D operand oneDNN reads in place: one of its two strides 1 and the other at least
/// the row length (row- or column-major, as a transposed view is); else a contiguous copy.
torch::Tensor plain(const torch::Tensor& t) {
  const bool row_major = t.stride(1) == 1 && t.stride(0) >= std::max<int64_t>(t.size(1), 1);
  const bool col_major = t.stride(0) == 1 && t.stride(1) >= std::max<int64_t>(t.size(0), 1);
  return row_major || col_major ? t : t.contiguous();
}

void check_operands(const torch::Tensor& input,
                    const torch::Tensor& weight,
                    const torch::Tensor& bias) {
  TORCH_CHECK(input.device().is_cpu() && weight.device().is_cpu() &&
                  (!bias.defined() || bias.device().is_cpu()),
              "onednn_linear: CPU tensors only");
  TORCH_CHECK(input.scalar_type() == torch::kFloat && weight.scalar_type() == torch::kFloat &&
                  (!bias.defined() || bias.scalar_type() == torch::kFloat),
              "onednn_linear: float32 tensors only");
  TORCH_CHECK(weight.dim() == 2 && input.dim() >= 1 && input.size(-1) == weight.size(1),
              "onednn_linear: input [..., ", input.size(-1), "] does not fit weight ",
              weight.sizes());
  TORCH_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == weight.size(0)),
              "onednn_linear: bias must be [", weight.size(0), "]");
}

#ifdef BERTFT_HAVE_DNNL

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

/// A matmul primitive for one problem (shapes, strides, bias, GELU). oneDNN keeps a cache of
/// its own, but making the primitive descriptor costs ~40 us even on a hit: more than the GEMM
/// of a short sentence. So each thread keeps the primitives it made.
struct Primitive {
  dnnl::matmul::primitive_desc desc;
  dnnl::matmul matmul;
  int64_t scratchpad_bytes = 0;
};

using ProblemKey = std::array<int64_t, 9>;

const Primitive& primitive_for(const ProblemKey& key,
                               const dnnl::memory::desc& a,
                               const dnnl::memory::desc& b,
                               const dnnl::memory::desc& bias,
                               const dnnl::memory::desc& c,
                               bool gelu) {
  thread_local std::map<ProblemKey, Primitive> made;
  if (const auto it = made.find(key); it != made.end()) return it->second;
  if (made.size() >= 1024) made.clear();  // dynamic padding makes many shapes; keep it bounded
  dnnl::primitive_attr attr;
  // The scratchpad comes from the caller (LibTorch's allocator): no memory shared between threads.
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (gelu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
    attr.set_post_ops(ops);
  }
  dnnl::matmul::primitive_desc desc(dnnl::matmul::desc(a, b, bias, c), attr, cpu_engine());
  Primitive p{desc, dnnl::matmul(desc), static_cast<int64_t>(desc.scratchpad_desc().get_size())};
  return made.emplace(key, std::move(p)).first->second;
}

/// c[M, N] = a[M, K] b[K, N] (+ bias[N]) (then GELU), fp32, every operand read where it is.
torch::Tensor gemm(const torch::Tensor& a_in,
                   const torch::Tensor& b_in,
                   const torch::Tensor& bias,
                   bool gelu) {
  const torch::Tensor a = plain(a_in), b = plain(b_in);
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  torch::Tensor c = torch::empty({m, n}, a.options());
  if (m == 0 || n == 0) return c;
  if (k == 0) {
    c.zero_();
    if (bias.defined()) c.add_(bias);
    return gelu ? at::gelu_(c) : c;
  }
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  const dnnl::memory::desc a_md(dims{m, k}, dt::f32, dims{a.stride(0), a.stride(1)});
  const dnnl::memory::desc b_md(dims{k, n}, dt::f32, dims{b.stride(0), b.stride(1)});
  const dnnl::memory::desc c_md(dims{m, n}, dt::f32, dims{n, 1});
  const dnnl::memory::desc bias_md =
      bias.defined() ? dnnl::memory::desc(dims{1, n}, dt::f32, dims{n, 1}) : dnnl::memory::desc();
  const ProblemKey key = {
      m, k, n, a.stride(0), a.stride(1), b.stride(0), b.stride(1), bias.defined(), gelu};
  const Primitive& p = primitive_for(key, a_md, b_md, bias_md, c_md, gelu);

  const auto& engine = cpu_engine();
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC, dnnl::memory(a_md, engine, a.data_ptr())},
      {DNNL_ARG_WEIGHTS, dnnl::memory(b_md, engine, b.data_ptr())},
      {DNNL_ARG_DST, dnnl::memory(c_md, engine, c.data_ptr())}};
  const torch::Tensor b_contig = bias.defined() ? bias.contiguous() : torch::Tensor();
  if (bias.defined())
    args.emplace(DNNL_ARG_BIAS, dnnl::memory(bias_md, engine, b_contig.data_ptr()));
  torch::Tensor scratch;
  if (p.scratchpad_bytes > 0) {
    scratch = torch::empty({p.scratchpad_bytes}, a.options().dtype(torch::kByte));
    args.emplace(DNNL_ARG_SCRATCHPAD,
                 dnnl::memory(p.desc.scratchpad_desc(), engine, scratch.data_ptr()));
  }
  thread_local dnnl::stream stream(engine);
  p.matmul.execute(stream, args);
  stream.wait();
  return c;
}

#else

torch::Tensor gemm(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, bool) {
  throw std::runtime_error("onednn_linear: this build has no oneDNN (install libdnnl-dev)");
}

#endif

/// The backward of y = x w^T (+ b): dx and dw through oneDNN, db as the column sums; only
/// those the graph needs.
torch::autograd::variable_list linear_backward(torch::autograd::AutogradContext* ctx,
                                               const torch::Tensor& grad,
                                               bool with_bias) {
  const auto saved = ctx->get_saved_variables();
  const torch::Tensor& x = saved[0];
  const torch::Tensor& weight = saved[1];
  const torch::Tensor dy = plain(grad);
  torch::autograd::variable_list grads(with_bias ? 3 : 2);
  if (ctx->needs_input_grad(0)) grads[0] = gemm(dy, weight, {}, false);  // [M, N] [N, K]
  if (ctx->needs_input_grad(1)) grads[1] = gemm(dy.t(), x, {}, false);   // [N, M] [M, K]
  if (with_bias && ctx->needs_input_grad(2)) grads[2] = dy.sum(0);
  return grads;
}

/// y = x w^T + b with oneDNN for the forward and both backward GEMMs. (Two functions: an
/// undefined bias cannot be an input of a custom autograd function in this LibTorch.)
struct OneDnnLinearFunction : public torch::autograd::Function<OneDnnLinearFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& x,
                               const torch::Tensor& weight,
                               const torch::Tensor& bias) {
    ctx->save_for_backward({x, weight});
    return gemm(x, weight.t(), bias, /*gelu=*/false);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    return linear_backward(ctx, grads[0], /*with_bias=*/true);
  }
};

struct OneDnnLinearNoBiasFunction : public torch::autograd::Function<OneDnnLinearNoBiasFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& x,
                               const torch::Tensor& weight) {
    ctx->save_for_backward({x, weight});
    return gemm(x, weight.t(), {}, /*gelu=*/false);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    return linear_backward(ctx, grads[0], /*with_bias=*/false);
  }
};

/// `input` as [rows, in] (a view where its layout allows).
torch::Tensor rows_of(const torch::Tensor& input) {
  return input.dim() == 2 ? input : input.reshape({-1, input.size(-1)});
}

std::vector<int64_t> output_sizes(const torch::Tensor& input, int64_t out) {
  std::vector<int64_t> sizes(input.sizes().begin(), input.sizes().end());
  sizes.back() = out;
  return sizes;
}

bool needs_autograd(const torch::Tensor& input,
                    const torch::Tensor& weight,
                    const torch::Tensor& bias) {
  return torch::GradMode::is_enabled() && (input.requires_grad() || weight.requires_grad() ||
                                           (bias.defined() && bias.requires_grad()));
}

/// A ScopedFp32Gemm's engine (as int), or -1.
std::atomic<int> forced_engine{-1};

/// Best time of 5 runs of `run`, after one warm-up.
template <typename Run>
double best_of_5(const Run& run) {
  run();
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

Fp32GemmChoice decide() {
  const char* env = std::getenv("BERTFT_FP32_GEMM");
  const std::string requested = env != nullptr ? env : "auto";
  if (requested != "auto" && requested != "blas" && requested != "onednn")
    throw std::invalid_argument(
        fmt::format("BERTFT_FP32_GEMM: '{}' is not one of auto, blas, onednn", requested));
  if (!onednn_built()) return {Fp32Gemm::kBlas, "fp32 GEMMs: BLAS (this build has no oneDNN)"};
  if (requested == "blas") return {Fp32Gemm::kBlas, "fp32 GEMMs: BLAS (BERTFT_FP32_GEMM)"};
  if (requested == "onednn") return {Fp32Gemm::kOneDnn, "fp32 GEMMs: oneDNN (BERTFT_FP32_GEMM)"};
  torch::NoGradGuard no_grad;
  // Its own generator: the probe must not move the streams that dropout and init draw from.
  auto generator = at::detail::createCPUGenerator(12345);
  const auto x = torch::randn({256, 768}, generator);
  const auto w = torch::randn({768, 768}, generator);
  const double blas = best_of_5([&] { torch::linear(x, w); });
  const double onednn = best_of_5([&] { gemm(x, w.t(), {}, false); });
  return choose_fp32_gemm(blas, onednn);
}

}  // namespace

bool onednn_built() {
#ifdef BERTFT_HAVE_DNNL
  return true;
#else
  return false;
#endif
}

Fp32GemmChoice choose_fp32_gemm(double blas_seconds, double onednn_seconds) {
  const double speedup = blas_seconds / std::max(onednn_seconds, 1e-12);
  if (onednn_seconds < 0.8 * blas_seconds)
    return {Fp32Gemm::kOneDnn,
            fmt::format("fp32 GEMMs: oneDNN (its GEMM runs {:.1f}x as fast as the BLAS here)",
                        speedup)};
  return {Fp32Gemm::kBlas,
          fmt::format("fp32 GEMMs: BLAS (oneDNN's GEMM runs {:.2g}x as fast here)", speedup)};
}

const Fp32GemmChoice& fp32_gemm() {
  static const Fp32GemmChoice choice = decide();
  return choice;
}

ScopedFp32Gemm::ScopedFp32Gemm(Fp32Gemm engine)
    : previous_(forced_engine.exchange(static_cast<int>(engine))) {
  TORCH_CHECK(engine == Fp32Gemm::kBlas || onednn_built(),
              "ScopedFp32Gemm: this build has no oneDNN");
}

ScopedFp32Gemm::~ScopedFp32Gemm() {
  forced_engine.store(previous_);
}

bool use_onednn_linear(const torch::Tensor& input, const torch::Tensor& weight) {
  if (!onednn_built() || !input.device().is_cpu() || input.scalar_type() != torch::kFloat ||
      weight.scalar_type() != torch::kFloat || weight.dim() != 2 || at::autocast::is_cpu_enabled())
    return false;
  if (const int forced = forced_engine.load(); forced >= 0)
    return forced == static_cast<int>(Fp32Gemm::kOneDnn);
  const int64_t in = weight.size(1), out = weight.size(0);
  if (in == 0 || input.numel() / in * in * out < (int64_t{1} << 20)) return false;
  return fp32_gemm().engine == Fp32Gemm::kOneDnn;
}

torch::Tensor onednn_linear(const torch::Tensor& input,
                            const torch::Tensor& weight,
                            const torch::Tensor& bias) {
  check_operands(input, weight, bias);
  const torch::Tensor x = rows_of(input);
  torch::Tensor y;
  if (needs_autograd(input, weight, bias)) {
    y = bias.defined() ? OneDnnLinearFunction::apply(x, weight, bias)
                       : OneDnnLinearNoBiasFunction::apply(x, weight);
  } else {
    y = gemm(x, weight.t(), bias, /*gelu=*/false);
  }
  return y.view(output_sizes(input, weight.size(0)));
}

torch::Tensor onednn_linear_gelu(const torch::Tensor& input,
                                 const torch::Tensor& weight,
                                 const torch::Tensor& bias) {
  check_operands(input, weight, bias);
  TORCH_CHECK(!needs_autograd(input, weight, bias),
              "onednn_linear_gelu: inference only (no autograd through the fused GELU)");
  return gemm(rows_of(input), weight.t(), bias, /*gelu=*/true)
      .view(output_sizes(input, weight.size(0)));
}

}  // namespace bert
