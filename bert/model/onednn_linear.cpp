#include "bert/model/onednn_linear.h"

#include <ATen/record_function.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <utility>

#include "bert/common/autocast.h"
#include "bert/model/bf16_twin.h"
#include "bert/model/onednn_detail.h"

namespace bert {
namespace detail {

bool env_is(const char* name, const char* value) {
  const char* env = std::getenv(name);
  return env != nullptr && std::string(env) == value;
}

bool isa_includes(unsigned isa, unsigned wanted) {
  return (isa & wanted) == wanted;
}

#ifdef BERTFT_HAVE_DNNL
const dnnl::engine& onednn_cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

bool onednn_isa_has(dnnl::cpu_isa wanted) {
  return isa_includes(static_cast<unsigned>(dnnl::get_effective_cpu_isa()),
                      static_cast<unsigned>(wanted));
}
#endif

}  // namespace detail

namespace {

/// `t` as an operand oneDNN reads in place: its last two dims row- or column-major (one stride
/// 1, the other at least the row length, as a transposed view is) and no broadcast (zero-stride)
/// batch dim; else a contiguous copy.
torch::Tensor plain(const torch::Tensor& t) {
  const int64_t d = t.dim();
  const auto rows = t.size(d - 2), cols = t.size(d - 1);
  const auto s0 = t.stride(d - 2), s1 = t.stride(d - 1);
  bool ok = (s1 == 1 && s0 >= std::max<int64_t>(cols, 1)) ||
            (s0 == 1 && s1 >= std::max<int64_t>(rows, 1));
  for (int64_t i = 0; ok && i < d - 2; ++i) ok = t.stride(i) > 0 || t.size(i) == 1;
  return ok ? t : t.contiguous();
}

/// An empty tensor of `t`'s sizes laid out as `t` is where `t` is dense (a permuted view, such
/// as the heads' [batch, heads, seq, head_dim] view of [batch, seq, hidden]), else contiguous.
torch::Tensor empty_like_layout(const torch::Tensor& t) {
  return t.is_non_overlapping_and_dense()
             ? torch::empty_strided(t.sizes(), t.strides(), t.options())
             : torch::empty(t.sizes(), t.options());
}

void check_operands(const torch::Tensor& input,
                    const torch::Tensor& weight,
                    const torch::Tensor& bias,
                    bool bf16_input = false,
                    torch::ScalarType weight_type = torch::kFloat) {
  TORCH_CHECK(input.device().is_cpu() && weight.device().is_cpu() &&
                  (!bias.defined() || bias.device().is_cpu()),
              "onednn_linear: CPU tensors only");
  TORCH_CHECK((input.scalar_type() == torch::kFloat ||
               (bf16_input && input.scalar_type() == torch::kBFloat16)) &&
                  weight.scalar_type() == weight_type &&
                  (!bias.defined() || bias.scalar_type() == torch::kFloat),
              "onednn_linear: float32 tensors only (and a bf16 input for the bf16 path, a bf16 "
              "weight for its kept cast)");
  TORCH_CHECK(weight.dim() == 2 && input.dim() >= 1 && input.size(-1) == weight.size(1),
              "onednn_linear: input [..., ", input.size(-1), "] does not fit weight ",
              weight.sizes());
  TORCH_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == weight.size(0)),
              "onednn_linear: bias must be [", weight.size(0), "]");
}

/// A ScopedGemmSplit's choice (0 whole, 1 halves).
detail::Override split_override;

/// A ScopedInnerProductWeightGradients's choice (0 the matmul, 1 the inner product).
detail::Override inner_product_override;

#ifdef BERTFT_HAVE_DNNL

/// A matmul primitive for one problem (shapes, strides, bias, add, GELU). oneDNN keeps a cache
/// of its own, but making the primitive descriptor costs ~40 us even on a hit: more than the
/// GEMM of a short sentence. So each thread keeps the primitives it made.
struct Primitive {
  dnnl::matmul::primitive_desc desc;
  dnnl::matmul matmul;
  int64_t scratchpad_bytes = 0;
  bool reference = false;  ///< oneDNN's reference loop: no JIT kernel takes these layouts
};

dnnl::memory::desc describe(const torch::Tensor& t) {
  TORCH_CHECK(t.scalar_type() == torch::kFloat || t.scalar_type() == torch::kBFloat16,
              "onednn: float32 and bfloat16 only, got ", t.scalar_type());
  const auto type = t.scalar_type() == torch::kFloat ? dnnl::memory::data_type::f32
                                                     : dnnl::memory::data_type::bf16;
  return {dnnl::memory::dims(t.sizes().begin(), t.sizes().end()), type,
          dnnl::memory::dims(t.strides().begin(), t.strides().end())};
}

/// Appends `t`'s rank, sizes and strides to `key` (rank 0 for an undefined tensor).
void add_to_key(std::vector<int64_t>& key, const torch::Tensor& t) {
  key.push_back(t.defined() ? t.dim() : 0);
  if (!t.defined()) return;
  key.push_back(static_cast<int64_t>(t.scalar_type()));
  key.insert(key.end(), t.sizes().begin(), t.sizes().end());
  key.insert(key.end(), t.strides().begin(), t.strides().end());
}

/// One oneDNN matmul: c = a b (+ bias) (+ add) (then GELU), or c += a b where `accumulate`; the
/// operands already in layouts oneDNN reads (see matmul_into).
struct MatmulCall {
  torch::Tensor a, b, bias, add, c;
  bool gelu = false;
  bool accumulate = false;
};

/// The primitive of `problem` with c += (`accumulate`), `add` added and the GELU applied in the
/// output pass, its scratchpad the caller's.
Primitive make_primitive(const dnnl::matmul::desc& problem,
                         bool accumulate,
                         const torch::Tensor& add,
                         bool gelu) {
  dnnl::primitive_attr attr;
  // The scratchpad comes from the caller (LibTorch's allocator): no memory shared between threads.
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::post_ops ops;
  if (accumulate) ops.append_sum(1.f);  // c += a b: the sum reads c before the other post-ops
  if (add.defined()) ops.append_binary(dnnl::algorithm::binary_add, describe(add));
  if (gelu) ops.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
  attr.set_post_ops(ops);
  dnnl::matmul::primitive_desc desc(problem, attr, detail::onednn_cpu_engine());
  const bool reference = std::string(desc.impl_info_str()).rfind("ref", 0) == 0;
  return {desc, dnnl::matmul(desc), static_cast<int64_t>(desc.scratchpad_desc().get_size()),
          reference};
}

/// `made`'s entry for `key`, made by `make()` where there is none: a thread's kept primitives
/// and plans. Dynamic padding makes many shapes, so the map is emptied at 1024 entries.
template <class Map, class Make>
const typename Map::mapped_type& kept(Map& made, typename Map::key_type key, const Make& make) {
  if (const auto it = made.find(key); it != made.end()) return it->second;
  if (made.size() >= 1024) made.clear();
  return made.emplace(std::move(key), make()).first->second;
}

const Primitive& primitive_for(const MatmulCall& m) {
  const auto& [a, b, bias, add, c, gelu, accumulate] = m;
  std::vector<int64_t> key = {gelu, accumulate};
  for (const auto* t : {&a, &b, &bias, &add, &c}) add_to_key(key, *t);
  thread_local std::map<std::vector<int64_t>, Primitive> made;
  // (The lambda reads m's members: C++17 lets no lambda capture a structured binding.)
  return kept(made, std::move(key), [&m] {
    const auto bias_md = m.bias.defined() ? describe(m.bias) : dnnl::memory::desc();
    return make_primitive(dnnl::matmul::desc(describe(m.a), describe(m.b), bias_md, describe(m.c)),
                          m.accumulate, m.add, m.gelu);
  });
}

/// This thread's oneDNN stream (each thread runs its primitives on its own).
dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(detail::onednn_cpu_engine());
  return stream;
}

/// Runs `primitive` on this thread's stream with `args`, a scratchpad of `scratchpad_bytes` (as
/// `scratchpad` describes it) added from LibTorch's allocator where it needs one.
void execute(const dnnl::primitive& primitive,
             const dnnl::memory::desc& scratchpad,
             int64_t scratchpad_bytes,
             std::unordered_map<int, dnnl::memory> args) {
  torch::Tensor scratch;
  if (scratchpad_bytes > 0) {
    scratch = torch::empty({scratchpad_bytes}, torch::kByte);
    args.emplace(DNNL_ARG_SCRATCHPAD,
                 dnnl::memory(scratchpad, detail::onednn_cpu_engine(), scratch.data_ptr()));
  }
  dnnl::stream& stream = thread_stream();
  primitive.execute(stream, args);
  stream.wait();
}

void execute(const Primitive& p, std::unordered_map<int, dnnl::memory> args) {
  execute(p.matmul, p.desc.scratchpad_desc(), p.scratchpad_bytes, std::move(args));
}

/// Runs `m` through its (kept) primitive.
void run_matmul(const MatmulCall& m) {
  const auto& [a, b, bias, add, c, gelu, accumulate] = m;
  RECORD_FUNCTION("bertft::onednn_matmul", std::vector<c10::IValue>({a, b}));
  const Primitive& p = primitive_for(m);
  if (p.reference && !(a.is_contiguous() && b.is_contiguous() && c.is_contiguous())) {
    // No JIT kernel takes these strides: oneDNN's reference loop would be ~100x slower than
    // copying the operands into plain layouts.
    const torch::Tensor out = torch::empty(c.sizes(), c.options());
    run_matmul({a.contiguous(), b.contiguous(), bias, add, out, gelu, /*accumulate=*/false});
    if (accumulate)
      c.add_(out);
    else
      c.copy_(out);
    return;
  }
  const auto& engine = detail::onednn_cpu_engine();
  const auto memory = [&](const torch::Tensor& t) {
    return dnnl::memory(describe(t), engine, t.data_ptr());
  };
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC, memory(a)}, {DNNL_ARG_WEIGHTS, memory(b)}, {DNNL_ARG_DST, memory(c)}};
  if (bias.defined()) args.emplace(DNNL_ARG_BIAS, memory(bias));
  if (add.defined())  // the binary post-op comes after the sum, when there is one
    args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(accumulate ? 1 : 0) | DNNL_ARG_SRC_1, memory(add));
  execute(p, std::move(args));
}

/// Whether matmul_into splits a wide row-major b: a ScopedGemmSplit's choice, else where oneDNN
/// has AVX-512 kernels for the CPU, unless BERTFT_GEMM_SPLIT=off (which keeps every product
/// whole, for side-by-side measurements). Below AVX-512 oneDNN 2.6 takes its gemm:jit kernels,
/// whose whole products ran 1.0-1.1x as fast as their halves (an AVX-512 Xeon capped at AVX2).
bool split_wide_gemms() {
  static const bool split = detail::onednn_isa_has(dnnl::cpu_isa::avx512_core) &&
                            !detail::env_is("BERTFT_GEMM_SPLIT", "off");
  return split_override.on_or(split);
}

/// A side of a row-major float32 b from which matmul_into computes the product in two halves.
/// oneDNN 2.6's matmul (what LibTorch 1.13 links) ran such products at 0.8-0.9 of the speed of
/// their two halves on this machine's AVX-512 CPU (bench_suite --only gemm): bert-base's FFN
/// backward, whose b is a weight [3072, 768] or [768, 3072] or the GELU output [tokens, 3072] as
/// stored. Sides of 768 and 1024 gained nothing; bf16 products neither (0.91-1.05x), so they
/// stay whole.
constexpr int64_t kWideSide = 2048;

/// Where a 2-D float32 a [M, K] x b [K, N] has b row-major and N or K of kWideSide or more: c
/// from the two column halves of b (N wide), or, for a float32 c without bias, add or GELU, from
/// the two halves of K, the second added in the GEMM's own output pass (K wide); returns whether
/// it did.
bool split_wide_product(const MatmulCall& m) {
  const auto& [a, b, bias, add, c, gelu, accumulate] = m;
  if (accumulate || a.dim() != 2 || b.dim() != 2 || a.scalar_type() != torch::kFloat ||
      b.stride(1) != 1 || add.defined() || !split_wide_gemms())
    return false;
  const int64_t k = b.size(0), n = b.size(1);
  const auto half = [](int64_t side) { return (side / 2 + 63) / 64 * 64; };
  if (n >= kWideSide) {
    const int64_t first = half(n);
    const auto part = [&](const torch::Tensor& t, int64_t start, int64_t length) {
      return t.defined() && t.size(-1) == n ? t.narrow(-1, start, length) : t;
    };
    for (const auto& [start, length] : {std::pair{int64_t{0}, first}, std::pair{first, n - first}})
      run_matmul(
          {a, part(b, start, length), part(bias, start, length), {}, part(c, start, length), gelu});
    return true;
  }
  if (k >= kWideSide && c.scalar_type() == torch::kFloat && !bias.defined() && !gelu) {
    const int64_t first = half(k);
    run_matmul({a.narrow(1, 0, first), b.narrow(0, 0, first), {}, {}, c});
    run_matmul({a.narrow(1, first, k - first),
                b.narrow(0, first, k - first),
                {},
                {},
                c,
                /*gelu=*/false,
                /*accumulate=*/true});
    return true;
  }
  return false;
}

/// c = a b (+ bias) (+ add) (then GELU) in float32 or bf16 (a and b of one type; c float32 or
/// bf16, the sums float32): a [..., M, K], b [..., K, N], c [..., M, N]
/// allocated by the caller in any dense layout; bias and add broadcast to c (each dim 1 or c's).
/// Every operand is read and written where it is.
void matmul_into(const torch::Tensor& a_in,
                 const torch::Tensor& b_in,
                 const torch::Tensor& bias_in,
                 const torch::Tensor& add_in,
                 bool gelu,
                 const torch::Tensor& c) {
  if (c.numel() == 0) return;
  // oneDNN's JIT kernels write row-major results only: a column-major c (a gradient laid out as
  // a transposed operand) is computed as c^T = b^T a^T.
  if (c.dim() >= 2 && c.stride(-1) != 1 && c.stride(-2) == 1 && !bias_in.defined()) {
    matmul_into(b_in.transpose(-1, -2), a_in.transpose(-1, -2), bias_in,
                add_in.defined() ? add_in.transpose(-1, -2) : add_in, gelu, c.transpose(-1, -2));
    return;
  }
  const torch::Tensor a = plain(a_in), b = plain(b_in);
  const torch::Tensor bias = bias_in.defined() ? bias_in.contiguous() : bias_in;
  const torch::Tensor add = add_in.defined() ? add_in.contiguous() : add_in;
  if (a.size(-1) == 0) {  // an empty sum
    c.zero_();
    if (bias.defined()) c.add_(bias);
    if (add.defined()) c.add_(add);
    if (gelu) c.copy_(torch::gelu(c));
    return;
  }
  const MatmulCall call{a, b, bias, add, c, gelu};
  if (!split_wide_product(call)) run_matmul(call);
}

#else

void matmul_into(const torch::Tensor&,
                 const torch::Tensor&,
                 const torch::Tensor&,
                 const torch::Tensor&,
                 bool,
                 const torch::Tensor&) {
  throw std::runtime_error("onednn: this build has no oneDNN (install libdnnl-dev)");
}

#endif

/// c[M, N] = a[M, K] b[K, N] (+ bias[N]) (+ add[M, N]) (then GELU), into a new contiguous tensor
/// of `dtype` (a's when not given; bf16 operands may give a float32 result: their sums are
/// float32).
torch::Tensor gemm(const torch::Tensor& a,
                   const torch::Tensor& b,
                   const torch::Tensor& bias,
                   bool gelu,
                   c10::optional<torch::ScalarType> dtype = c10::nullopt,
                   const torch::Tensor& add = {}) {
  torch::Tensor c =
      torch::empty({a.size(0), b.size(1)}, a.options().dtype(dtype.value_or(a.scalar_type())));
  matmul_into(a, b, bias.defined() ? bias.view({1, -1}) : bias, add, gelu, c);
  return c;
}

/// What a batched matmul carries besides its two differentiable operands: the tensor added in
/// the GEMM's output pass (no gradient) and the result's strides (empty: contiguous).
struct MatmulExtras {
  torch::Tensor add;
  std::vector<int64_t> strides;
};

torch::Tensor batched_matmul(const torch::Tensor& a,
                             const torch::Tensor& b,
                             const torch::Tensor& add,
                             const std::vector<int64_t>& strides) {
  std::vector<int64_t> sizes(a.sizes().begin(), a.sizes().end());
  sizes.back() = b.size(-1);
  const torch::Tensor c = strides.empty() ? torch::empty(sizes, a.options())
                                          : torch::empty_strided(sizes, strides, a.options());
  matmul_into(a, b, {}, add, /*gelu=*/false, c);
  return c;
}

/// c = a b (+ add) with oneDNN for the forward and both backward GEMMs; each gradient is laid
/// out as its operand is (so the heads' gradients land in [batch, seq, hidden] order).
struct OneDnnMatmulFunction : public torch::autograd::Function<OneDnnMatmulFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& a,
                               const torch::Tensor& b,
                               const MatmulExtras& extras) {
    ctx->save_for_backward({a, b});
    return batched_matmul(a, b, extras.add, extras.strides);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &a = saved[0], &b = saved[1];
    const torch::Tensor dc = plain(grads[0]);
    torch::autograd::variable_list out(3);
    if (ctx->needs_input_grad(0)) {  // da = dc b^T
      out[0] = empty_like_layout(a);
      matmul_into(dc, b.transpose(-1, -2), {}, {}, false, out[0]);
    }
    if (ctx->needs_input_grad(1)) {  // db = a^T dc
      out[1] = empty_like_layout(b);
      matmul_into(a.transpose(-1, -2), dc, {}, {}, false, out[1]);
    }
    return out;
  }
};

/// The bias's gradient from the output's, dy [rows, out], summed in float32. A bf16 dy summed
/// into float32 by ATen is first cast whole (1.0 ms for [1024, 3072]); as a GEMV of ones the
/// bf16 rows are read once and summed in float32 (0.3 ms).
torch::Tensor bias_gradient(const torch::Tensor& dy) {
  return dy.scalar_type() == torch::kBFloat16 && dy.size(0) > 0
             ? gemm(torch::ones({1, dy.size(0)}, dy.options()), dy, {}, false, torch::kFloat)
                   .view({dy.size(1)})
             : dy.sum(0, /*keepdim=*/false, torch::kFloat);
}

#ifdef BERTFT_HAVE_DNNL

/// Whether bf16 weight gradients come from oneDNN's inner-product backward
/// (BERTFT_BF16_IP_WEIGHT_GRAD=off keeps the matmul of the transposed dy, for side-by-side
/// measurements).
bool inner_product_weight_gradients() {
  static const bool on = !detail::env_is("BERTFT_BF16_IP_WEIGHT_GRAD", "off");
  return inner_product_override.on_or(on);
}

/// oneDNN's inner-product backward (weights) for bf16 x [M, K] and dy [M, N], both row-major,
/// into a float32 dW [N, K] row-major and, where `bias`, a float32 db [N].
struct WeightGradientPlan {
  dnnl::inner_product_backward_weights::primitive_desc desc;
  dnnl::inner_product_backward_weights product;
  int64_t scratchpad_bytes = 0;
  bool reference = false;  ///< only oneDNN's reference loop takes it (no bf16 kernels)
};

WeightGradientPlan make_weight_gradient_plan(int64_t m, int64_t n, int64_t k, bool bias) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  using backward = dnnl::inner_product_backward_weights;
  const auto& engine = detail::onednn_cpu_engine();
  const dnnl::memory::desc x({m, k}, dt::bf16, tag::nc), dy({m, n}, dt::bf16, tag::nc),
      dw({n, k}, dt::f32, tag::oi), db({n}, dt::f32, tag::x);
  // The backward is described with its forward as a hint (whose weight layout is left to oneDNN:
  // the gradient's own is given).
  const dnnl::inner_product_forward::primitive_desc hint(
      dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_training, x,
                                        {{n, k}, dt::bf16, tag::any}, dy),
      engine);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  WeightGradientPlan plan;
  plan.desc = backward::primitive_desc(
      bias ? backward::desc(x, dw, db, dy) : backward::desc(x, dw, dy), attr, engine, hint);
  plan.product = backward(plan.desc);
  plan.scratchpad_bytes = static_cast<int64_t>(plan.desc.scratchpad_desc().get_size());
  plan.reference = std::string(plan.desc.impl_info_str()).rfind("ref", 0) == 0;
  return plan;
}

const WeightGradientPlan& weight_gradient_plan(int64_t m, int64_t n, int64_t k, bool bias) {
  thread_local std::map<std::array<int64_t, 4>, WeightGradientPlan> made;
  const std::array<int64_t, 4> key = {m, n, k, bias};
  return kept(made, key, [&] { return make_weight_gradient_plan(m, n, k, bias); });
}

#endif

/// A weight's float32 gradient dy^T x from dy [M, N] and x [M, K], and where `bias` is given the
/// bias's, dy's column sums, into it. bf16 operands go through oneDNN's inner-product backward
/// (weights and bias in one primitive), whose kernels ran the weight gradients of bert-base's
/// shapes 1.12-1.31x as fast as a matmul of the transposed dy (bench_suite --only gemm: 1024
/// tokens, twelve layers' cold operands, an AMD EPYC with avx512_bf16; bench/RESULTS.md), and
/// faster than the matmul from operands laid out for its kernels first.
torch::Tensor weight_gradient(const torch::Tensor& dy,
                              const torch::Tensor& x,
                              torch::Tensor* bias = nullptr) {
#ifdef BERTFT_HAVE_DNNL
  const int64_t m = dy.size(0), n = dy.size(1), k = x.size(1);
  if (dy.scalar_type() == torch::kBFloat16 && x.scalar_type() == torch::kBFloat16 &&
      dy.is_contiguous() && x.is_contiguous() && m > 0 && inner_product_weight_gradients()) {
    const WeightGradientPlan& plan = weight_gradient_plan(m, n, k, bias != nullptr);
    if (!plan.reference) {
      RECORD_FUNCTION("bertft::onednn_weight_gradient", std::vector<c10::IValue>({dy, x}));
      const auto& engine = detail::onednn_cpu_engine();
      const torch::Tensor dw = torch::empty({n, k}, x.options().dtype(torch::kFloat));
      std::unordered_map<int, dnnl::memory> args = {
          {DNNL_ARG_SRC, dnnl::memory(plan.desc.src_desc(), engine, x.data_ptr())},
          {DNNL_ARG_DIFF_DST, dnnl::memory(plan.desc.diff_dst_desc(), engine, dy.data_ptr())},
          {DNNL_ARG_DIFF_WEIGHTS,
           dnnl::memory(plan.desc.diff_weights_desc(), engine, dw.data_ptr())}};
      if (bias != nullptr) {
        *bias = torch::empty({n}, dw.options());
        args.emplace(DNNL_ARG_DIFF_BIAS,
                     dnnl::memory(plan.desc.diff_bias_desc(), engine, bias->data_ptr()));
      }
      execute(plan.product, plan.desc.scratchpad_desc(), plan.scratchpad_bytes, std::move(args));
      return dw;
    }
  }
#endif
  if (bias != nullptr) *bias = bias_gradient(dy);
  return gemm(dy.t(), x, {}, false, torch::kFloat);
}

/// A linear backward's out[1] and out[2], the weight's [N,M] [M,K] and the bias's gradients,
/// where the autograd context asks for them (and a bias was given): one weight_gradient for
/// both, or the bias's alone.
void weight_and_bias_gradients(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& dy,
                               const torch::Tensor& x,
                               torch::autograd::variable_list& out) {
  const bool bias = ctx->saved_data["bias"].toBool() && ctx->needs_input_grad(2);
  if (ctx->needs_input_grad(1))
    out[1] = weight_gradient(dy, x, bias ? &out[2] : nullptr);
  else if (bias)
    out[2] = bias_gradient(dy);
}

/// y = x w^T + b with oneDNN for the forward and both backward GEMMs. In bf16 (for bf16
/// autocast) x, w and b are cast to bf16 as autocast would cast them and y is bf16; the
/// gradients come out of the GEMMs in float32 (w's, and x's when x is float32) without a bf16
/// rounding and a cast pass.
struct OneDnnLinearFunction : public torch::autograd::Function<OneDnnLinearFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& x,
                               const torch::Tensor& weight,
                               const c10::optional<torch::Tensor>& bias,
                               bool bf16,
                               const c10::optional<torch::Tensor>& weight_cast) {
    const auto compute = bf16 ? torch::kBFloat16 : torch::kFloat;
    const torch::Tensor xc = x.to(compute);
    const torch::Tensor wc = weight_cast.has_value() ? *weight_cast : weight.to(compute);
    const torch::Tensor bc = bias.has_value() ? bias->to(compute) : torch::Tensor();
    ctx->save_for_backward({xc, wc});
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["bias"] = bias.has_value() && bias->defined();
    return gemm(xc, wc.t(), bc, /*gelu=*/false);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &weight = saved[1];
    const auto x_dtype = static_cast<torch::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    const torch::Tensor dy = plain(grads[0]).to(x.scalar_type());
    torch::autograd::variable_list out(5);
    if (ctx->needs_input_grad(0)) out[0] = gemm(dy, weight, {}, false, x_dtype);  // [M,N] [N,K]
    weight_and_bias_gradients(ctx, dy, x, out);
    return out;
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

/// input [..., in] x weight^T + bias in one GEMM, no autograd: float32, or bf16 with the operands
/// cast as autocast casts them; `gelu` applies the exact GELU in the GEMM's output pass.
torch::Tensor linear_gemm(const torch::Tensor& input,
                          const torch::Tensor& weight,
                          const torch::Tensor& bias,
                          bool bf16,
                          bool gelu) {
  const auto type = bf16 ? torch::kBFloat16 : torch::kFloat;
  // bf16: the input's twin where its LayerNorm wrote one (bert/model/bf16_twin.h).
  const torch::Tensor x = bf16 ? bf16_twin::cast(input) : input.to(type);
  return gemm(rows_of(x), weight.to(type).t(), bias.defined() ? bias.to(type) : bias, gelu)
      .view(output_sizes(input, weight.size(0)));
}

/// input x weight^T + bias through OneDnnLinearFunction (with autograd) or one GEMM, in
/// float32 or in bf16 (operands cast as autocast casts them); the result in input's shape.
torch::Tensor linear_through_onednn(const torch::Tensor& input,
                                    const torch::Tensor& weight,
                                    const torch::Tensor& bias,
                                    bool bf16,
                                    const torch::Tensor& weight_cast = {}) {
  if (!linear_needs_autograd(input, weight, bias))
    return linear_gemm(input, weight_cast.defined() ? weight_cast : weight, bias, bf16,
                       /*gelu=*/false);
  return OneDnnLinearFunction::apply(
             rows_of(input), weight,
             bias.defined() ? c10::optional<torch::Tensor>(bias) : c10::nullopt, bf16,
             weight_cast.defined() ? c10::optional<torch::Tensor>(weight_cast) : c10::nullopt)
      .view(output_sizes(input, weight.size(0)));
}

/// Whether bf16 work under autocast goes through oneDNN directly (BERTFT_BF16_LINEAR=autocast
/// leaves it to LibTorch's autocast, for side-by-side measurements).
bool bf16_direct() {
  static const bool direct = !detail::env_is("BERTFT_BF16_LINEAR", "autocast");
  return direct;
}

/// A ScopedFp32Gemm's engine (as int).
detail::Override engine_override;

Fp32GemmChoice decide() {
  const char* env = std::getenv("BERTFT_FP32_GEMM");
  const std::string requested = env != nullptr ? env : "auto";
  if (requested != "auto" && requested != "blas" && requested != "onednn")
    throw std::invalid_argument(
        fmt::format("BERTFT_FP32_GEMM: '{}' is not one of auto, blas, onednn", requested));
  if (!onednn_built()) return {Fp32Gemm::kBlas, "fp32 GEMMs: BLAS (this build has no oneDNN)"};
  if (requested == "blas") return {Fp32Gemm::kBlas, "fp32 GEMMs: BLAS (BERTFT_FP32_GEMM)"};
  if (requested == "onednn") return {Fp32Gemm::kOneDnn, "fp32 GEMMs: oneDNN (BERTFT_FP32_GEMM)"};
#ifdef BERTFT_HAVE_DNNL
  // A rule of the CPU, not a timing: every process of a run, and a resumed run, must make the
  // same choice, or the results are no longer bit-for-bit reproducible (with a timed probe two
  // data-parallel runs of one recipe ended with different weights).
  if (detail::onednn_isa_has(dnnl::cpu_isa::avx512_core))
    return {Fp32Gemm::kOneDnn, "fp32 GEMMs: oneDNN (an AVX-512 CPU: its kernels use it)"};
  if (detail::onednn_isa_has(dnnl::cpu_isa::avx2))
    return {Fp32Gemm::kOneDnn, "fp32 GEMMs: oneDNN (an AVX2 CPU: its kernels use it)"};
#endif
  return {Fp32Gemm::kBlas, "fp32 GEMMs: BLAS (no AVX2 for oneDNN's kernels)"};
}

}  // namespace

bool linear_needs_autograd(const torch::Tensor& input,
                           const torch::Tensor& weight,
                           const torch::Tensor& bias) {
  return torch::GradMode::is_enabled() && (input.requires_grad() || weight.requires_grad() ||
                                           (bias.defined() && bias.requires_grad()));
}

bool onednn_built() {
#ifdef BERTFT_HAVE_DNNL
  return true;
#else
  return false;
#endif
}

bool onednn_bf16_available() {
#ifdef BERTFT_HAVE_DNNL
  static const bool available = [] {
    const auto bf16 = dnnl::memory::data_type::bf16;
    const dnnl::memory::desc md{{16, 16}, bf16, dnnl::memory::format_tag::ab};
    try {
      dnnl::matmul::primitive_desc(dnnl::matmul::desc(md, md, md), detail::onednn_cpu_engine());
      return true;
    } catch (const dnnl::error&) {
      return false;  // "could not create a primitive descriptor iterator"
    }
  }();
  return available;
#else
  return false;
#endif
}

const Fp32GemmChoice& fp32_gemm() {
  static const Fp32GemmChoice choice = decide();
  return choice;
}

ScopedFp32Gemm::ScopedFp32Gemm(Fp32Gemm engine)
    : ScopedOverride(engine_override, static_cast<int>(engine)) {
  TORCH_CHECK(engine == Fp32Gemm::kBlas || onednn_built(),
              "ScopedFp32Gemm: this build has no oneDNN");
}

ScopedGemmSplit::ScopedGemmSplit(bool split) : ScopedOverride(split_override, split ? 1 : 0) {}

torch::Tensor onednn_bf16_weight_gradient(const torch::Tensor& dy,
                                          const torch::Tensor& x,
                                          torch::Tensor* bias) {
  TORCH_CHECK(dy.device().is_cpu() && x.device().is_cpu() && dy.scalar_type() == torch::kBFloat16 &&
                  x.scalar_type() == torch::kBFloat16 && dy.dim() == 2 && x.dim() == 2 &&
                  dy.size(0) == x.size(0) && dy.is_contiguous() && x.is_contiguous(),
              "onednn_bf16_weight_gradient: contiguous bf16 CPU tensors dy [M, N] and x [M, K], "
              "got ",
              dy.sizes(), " and ", x.sizes());
  TORCH_CHECK(onednn_bf16_available(),
              "onednn_bf16_weight_gradient: oneDNN has no bf16 products on this CPU");
  return weight_gradient(dy, x, bias);
}

ScopedInnerProductWeightGradients::ScopedInnerProductWeightGradients(bool inner_product)
    : ScopedOverride(inner_product_override, inner_product ? 1 : 0) {}

namespace {

/// Whether a GEMM of `multiply_adds` on `input` (and `other`'s dtype) goes through oneDNN.
bool onednn_wanted(const torch::Tensor& input, const torch::Tensor& other, int64_t multiply_adds) {
  if (!onednn_built() || !input.device().is_cpu() || input.scalar_type() != torch::kFloat ||
      other.scalar_type() != torch::kFloat || autocast::enabled(c10::kCPU))
    return false;
  if (const auto forced = engine_override.is(static_cast<int>(Fp32Gemm::kOneDnn))) return *forced;
  if (multiply_adds < (int64_t{1} << 20)) return false;
  return fp32_gemm().engine == Fp32Gemm::kOneDnn;
}

/// Whether bf16 work of `multiply_adds` (autocast's) goes through oneDNN directly: on CPU,
/// unless BERTFT_BF16_LINEAR=autocast, at least 2^20 multiply-adds; a ScopedFp32Gemm decides
/// for every size (kOneDnn: directly, kBlas: through autocast).
bool bf16_wanted(const torch::Tensor& input, int64_t multiply_adds) {
  if (!onednn_built() || !input.device().is_cpu() || !onednn_bf16_available()) return false;
  if (const auto forced = engine_override.is(static_cast<int>(Fp32Gemm::kOneDnn))) return *forced;
  return bf16_direct() && multiply_adds >= (int64_t{1} << 20);
}

}  // namespace

bool use_onednn_linear(const torch::Tensor& input, const torch::Tensor& weight) {
  if (weight.dim() != 2 || input.dim() < 1) return false;
  const int64_t in = weight.size(1), out = weight.size(0);
  return onednn_wanted(input, weight, in == 0 ? 0 : input.numel() / in * in * out);
}

bool use_onednn_matmul(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.dim() < 2 || a.dim() != b.dim()) return false;
  if (a.scalar_type() == torch::kBFloat16 && b.scalar_type() == torch::kBFloat16)
    return bf16_wanted(a, a.numel() * b.size(-1));
  return onednn_wanted(a, b, a.numel() * b.size(-1));
}

bool use_onednn_bf16_linear(const torch::Tensor& input, const torch::Tensor& weight) {
  if (!autocast::enabled(c10::kCPU) || autocast::dtype(c10::kCPU) != torch::kBFloat16 ||
      weight.dim() != 2 || weight.scalar_type() != torch::kFloat ||
      (input.scalar_type() != torch::kFloat && input.scalar_type() != torch::kBFloat16))
    return false;
  const int64_t in = weight.size(1), out = weight.size(0);
  return bf16_wanted(input, in == 0 ? 0 : input.numel() / in * in * out);
}

torch::Tensor onednn_linear_bf16(const torch::Tensor& input,
                                 const torch::Tensor& weight,
                                 const torch::Tensor& bias,
                                 const torch::Tensor& weight_bf16) {
  check_operands(input, weight, bias, /*bf16_input=*/true);
  TORCH_CHECK(!weight_bf16.defined() ||
                  (weight_bf16.scalar_type() == torch::kBFloat16 &&
                   weight_bf16.sizes() == weight.sizes() && !weight_bf16.requires_grad()),
              "onednn_linear_bf16: weight_bf16 must be a bf16 tensor of the weight's shape "
              "that needs no gradient");
  return linear_through_onednn(input, weight, bias, /*bf16=*/true, weight_bf16);
}

torch::Tensor onednn_linear_bf16_cast(const torch::Tensor& input,
                                      const torch::Tensor& weight_bf16,
                                      const torch::Tensor& bias,
                                      bool gelu) {
  check_operands(input, weight_bf16, bias, /*bf16_input=*/true, torch::kBFloat16);
  TORCH_CHECK(!linear_needs_autograd(input, weight_bf16, bias),
              "onednn_linear_bf16_cast: inference only (the cast weight carries no gradient)");
  return linear_gemm(input, weight_bf16, bias, /*bf16=*/true, gelu);
}

torch::Tensor fast_linear(const torch::Tensor& input,
                          const torch::Tensor& weight,
                          const torch::Tensor& bias) {
  if (use_onednn_linear(input, weight)) return onednn_linear(input, weight, bias);
  if (use_onednn_bf16_linear(input, weight)) return onednn_linear_bf16(input, weight, bias);
  return torch::linear(input, weight, bias);
}

torch::Tensor onednn_matmul(const torch::Tensor& a,
                            const torch::Tensor& b,
                            const torch::Tensor& add,
                            c10::IntArrayRef out_strides) {
  TORCH_CHECK(a.device().is_cpu() && b.device().is_cpu() && a.scalar_type() == b.scalar_type() &&
                  (a.scalar_type() == torch::kFloat || a.scalar_type() == torch::kBFloat16),
              "onednn_matmul: float32 or bfloat16 CPU tensors of one type only");
  TORCH_CHECK(a.dim() == b.dim() && a.dim() >= 2 && a.dim() <= 4 && a.size(-1) == b.size(-2) &&
                  a.sizes().slice(0, a.dim() - 2) == b.sizes().slice(0, b.dim() - 2),
              "onednn_matmul: cannot multiply ", a.sizes(), " by ", b.sizes());
  std::vector<int64_t> sizes(a.sizes().begin(), a.sizes().end());
  sizes.back() = b.size(-1);
  if (add.defined()) {
    TORCH_CHECK((add.scalar_type() == torch::kFloat || add.scalar_type() == torch::kBFloat16) &&
                    add.device().is_cpu() && !add.requires_grad(),
                "onednn_matmul: the added tensor must be float32 or bfloat16 on CPU and need no "
                "gradient");
    bool fits = add.dim() == a.dim();
    for (int64_t i = 0; fits && i < add.dim(); ++i)
      fits = add.size(i) == 1 || add.size(i) == sizes[i];
    TORCH_CHECK(fits, "onednn_matmul: cannot add ", add.sizes(), " to a result of ",
                c10::IntArrayRef(sizes));
  }
  TORCH_CHECK(out_strides.empty() || out_strides.size() == sizes.size(),
              "onednn_matmul: out_strides must give one stride per dim");
  MatmulExtras extras{add, out_strides.vec()};
  if (torch::GradMode::is_enabled() && (a.requires_grad() || b.requires_grad()))
    return OneDnnMatmulFunction::apply(a, b, extras);
  return batched_matmul(a, b, extras.add, extras.strides);
}

torch::Tensor onednn_linear(const torch::Tensor& input,
                            const torch::Tensor& weight,
                            const torch::Tensor& bias) {
  check_operands(input, weight, bias);
  return linear_through_onednn(input, weight, bias, /*bf16=*/false);
}

torch::Tensor onednn_linear_gelu(const torch::Tensor& input,
                                 const torch::Tensor& weight,
                                 const torch::Tensor& bias) {
  check_operands(input, weight, bias);
  TORCH_CHECK(!linear_needs_autograd(input, weight, bias),
              "onednn_linear_gelu: inference only (no autograd through the fused GELU)");
  return linear_gemm(input, weight, bias, /*bf16=*/false, /*gelu=*/true);
}

torch::Tensor onednn_linear_add(const torch::Tensor& input,
                                const torch::Tensor& weight,
                                const torch::Tensor& bias,
                                const torch::Tensor& residual) {
  check_operands(input, weight, bias);
  const auto sizes = output_sizes(input, weight.size(0));
  TORCH_CHECK(residual.device().is_cpu() && residual.scalar_type() == torch::kFloat &&
                  residual.sizes() == c10::IntArrayRef(sizes),
              "onednn_linear_add: the residual must be a float32 CPU tensor of ",
              c10::IntArrayRef(sizes), ", got ", residual.sizes());
  TORCH_CHECK(!linear_needs_autograd(input, weight, bias) &&
                  !(torch::GradMode::is_enabled() && residual.requires_grad()),
              "onednn_linear_add: inference only (no autograd through the added residual)");
  return gemm(rows_of(input), weight.t(), bias, /*gelu=*/false, c10::nullopt, rows_of(residual))
      .view(sizes);
}

struct OneDnnPackedBf16Weight::Impl {
  int64_t out = 0, in = 0;
  PackedFor use = PackedFor::kForward;
  torch::Tensor storage;  ///< the packed bf16 values (bytes)
  /// weight[n][k] at element row[n] + col[k] of storage (the layout's offsets, dim by dim)
  std::vector<int64_t> row, col;
  std::vector<int32_t> pair_col;  ///< col[k] / 2 for even k, where writer()'s pairs path fits
  bool strided_runs = false;      ///< where its strided path fits
#ifdef BERTFT_HAVE_DNNL
  dnnl::memory::desc layout;  ///< their layout, as the kernels chose it for b
#endif
};

int64_t OneDnnPackedBf16Weight::out_features() const {
  return impl_->out;
}
int64_t OneDnnPackedBf16Weight::in_features() const {
  return impl_->in;
}
PackedFor OneDnnPackedBf16Weight::use() const {
  return impl_->use;
}
int64_t OneDnnPackedBf16Weight::nbytes() const {
  return impl_->storage.numel();
}
const torch::Tensor& OneDnnPackedBf16Weight::storage() const {
  return impl_->storage;
}
kernels::ScatteredLayout OneDnnPackedBf16Weight::writer() const {
  kernels::ScatteredLayout to;
  to.data = static_cast<uint16_t*>(impl_->storage.data_ptr());
  to.row = impl_->row.data();
  to.col = impl_->col.data();
  to.pair_col = impl_->pair_col.empty() ? nullptr : impl_->pair_col.data();
  to.rows = impl_->out;
  to.cols = impl_->in;
  to.strided_runs = impl_->strided_runs;
  return to;
}

namespace {

#ifdef BERTFT_HAVE_DNNL

/// The element offset of index `i` of dim `dim` in the blocked 2-D layout `md`: its outer block
/// times the dim's stride, plus its place in the inner blocks (the innermost block varies fastest).
int64_t blocked_offset(const dnnl::memory::desc& md, int dim, int64_t i) {
  const auto& blocking = md.data.format_desc.blocking;
  int64_t per_outer = 1;
  for (int b = 0; b < blocking.inner_nblks; ++b)
    if (blocking.inner_idxs[b] == dim) per_outer *= blocking.inner_blks[b];
  int64_t offset = i / per_outer * blocking.strides[dim];
  int64_t rest = i % per_outer, step = 1;
  for (int b = blocking.inner_nblks - 1; b >= 0; --b) {
    if (blocking.inner_idxs[b] == dim) {
      offset += rest % blocking.inner_blks[b] * step;
      rest /= blocking.inner_blks[b];
    }
    step *= blocking.inner_blks[b];
  }
  return offset;
}

/// Fills impl's offset tables from its layout (b's dims: [in, out] for the forward, [out, in]
/// for the input gradient) and says which of the writer's vector paths fit them.
void lay_out(OneDnnPackedBf16Weight::Impl& impl) {
  const int row_dim = impl.use == PackedFor::kForward ? 1 : 0;
  impl.row.resize(impl.out);
  impl.col.resize(impl.in);
  for (int64_t n = 0; n < impl.out; ++n)
    impl.row[n] = impl.layout.data.offset0 + blocked_offset(impl.layout, row_dim, n);
  for (int64_t k = 0; k < impl.in; ++k) impl.col[k] = blocked_offset(impl.layout, 1 - row_dim, k);
  const int64_t elements = static_cast<int64_t>(impl.layout.get_size()) / 2;
  if (elements >= (int64_t{1} << 31)) return;  // the vector paths' offsets are 32-bit
  const auto even = [](int64_t v) { return v % 2 == 0; };
  bool pairs = std::all_of(impl.row.begin(), impl.row.end(), even);
  for (int64_t k = 0; pairs && k < impl.in; k += 2)
    pairs = even(impl.col[k]) && (k + 1 == impl.in || impl.col[k + 1] == impl.col[k] + 1);
  if (pairs)
    for (int64_t k = 0; k < impl.in; k += 2)
      impl.pair_col.push_back(static_cast<int32_t>(impl.col[k] / 2));
  bool strided = std::all_of(impl.col.begin(), impl.col.end(), even);
  for (int64_t k = 0; strided && k < impl.in; ++k)
    strided = impl.col[k] == impl.col[k / 16 * 16] + 2 * (k % 16);
  impl.strided_runs = strided;
}

#endif

}  // namespace

OneDnnPackedBf16Weight onednn_pack_bf16_weight(const torch::Tensor& weight, PackedFor use) {
  TORCH_CHECK(weight.device().is_cpu() && weight.scalar_type() == torch::kFloat &&
                  weight.dim() == 2 && !(torch::GradMode::is_enabled() && weight.requires_grad()),
              "onednn_pack_bf16_weight: a float32 CPU weight [out, in] without autograd");
#ifdef BERTFT_HAVE_DNNL
  if (weight.numel() == 0 || !onednn_bf16_available() || detail::env_is("BERTFT_BF16_PACK", "off"))
    return {};
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  const int64_t out = weight.size(0), in = weight.size(1);
  const bool forward = use == PackedFor::kForward;
  const int64_t k = forward ? in : out, n = forward ? out : in;  // b [k, n]
  const auto& engine = detail::onednn_cpu_engine();
  // The layout the kernels take for b [k, n] when free to choose: the same for any number of
  // rows (1 to 4096 rows of bert-base's shapes).
  const dnnl::matmul::primitive_desc chosen(
      dnnl::matmul::desc({{1, k}, dt::bf16, tag::ab}, {{k, n}, dt::bf16, tag::any},
                         {{1, n}, dt::bf16, tag::ab}),
      engine);
  const auto layout = chosen.weights_desc();
  // The weight as it is stored: b [in, out] column-major for the forward, row-major else.
  const auto stored = forward ? dnnl::memory::dims{1, in} : dnnl::memory::dims{in, 1};
  if (layout == dnnl::memory::desc({k, n}, dt::bf16, stored) ||
      layout.data.format_kind != dnnl_blocked)
    return {};
  const torch::Tensor w = weight.contiguous();
  auto impl = std::make_shared<OneDnnPackedBf16Weight::Impl>();
  impl->out = out;
  impl->in = in;
  impl->use = use;
  impl->layout = layout;
  impl->storage = torch::zeros({static_cast<int64_t>(layout.get_size())}, torch::kByte);
  lay_out(*impl);
  // Cast and laid out in one pass, rounded as the cast rounds (and as the writer rounds).
  const auto writer = OneDnnPackedBf16Weight(impl).writer();
  kernels::f32_to_bf16_scattered(w.data_ptr<float>(), 0, w.numel(), &writer);
  return OneDnnPackedBf16Weight(std::move(impl));
#else
  (void)use;
  return {};
#endif
}

namespace {

#ifdef BERTFT_HAVE_DNNL

/// c = a [rows, k] (bf16) x the packed b (+ bias, bf16 [1, n]) (then GELU), c of `type`.
torch::Tensor packed_product(const torch::Tensor& a_in,
                             const OneDnnPackedBf16Weight& weight,
                             const torch::Tensor& bias,
                             torch::ScalarType type,
                             bool gelu) {
  const bool forward = weight.use() == PackedFor::kForward;
  const int64_t n = forward ? weight.out_features() : weight.in_features();
  const torch::Tensor a = plain(a_in);
  const torch::Tensor c = torch::empty({a.size(0), n}, a.options().dtype(type));
  if (a.size(0) == 0) return c;
  RECORD_FUNCTION("bertft::onednn_matmul_packed", std::vector<c10::IValue>({a}));
  // Kept per thread as matmul_into's primitives are; the packed layout is this process's
  // choice for (k, n) and the use, so the shapes and the output pass make the key.
  thread_local std::map<std::vector<int64_t>, Primitive> made;
  std::vector<int64_t> key = {gelu,
                              forward,
                              weight.in_features(),
                              weight.out_features(),
                              bias.defined(),
                              static_cast<int64_t>(type)};
  add_to_key(key, a);
  const Primitive& primitive = kept(made, std::move(key), [&] {
    const auto bias_md = bias.defined() ? describe(bias) : dnnl::memory::desc();
    return make_primitive(
        dnnl::matmul::desc(describe(a), weight.impl().layout, bias_md, describe(c)),
        /*accumulate=*/false, {}, gelu);
  });
  const auto& engine = detail::onednn_cpu_engine();
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC, dnnl::memory(describe(a), engine, a.data_ptr())},
      {DNNL_ARG_WEIGHTS,
       dnnl::memory(weight.impl().layout, engine, weight.impl().storage.data_ptr())},
      {DNNL_ARG_DST, dnnl::memory(describe(c), engine, c.data_ptr())}};
  if (bias.defined())
    args.emplace(DNNL_ARG_BIAS, dnnl::memory(describe(bias), engine, bias.data_ptr()));
  execute(primitive, std::move(args));
  return c;
}

#else

torch::Tensor packed_product(const torch::Tensor&,
                             const OneDnnPackedBf16Weight&,
                             const torch::Tensor&,
                             torch::ScalarType,
                             bool) {
  throw std::runtime_error("onednn: this build has no oneDNN (install libdnnl-dev)");
}

#endif

/// The two packed copies a training forward reads (the input gradient's is kept for backward).
struct PackedPair {
  OneDnnPackedBf16Weight forward, input_grad;
};

/// A packed copy kept in an autograd context (saved_data holds IValues).
struct PackedHolder : torch::CustomClassHolder {
  explicit PackedHolder(OneDnnPackedBf16Weight w) : weight(std::move(w)) {}
  OneDnnPackedBf16Weight weight;
};

/// onednn_linear_bf16's OneDnnLinearFunction with the weight's products from packed copies.
struct OneDnnPackedLinearFunction : public torch::autograd::Function<OneDnnPackedLinearFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& x,
                               const torch::Tensor& weight,
                               const c10::optional<torch::Tensor>& bias,
                               const PackedPair& packed) {
    (void)weight;  // its gradient comes from x and the output's
    const torch::Tensor xc = x.to(torch::kBFloat16);
    const bool has_bias = bias.has_value() && bias->defined();
    const torch::Tensor bc = has_bias ? bias->to(torch::kBFloat16).view({1, -1}) : torch::Tensor();
    // The input gradient's copy is saved as a tensor too, so that a write reported through its
    // version makes backward refuse to run.
    ctx->save_for_backward({xc, packed.input_grad.storage()});
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["bias"] = has_bias;
    ctx->saved_data["input_grad"] =
        c10::IValue::make_capsule(c10::make_intrusive<PackedHolder>(packed.input_grad));
    return packed_product(xc, packed.forward, bc, torch::kBFloat16, /*gelu=*/false);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const auto x_dtype = static_cast<torch::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    const torch::Tensor dy = plain(grads[0]).to(torch::kBFloat16);
    torch::autograd::variable_list out(4);
    if (ctx->needs_input_grad(0)) {
      const auto holder = c10::static_intrusive_pointer_cast<PackedHolder>(
          ctx->saved_data["input_grad"].toCapsule());
      out[0] = packed_product(dy, holder->weight, {}, x_dtype, /*gelu=*/false);  // [M,N] [N,K]
    }
    weight_and_bias_gradients(ctx, dy, x, out);
    return out;
  }
};

}  // namespace

torch::Tensor onednn_linear_bf16_packed(const torch::Tensor& input,
                                        const OneDnnPackedBf16Weight& weight,
                                        const torch::Tensor& bias,
                                        bool gelu) {
  TORCH_CHECK(weight.defined() && weight.use() == PackedFor::kForward,
              "onednn_linear_bf16_packed: no weight packed for the forward");
  const int64_t out = weight.out_features(), in = weight.in_features();
  TORCH_CHECK(input.device().is_cpu() && input.dim() >= 1 && input.size(-1) == in &&
                  (input.scalar_type() == torch::kFloat || input.scalar_type() == torch::kBFloat16),
              "onednn_linear_bf16_packed: a float32 or bf16 CPU input [..., ", in, "], got ",
              input.sizes());
  TORCH_CHECK(!bias.defined() || (bias.device().is_cpu() && bias.scalar_type() == torch::kFloat &&
                                  bias.dim() == 1 && bias.size(0) == out),
              "onednn_linear_bf16_packed: bias must be float32 [", out, "]");
  TORCH_CHECK(!(torch::GradMode::is_enabled() &&
                (input.requires_grad() || (bias.defined() && bias.requires_grad()))),
              "onednn_linear_bf16_packed: inference only (the packed weight carries no gradient)");
  const torch::Tensor a = rows_of(bf16_twin::cast(input));  // the LayerNorm's twin, or a cast
  const torch::Tensor b = bias.defined() ? bias.to(torch::kBFloat16).view({1, out}) : bias;
  return packed_product(a, weight, b, torch::kBFloat16, gelu).view(output_sizes(input, out));
}

torch::Tensor onednn_linear_bf16_packed_training(const torch::Tensor& input,
                                                 const torch::Tensor& weight,
                                                 const torch::Tensor& bias,
                                                 const OneDnnPackedBf16Weight& forward,
                                                 const OneDnnPackedBf16Weight& input_grad) {
  check_operands(input, weight, bias, /*bf16_input=*/true);
  const int64_t out = weight.size(0), in = weight.size(1);
  for (const auto* p : {&forward, &input_grad})
    TORCH_CHECK(p->defined() && p->out_features() == out && p->in_features() == in,
                "onednn_linear_bf16_packed_training: packed copies of a weight [", out, ", ", in,
                "] needed");
  TORCH_CHECK(forward.use() == PackedFor::kForward && input_grad.use() == PackedFor::kInputGradient,
              "onednn_linear_bf16_packed_training: the forward's copy, then the input gradient's");
  if (!linear_needs_autograd(input, weight, bias))
    return onednn_linear_bf16_packed(input, forward, bias, /*gelu=*/false);
  return OneDnnPackedLinearFunction::apply(
             rows_of(input), weight,
             bias.defined() ? c10::optional<torch::Tensor>(bias) : c10::nullopt,
             PackedPair{forward, input_grad})
      .view(output_sizes(input, out));
}

}  // namespace bert
