#include "bert/model/onednn_attention.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <unordered_map>
#include <vector>

#include "bert/common/parallel.h"
#include "bert/model/attention_kernel.h"
#include "bert/model/dropout.h"
#include "bert/model/onednn_detail.h"
#include "bert/model/onednn_linear.h"

namespace bert {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

void check_operands(const char* who,
                    const torch::Tensor& q,
                    const torch::Tensor& k,
                    const torch::Tensor& v) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && q.size(0) == k.size(0) &&
                  k.sizes() == v.sizes() && q.size(1) == k.size(1) && q.size(3) == k.size(3),
              who,
              ": q [batch, heads, seq, head_dim] and k, v [batch, heads, kv_seq, head_dim], got ",
              q.sizes(), ", ", k.sizes(), ", ", v.sizes());
  for (const auto* t : {&q, &k, &v})
    TORCH_CHECK(t->device().is_cpu() && t->scalar_type() == q.scalar_type() &&
                    (q.scalar_type() == torch::kFloat || q.scalar_type() == torch::kBFloat16),
                who, ": float32 or bf16 CPU tensors of one type only");
}

/// The additive mask [batch, 1, 1, kv_seq] as float32 rows [batch, kv_seq] (undefined without a
/// mask) and, per row, whether any position is masked: a row without one adds nothing, so its
/// heads skip the add.
struct RowMask {
  torch::Tensor rows;
  std::vector<char> masked;
};

RowMask row_mask(const char* who,
                 const torch::Tensor& additive_mask,
                 int64_t batch,
                 int64_t kv_seq) {
  RowMask m{torch::Tensor(), std::vector<char>(batch, 0)};
  if (!additive_mask.defined()) return m;
  TORCH_CHECK(additive_mask.numel() == batch * kv_seq && additive_mask.size(-1) == kv_seq, who,
              ": the mask must be [batch, 1, 1, kv_seq], got ", additive_mask.sizes());
  TORCH_CHECK(!(torch::GradMode::is_enabled() && additive_mask.requires_grad()), who,
              ": the mask takes no gradient");
  m.rows = additive_mask.detach().to(torch::kFloat).reshape({batch, kv_seq}).contiguous();
  const torch::Tensor any = m.rows.ne(0).any(/*dim=*/1);
  const auto rows = any.accessor<bool, 1>();
  for (int64_t b = 0; b < batch; ++b) m.masked[b] = rows[b] ? 1 : 0;
  return m;
}

#ifdef BERTFT_HAVE_DNNL

/// The per-head products: the scores q k^T (scaled; with the mask added), the context P v, and
/// backward's gradients of v (P^T dO), of the probabilities (dO v^T), of q (dS k, scaled) and of
/// k (dS^T q, scaled).
enum Product { kScores, kScoresMasked, kContext, kGradV, kGradProbs, kGradQ, kGradK, kProducts };

/// The oneDNN primitives of one attention shape, forward (the first three products, and oneDNN's
/// softmax where kernels::softmax_f32 is not the faster) and, when asked for, backward's products
/// (the softmax's gradient is kernels::softmax_grad_f32). q, k, v, the context and their gradients
/// are float32 or bf16 (the operands' type); the scores, probabilities and their gradients are
/// float32 (softmax in float32 also in bf16, as a cache-sized buffer costs nothing to keep wide)
/// and enter a bf16 product rounded to bf16, as autocast's product would take them.
struct AttentionPrimitives {
  std::array<dnnl::matmul::primitive_desc, kProducts> descs;
  std::array<dnnl::matmul, kProducts> products;
  dnnl::softmax_forward softmax;  ///< empty where kernels::softmax_f32 runs
  dnnl::memory::desc probs_md, mask_md;
  int64_t scratch_bytes = 0;
  bool reference = false;  ///< a product only oneDNN's reference loop takes
};

/// The primitives for these operands, made once per thread and shape (a primitive descriptor
/// costs tens of microseconds even when oneDNN's own cache has it). The context and every
/// gradient are [batch, seq, heads, head_dim] rows: a head's rows are heads * head_dim apart.
const AttentionPrimitives& attention_primitives(const torch::Tensor& q,
                                                const torch::Tensor& k,
                                                const torch::Tensor& v,
                                                double scale,
                                                bool with_backward) {
  const int64_t seq = q.size(2), dim = q.size(3), kv_seq = k.size(2), row = q.size(1) * dim;
  const bool bf16 = q.scalar_type() == torch::kBFloat16;
  float scale_f = static_cast<float>(scale);
  int32_t scale_bits = 0;
  std::memcpy(&scale_bits, &scale_f, sizeof scale_bits);
  const std::vector<int64_t> key = {
      seq,         dim,         kv_seq, q.stride(2), q.stride(3),   k.stride(2), k.stride(3),
      v.stride(2), v.stride(3), row,    scale_bits,  with_backward, bf16};
  thread_local std::map<std::vector<int64_t>, AttentionPrimitives> made;
  if (const auto it = made.find(key); it != made.end()) return it->second;
  if (made.size() >= 256) made.clear();  // dynamic padding makes many lengths; keep it bounded
  const auto f32 = dnnl::memory::data_type::f32;
  const auto dt = bf16 ? dnnl::memory::data_type::bf16 : f32;  // the operands' type
  using dims = dnnl::memory::dims;
  // One head's operands as oneDNN reads them in place (a transpose is a column-major view).
  const dnnl::memory::desc q_md{dims{seq, dim}, dt, dims{q.stride(2), q.stride(3)}};
  const dnnl::memory::desc k_md{dims{kv_seq, dim}, dt, dims{k.stride(2), k.stride(3)}};
  const dnnl::memory::desc kt_md{dims{dim, kv_seq}, dt, dims{k.stride(3), k.stride(2)}};
  const dnnl::memory::desc v_md{dims{kv_seq, dim}, dt, dims{v.stride(2), v.stride(3)}};
  const dnnl::memory::desc vt_md{dims{dim, kv_seq}, dt, dims{v.stride(3), v.stride(2)}};
  // The probabilities (or the scores' gradient) as a product's operand, in the operands' type.
  const dnnl::memory::desc probs_in_md{dims{seq, kv_seq}, dt, dims{kv_seq, 1}};
  const dnnl::memory::desc probs_t_md{dims{kv_seq, seq}, dt, dims{1, kv_seq}};
  const dnnl::memory::desc rows_md{dims{seq, dim}, dt, dims{row, 1}};
  const dnnl::memory::desc kv_rows_md{dims{kv_seq, dim}, dt, dims{row, 1}};
  AttentionPrimitives p;
  p.probs_md = {dims{seq, kv_seq}, f32, dims{kv_seq, 1}};
  p.mask_md = {dims{1, kv_seq}, f32, dims{kv_seq, 1}};
  const auto make = [&](const dnnl::memory::desc& a, const dnnl::memory::desc& b,
                        const dnnl::memory::desc& c, bool scaled, bool add) {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    // The scale multiplies the sum before the mask is added: scale (q k^T) + mask, which for a
    // power of two equals HF's (q k^T) / sqrt(head_dim) + mask bit for bit.
    if (scaled) attr.set_output_scales(0, {scale_f});
    if (add) {
      dnnl::post_ops ops;
      ops.append_binary(dnnl::algorithm::binary_add, p.mask_md);
      attr.set_post_ops(ops);
    }
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), attr,
                                        detail::onednn_cpu_engine());
  };
  p.descs[kScores] = make(q_md, kt_md, p.probs_md, true, false);
  p.descs[kScoresMasked] = make(q_md, kt_md, p.probs_md, true, true);
  p.descs[kContext] = make(probs_in_md, v_md, rows_md, false, false);
  if (with_backward) {
    p.descs[kGradV] = make(probs_t_md, rows_md, kv_rows_md, false, false);
    p.descs[kGradProbs] = make(rows_md, vt_md, p.probs_md, false, false);
    p.descs[kGradQ] = make(probs_in_md, k_md, rows_md, true, false);
    p.descs[kGradK] = make(probs_t_md, q_md, kv_rows_md, true, false);
  }
  const int count = with_backward ? kProducts : kGradV;
  for (int i = 0; i < count; ++i) {
    p.reference |= std::string(p.descs[i].impl_info_str()).rfind("ref", 0) == 0;
    p.products[i] = dnnl::matmul(p.descs[i]);
    p.scratch_bytes = std::max<int64_t>(p.scratch_bytes, p.descs[i].scratchpad_desc().get_size());
  }
  // oneDNN's softmax where bertft's own is not vectorised (no AVX-512), in place.
  if (!kernels::softmax_f32_vectorised())
    p.softmax = dnnl::softmax_forward(dnnl::softmax_forward::primitive_desc(
        dnnl::softmax_forward::desc(dnnl::prop_kind::forward_training, p.probs_md, 1),
        detail::onednn_cpu_engine()));
  return made.emplace(key, std::move(p)).first->second;
}

/// One thread's run of (batch, head) pairs: its primitives, stream, scratchpad and three float32
/// [seq, kv_seq] buffers (a fourth, bf16, for a bf16 product's operand), which stay in its core's
/// cache between one head's products (the batched path writes every head's scores to memory and
/// reads them back several times). Each primitive's arguments are made once and pointed at each
/// head's operands (a short head's products take microseconds: making oneDNN's memory objects per
/// call cost a tenth of that).
class HeadWorker {
 public:
  HeadWorker(const torch::Tensor& q,
             const torch::Tensor& k,
             const torch::Tensor& v,
             double scale,
             bool with_backward)
      : p_(attention_primitives(q, k, v, scale, with_backward)),
        engine_(detail::onednn_cpu_engine()),
        stream_(engine_),
        scratch_(torch::empty({std::max<int64_t>(p_.scratch_bytes, 1)},
                              q.options().dtype(torch::kByte))),
        buffers_(torch::empty({3, q.size(2), k.size(2)}, q.options().dtype(torch::kFloat))),
        low_(q.scalar_type() == torch::kBFloat16 ? torch::empty({q.size(2), k.size(2)}, q.options())
                                                 : torch::Tensor()) {
    const int count = with_backward ? kProducts : kGradV;
    for (int i = 0; i < count; ++i) {
      const auto& d = p_.descs[i];
      auto& args = product_args_[i];
      for (const auto& [arg, md] :
           {std::pair{DNNL_ARG_SRC, d.src_desc()}, std::pair{DNNL_ARG_WEIGHTS, d.weights_desc()},
            std::pair{DNNL_ARG_DST, d.dst_desc()}})
        args.emplace(arg, dnnl::memory(md, engine_, DNNL_MEMORY_NONE));
      if (p_.scratch_bytes > 0)
        args.emplace(DNNL_ARG_SCRATCHPAD,
                     dnnl::memory(d.scratchpad_desc(), engine_, scratch_.data_ptr()));
      if (i == kScoresMasked)
        args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                     dnnl::memory(p_.mask_md, engine_, DNNL_MEMORY_NONE));
    }
    const dnnl::memory probs(p_.probs_md, engine_, DNNL_MEMORY_NONE);
    softmax_args_ = {{DNNL_ARG_SRC, probs}, {DNNL_ARG_DST, probs}};  // in place
  }
  ~HeadWorker() { stream_.wait(); }

  /// Buffer 0, 1 or 2: [seq, kv_seq] float32.
  float* buffer(int i) { return buffers_[i].data_ptr<float>(); }
  /// Where a float32 buffer enters a product: itself in float32; for bf16 operands, the bf16
  /// buffer, into which `drop` (a dropout, or none) writes it rounded.
  const void* operand(
      float* from, int64_t n, int64_t offset, const kernels::DropoutMask* drop, float* dropped) {
    if (!low_.defined()) {
      if (drop == nullptr) return from;
      kernels::dropout_f32(from, dropped, n, offset, *drop);
      return dropped;
    }
    auto* low = static_cast<uint16_t*>(low_.data_ptr());
    if (drop == nullptr)
      kernels::f32_to_bf16(from, low, n);
    else
      kernels::dropout_f32_to_bf16(from, low, n, offset, *drop);
    return low;
  }

  void product(Product which, const void* a, const void* b, void* c, const float* mask = nullptr) {
    auto& args = product_args_[which];
    point(args, DNNL_ARG_SRC, a);
    point(args, DNNL_ARG_WEIGHTS, b);
    point(args, DNNL_ARG_DST, c);
    if (which == kScoresMasked)
      point(args, DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, mask);
    p_.products[which].execute(stream_, args);
  }

  /// probs = softmax(scale q k^T (+ mask)) for one head, in `probs`.
  void probabilities(const void* q, const void* k, const float* mask, float* probs) {
    product(mask != nullptr ? kScoresMasked : kScores, q, k, probs, mask);
    if (!p_.softmax) {
      kernels::softmax_f32(probs, rows_, cols_);
      return;
    }
    point(softmax_args_, DNNL_ARG_SRC, probs);  // SRC and DST: one memory object
    p_.softmax.execute(stream_, softmax_args_);
  }

 private:
  using Args = std::unordered_map<int, dnnl::memory>;
  static void point(Args& args, int arg, const void* data) {
    args.at(arg).set_data_handle(const_cast<void*>(data));
  }

  const AttentionPrimitives& p_;
  const dnnl::engine& engine_;
  dnnl::stream stream_;
  torch::Tensor scratch_, buffers_, low_;
  std::array<Args, kProducts> product_args_;
  Args softmax_args_;
  const int64_t rows_ = buffers_.size(1), cols_ = buffers_.size(2);  ///< a head's [seq, kv_seq]
};

/// Where one (batch, head) pair's operands start.
struct HeadOperands {
  const torch::Tensor &q, &k, &v;
  const RowMask& mask;
  int64_t heads, row;  ///< heads; the stride between rows of the [batch, seq, heads, dim] results

  const void* q_at(int64_t b, int64_t h) const { return at(q, b, h); }
  const void* k_at(int64_t b, int64_t h) const { return at(k, b, h); }
  const void* v_at(int64_t b, int64_t h) const { return at(v, b, h); }
  const float* mask_at(int64_t b) const {
    return mask.masked[b] != 0 ? mask.rows.data_ptr<float>() + b * mask.rows.size(1) : nullptr;
  }
  /// Head h of batch row b in a [batch, len, heads, dim] result (of the operands' type).
  void* rows_at(const torch::Tensor& t, int64_t b, int64_t h) const {
    return static_cast<char*>(t.data_ptr()) +
           (b * t.size(1) * row + h * q.size(3)) * static_cast<int64_t>(t.element_size());
  }

 private:
  static const void* at(const torch::Tensor& t, int64_t b, int64_t h) {
    return static_cast<const char*>(t.data_ptr()) +
           (b * t.stride(0) + h * t.stride(1)) * static_cast<int64_t>(t.element_size());
  }
};

/// Whether every product of this shape has a JIT kernel (else the batched ops are faster).
bool by_head_fits(const torch::Tensor& q,
                  const torch::Tensor& k,
                  const torch::Tensor& v,
                  double scale,
                  bool with_backward) {
  return !attention_primitives(q, k, v, scale, with_backward).reference;
}

/// Whether inference's bf16 heads take kernels::attention_head_bf16
/// (bert/model/attention_kernel.h): where the CPU has AVX-512 BF16, for head_dim 64 and at most 128
/// keys, rows of contiguous values; BERTFT_BF16_ATTENTION_KERNEL=off keeps oneDNN's products.
bool bf16_head_kernel_fits(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  static const bool wanted = !detail::env_is("BERTFT_BF16_ATTENTION_KERNEL", "off");
  return wanted && q.scalar_type() == torch::kBFloat16 &&
         kernels::attention_head_bf16_available() && q.size(3) == kernels::kAttentionHeadDim &&
         k.size(2) >= 1 && k.size(2) <= kernels::kAttentionHeadMaxKeys && q.stride(3) == 1 &&
         k.stride(3) == 1 && v.stride(3) == 1;
}

/// Inference's bf16 heads through kernels::attention_head_bf16, into `out` [batch, seq, heads,
/// dim]: the same arithmetic as forward_by_head's without dropout.
void forward_by_head_bf16_kernel(const HeadOperands& o, double scale, const torch::Tensor& out) {
  const int64_t seq = o.q.size(2), kv_seq = o.k.size(2);
  const int64_t bytes = kernels::attention_head_bf16_scratch_bytes(seq, kv_seq);
  RECORD_FUNCTION("bertft::attention_head_bf16", std::vector<c10::IValue>());
  parallel_for(0, o.q.size(0) * o.heads, 1, [&](int64_t begin, int64_t end) {
    const torch::Tensor scratch = torch::empty({bytes}, o.q.options().dtype(torch::kByte));
    for (int64_t i = begin; i < end; ++i) {
      const int64_t b = i / o.heads, h = i % o.heads;
      kernels::attention_head_bf16(static_cast<const uint16_t*>(o.q_at(b, h)), o.q.stride(2),
                                   static_cast<const uint16_t*>(o.k_at(b, h)), o.k.stride(2),
                                   static_cast<const uint16_t*>(o.v_at(b, h)), o.v.stride(2),
                                   static_cast<uint16_t*>(o.rows_at(out, b, h)), o.row, seq, kv_seq,
                                   static_cast<float>(scale), o.mask_at(b), scratch.data_ptr());
    }
  });
}

/// The context of every head into `out` [batch, seq, heads, dim]: softmax, then dropout where
/// dropout_p > 0 (mask_keys), then the product with v.
void forward_by_head(const HeadOperands& o,
                     double scale,
                     double dropout_p,
                     uint64_t mask_keys,
                     bool with_backward,
                     const torch::Tensor& out) {
  const int64_t seq = o.q.size(2), kv_seq = o.k.size(2), n = seq * kv_seq;
  const kernels::DropoutMask drop = dropout_mask(dropout_p > 0 ? dropout_p : 0.0, mask_keys);
  parallel_for(0, o.q.size(0) * o.heads, 1, [&](int64_t begin, int64_t end) {
    // Inside the parallel region oneDNN runs each call on this thread alone.
    HeadWorker w(o.q, o.k, o.v, scale, with_backward);
    float *probs = w.buffer(0), *dropped = w.buffer(1);
    for (int64_t i = begin; i < end; ++i) {
      const int64_t b = i / o.heads, h = i % o.heads;
      w.probabilities(o.q_at(b, h), o.k_at(b, h), o.mask_at(b), probs);
      // Element (i, r, c) of [batch * heads, seq, kv_seq]: hash_dropout's index for it.
      const void* p = w.operand(probs, n, i * n, dropout_p > 0 ? &drop : nullptr, dropped);
      w.product(kContext, p, o.v_at(b, h), o.rows_at(out, b, h));
    }
  });
}

/// The gradients of q, k and v ([batch, len, heads, dim]) for grad_out [batch, seq, heads, dim],
/// each head's probabilities recomputed.
void backward_by_head(const HeadOperands& o,
                      double scale,
                      double dropout_p,
                      uint64_t mask_keys,
                      const torch::Tensor& grad_out,
                      const torch::Tensor& grad_q,
                      const torch::Tensor& grad_k,
                      const torch::Tensor& grad_v) {
  const int64_t seq = o.q.size(2), kv_seq = o.k.size(2), n = seq * kv_seq;
  const kernels::DropoutMask drop = dropout_mask(dropout_p > 0 ? dropout_p : 0.0, mask_keys);
  const bool dropped_out = dropout_p > 0;
  parallel_for(0, o.q.size(0) * o.heads, 1, [&](int64_t begin, int64_t end) {
    HeadWorker w(o.q, o.k, o.v, scale, /*with_backward=*/true);
    float *probs = w.buffer(0), *a = w.buffer(1), *b_buf = w.buffer(2);
    for (int64_t i = begin; i < end; ++i) {
      const int64_t b = i / o.heads, h = i % o.heads;
      const void* dout = o.rows_at(grad_out, b, h);
      w.probabilities(o.q_at(b, h), o.k_at(b, h), o.mask_at(b), probs);
      const void* p = w.operand(probs, n, i * n, dropped_out ? &drop : nullptr, a);
      w.product(kGradV, p, dout, o.rows_at(grad_v, b, h));
      w.product(kGradProbs, dout, o.v_at(b, h), a);  // the gradient of the dropped probabilities
      // Through the dropout and the softmax in one pass (the dropout's mask as forward's).
      kernels::softmax_grad_f32(probs, a, b_buf, seq, kv_seq, i * n, dropped_out ? &drop : nullptr);
      const void* ds = w.operand(b_buf, n, 0, nullptr, nullptr);
      w.product(kGradQ, ds, o.k_at(b, h), o.rows_at(grad_q, b, h));
      w.product(kGradK, ds, o.q_at(b, h), o.rows_at(grad_k, b, h));
    }
  });
}

/// Training's attention as one autograd node: forward_by_head, and backward_by_head from q, k, v
/// and the mask (nothing of the probabilities' size is kept).
struct AttentionByHead : torch::autograd::Function<AttentionByHead> {
  static torch::Tensor forward(AutogradContext* ctx,
                               const torch::Tensor& q,
                               const torch::Tensor& k,
                               const torch::Tensor& v,
                               const torch::Tensor& mask_rows,
                               double scale,
                               double dropout_p) {
    RECORD_FUNCTION("bertft::onednn_attention_training", std::vector<c10::IValue>({q, k, v}));
    const int64_t batch = q.size(0), heads = q.size(1), seq = q.size(2), dim = q.size(3);
    // One draw, where hash_dropout would make it (none for p = 0).
    const uint64_t keys = dropout_p > 0 ? draw_dropout_keys() : 0;
    const torch::Tensor out = torch::empty({batch, seq, heads, dim}, q.options());
    const RowMask mask = rows_and_flags(mask_rows, batch);
    forward_by_head({q, k, v, mask, heads, heads * dim}, scale, dropout_p, keys,
                    /*with_backward=*/true, out);
    ctx->save_for_backward({q, k, v, mask_rows});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["p"] = dropout_p;
    ctx->saved_data["keys"] = static_cast<int64_t>(keys);
    return out.view({batch, seq, heads * dim});
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    RECORD_FUNCTION("bertft::onednn_attention_backward", std::vector<c10::IValue>());
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2];
    const int64_t batch = q.size(0), heads = q.size(1), seq = q.size(2), dim = q.size(3);
    const int64_t kv_seq = k.size(2);
    const torch::Tensor grad_out = grads[0].contiguous().view({batch, seq, heads, dim});
    const torch::Tensor grad_q = torch::empty({batch, seq, heads, dim}, q.options());
    const torch::Tensor grad_k = torch::empty({batch, kv_seq, heads, dim}, q.options());
    const torch::Tensor grad_v = torch::empty({batch, kv_seq, heads, dim}, q.options());
    const RowMask mask = rows_and_flags(saved[3], batch);
    backward_by_head({q, k, v, mask, heads, heads * dim}, ctx->saved_data["scale"].toDouble(),
                     ctx->saved_data["p"].toDouble(),
                     static_cast<uint64_t>(ctx->saved_data["keys"].toInt()), grad_out, grad_q,
                     grad_k, grad_v);
    // [batch, heads, len, dim] views, laid out as the projections' outputs: no copy on the way.
    return {grad_q.transpose(1, 2), grad_k.transpose(1, 2), grad_v.transpose(1, 2),
            torch::Tensor(),        torch::Tensor(),        torch::Tensor()};
  }

  /// The mask rows ([batch, kv_seq], or empty for none) with their per-row flags.
  static RowMask rows_and_flags(const torch::Tensor& rows, int64_t batch) {
    if (rows.numel() == 0) return RowMask{torch::Tensor(), std::vector<char>(batch, 0)};
    return row_mask("onednn_attention_training", rows.view({rows.size(0), 1, 1, rows.size(1)}),
                    rows.size(0), rows.size(1));
  }
};

#endif

}  // namespace

bool use_onednn_attention(const torch::Tensor& q, const torch::Tensor& k_t) {
  static const bool by_head = !detail::env_is("BERTFT_ATTENTION", "batched");
  return by_head && (q.scalar_type() == torch::kFloat || q.scalar_type() == torch::kBFloat16) &&
         use_onednn_matmul(q, k_t);
}

torch::Tensor onednn_attention(const torch::Tensor& q,
                               const torch::Tensor& k,
                               const torch::Tensor& v,
                               const torch::Tensor& additive_mask,
                               double scale) {
  check_operands("onednn_attention", q, k, v);
  TORCH_CHECK(!torch::GradMode::is_enabled() ||
                  !(q.requires_grad() || k.requires_grad() || v.requires_grad()),
              "onednn_attention: inference only (no autograd)");
  RECORD_FUNCTION("bertft::onednn_attention", std::vector<c10::IValue>({q, k, v}));
  const int64_t batch = q.size(0), kv_seq = k.size(2);
  const RowMask mask = row_mask("onednn_attention", additive_mask, batch, kv_seq);
  if (q.numel() == 0 || kv_seq == 0)
    return onednn_attention_batched(q, k, v, additive_mask, scale, 0.0);
#ifdef BERTFT_HAVE_DNNL
  if (bf16_head_kernel_fits(q, k, v) || by_head_fits(q, k, v, scale, /*with_backward=*/false)) {
    const int64_t heads = q.size(1), seq = q.size(2), dim = q.size(3);
    // [batch, seq, heads, head_dim]: each head's context lands in [batch, seq, hidden] order.
    const torch::Tensor out = torch::empty({batch, seq, heads, dim}, q.options());
    const HeadOperands o{q, k, v, mask, heads, heads * dim};
    if (bf16_head_kernel_fits(q, k, v))
      forward_by_head_bf16_kernel(o, scale, out);
    else
      forward_by_head(o, scale, 0.0, 0, /*with_backward=*/false, out);
    return out.view({batch, seq, heads * dim});
  }
#endif
  return onednn_attention_batched(q, k, v, additive_mask, scale, 0.0);
}

torch::Tensor onednn_attention_batched(const torch::Tensor& q,
                                       const torch::Tensor& k,
                                       const torch::Tensor& v,
                                       const torch::Tensor& additive_mask,
                                       double scale,
                                       double dropout_p,
                                       torch::Tensor* probs_out) {
  const int64_t batch = q.size(0), heads = q.size(1), seq = q.size(2), dim = q.size(3);
  const int64_t kv_seq = k.size(2), hidden = heads * dim;
  if (q.numel() == 0 || kv_seq == 0) {  // nothing to attend to: softmax over nothing, as HF's
    const auto probs = torch::softmax(torch::matmul(q, k.transpose(-1, -2)), -1);
    if (probs_out != nullptr) *probs_out = probs;
    return torch::matmul(probs, v).transpose(1, 2).reshape({batch, seq, hidden});
  }
  // oneDNN reads the head views in place: no head is copied out. Scaling q by a power of two is
  // exact, so (q scale) k^T + mask equals HF's (q k^T) / root + mask up to the GEMM's summation
  // order, with the mask added in the GEMM's output pass; otherwise HF's order.
  const bool masked = additive_mask.defined();
  // In bf16 (autocast) the scores are bf16, where fp32's lowest would round to -inf: the mask
  // is clamped to bf16's lowest.
  const torch::Tensor mask = !masked ? torch::Tensor()
                             : q.scalar_type() == torch::kBFloat16
                                 ? additive_mask.to(torch::kFloat).clamp_min(kBf16Lowest)
                                 : additive_mask.to(torch::kFloat);
  int exponent = 0;
  torch::Tensor scores;  // [batch, heads, seq, kv_seq]
  if (std::frexp(scale, &exponent) == 0.5) {
    scores = onednn_matmul(q * scale, k.transpose(-1, -2), mask);
  } else {
    scores = onednn_matmul(q, k.transpose(-1, -2)) / (1.0 / scale);
    if (masked) scores = scores + mask.to(scores.scalar_type());  // in the scores' type
  }
  torch::Tensor probs = torch::softmax(scores, /*dim=*/-1);
  if (probs_out != nullptr) *probs_out = probs;
  probs = hash_dropout(probs, dropout_p, /*training=*/true);
  // The context is written straight into [batch, seq, heads, head_dim] order, so the
  // [batch, seq, hidden] result is a view, not a copy. (Under autocast softmax may give float32
  // probabilities; the product takes them in v's type, as autocast's bmm would.)
  return onednn_matmul(probs.to(v.scalar_type()), v, {}, {seq * hidden, dim, hidden, 1})
      .transpose(1, 2)
      .reshape({batch, seq, hidden});
}

torch::Tensor onednn_attention_training(const torch::Tensor& q,
                                        const torch::Tensor& k,
                                        const torch::Tensor& v,
                                        const torch::Tensor& additive_mask,
                                        double scale,
                                        double dropout_p) {
  check_operands("onednn_attention_training", q, k, v);
  TORCH_CHECK(dropout_p >= 0.0 && dropout_p <= 1.0,
              "onednn_attention_training: dropout probability must be in [0, 1], got ", dropout_p);
  const int64_t batch = q.size(0), kv_seq = k.size(2);
  const RowMask mask = row_mask("onednn_attention_training", additive_mask, batch, kv_seq);
#ifdef BERTFT_HAVE_DNNL
  if (q.numel() > 0 && kv_seq > 0 && dropout_p < 1.0 &&
      by_head_fits(q, k, v, scale, /*with_backward=*/true))
    // (A custom function's inputs must be defined: no mask travels as an empty tensor.)
    return AttentionByHead::apply(q, k, v,
                                  mask.rows.defined() ? mask.rows : torch::empty({0}, q.options()),
                                  scale, dropout_p);
#endif
  return onednn_attention_batched(q, k, v, additive_mask, scale, dropout_p);
}

}  // namespace bert
