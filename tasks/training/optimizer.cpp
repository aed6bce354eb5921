#include "tasks/training/optimizer.h"

#include <ATen/record_function.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <type_traits>

#include "bert/common/error.h"
#include "bert/common/parallel.h"
#include "bert/common/strings.h"
#include "bert/model/dropout_kernel.h"
#include "bert/model/linear.h"
#include "tasks/training/adamw_kernel.h"

namespace bert::tasks {
namespace {

/// The optimizer state's entry of `p`. LibTorch keys it by the parameter's TensorImpl: as its
/// address printed to a string up to 1.x, as the pointer itself in 2.x (a CUDA build of a newer
/// LibTorch compiles the same source).
template <class State>
typename State::mapped_type& state_slot(State& state, const torch::Tensor& p) {
  if constexpr (std::is_convertible_v<c10::TensorImpl*, typename State::key_type>) {
    return state[p.unsafeGetTensorImpl()];
  } else {
    std::ostringstream key;  // what c10::guts::to_string printed
    key << p.unsafeGetTensorImpl();
    return state[key.str()];
  }
}

/// torch::optim::AdamW with the update of each float32 CPU parameter done in one pass over
/// (param, grad, exp_avg, exp_avg_sq) instead of torch's five tensor ops: the same arithmetic
/// in the same order per element (so the same results), a fraction of the memory traffic.
/// State, options and serialization are AdamW's own, so checkpoints are interchangeable.
///
/// `hf_epsilon`: transformers' AdamW (Trainer's `adamw_hf`), which adds eps to sqrt(v) before
/// the bias correction: eps / sqrt(1 - beta2^t) in torch's formula (and decays after the update,
/// a difference of lr * wd * update, far below float32 rounding at BERT's settings).
class FusedAdamW final : public torch::optim::AdamW {
 public:
  FusedAdamW(std::vector<torch::optim::OptimizerParamGroup> groups,
             torch::optim::AdamWOptions defaults,
             bool hf_epsilon = false)
      : torch::optim::AdamW(std::move(groups), std::move(defaults)), hf_epsilon_(hf_epsilon) {}

  /// The next step() multiplies every gradient by `scale` first (clip_gradients' coefficient).
  void scale_next_gradients(float scale) { grad_scale_ = scale; }

  torch::Tensor step(LossClosure closure = nullptr) override {
    TORCH_CHECK(!closure, "FusedAdamW: closures are not supported");
    RECORD_FUNCTION("bertft::fused_adamw", std::vector<c10::IValue>());  // for profilers
    torch::NoGradGuard no_grad;
    const float grad_scale = grad_scale_;
    grad_scale_ = 1.0f;
    for (auto& group : param_groups_) {
      const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
      TORCH_CHECK(!o.amsgrad(), "FusedAdamW: amsgrad is not supported");
      const double lr = o.lr(), wd = o.weight_decay(), eps = o.eps();
      const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
      for (auto& p : group.params()) {
        if (!p.grad().defined()) continue;
        auto& slot = state_slot(state_, p);
        if (!slot) {
          auto fresh = std::make_unique<torch::optim::AdamWParamState>();
          fresh->step(0);
          fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
          fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
          slot = std::move(fresh);
        }
        auto& state = static_cast<torch::optim::AdamWParamState&>(*slot);
        state.step(state.step() + 1);
        const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(state.step()));
        const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(state.step()));
        const double eps_t = hf_epsilon_ ? eps / std::sqrt(bias_correction2) : eps;
        const auto& grad = p.grad();
        auto& m = state.exp_avg();
        auto& v = state.exp_avg_sq();
        const bool fusable = p.device().is_cpu() && p.scalar_type() == torch::kFloat &&
                             grad.scalar_type() == torch::kFloat && p.is_contiguous() &&
                             grad.is_contiguous() && m.is_contiguous() && v.is_contiguous() &&
                             !grad.is_sparse();
        if (!fusable) {  // torch's own sequence of ops
          if (grad_scale != 1.0f) grad.mul_(grad_scale);
          p.mul_(1 - lr * wd);
          m.mul_(beta1).add_(grad, 1 - beta1);
          v.mul_(beta2).addcmul_(grad, grad, 1 - beta2);
          const auto denom = (v.sqrt() / std::sqrt(bias_correction2)).add_(eps_t);
          p.addcdiv_(m, denom, -lr / bias_correction1);
          continue;
        }
        // Scalars as torch's CPU kernels use them for float tensors.
        const float decay = static_cast<float>(1 - lr * wd);
        const float b1 = static_cast<float>(beta1), one_minus_b1 = static_cast<float>(1 - beta1);
        const float b2 = static_cast<float>(beta2), one_minus_b2 = static_cast<float>(1 - beta2);
        const float bc2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
        const float epsilon = static_cast<float>(eps_t);
        const float neg_step = static_cast<float>(-lr / bias_correction1);
        float* pp = p.data_ptr<float>();
        const float* gp = grad.data_ptr<float>();
        float* mp = m.data_ptr<float>();
        float* vp = v.data_ptr<float>();
        const int64_t n = p.numel();
        // The weight's bf16 copy for bf16 training (bert::bf16_shadow), where it keeps one:
        // rounded from each piece of the new weights while they are in cache.
        // A packed copy is written through each layout's offsets (both layouts).
        const bert::bf16_shadow::Copies shadow = bert::bf16_shadow::writable(p);
        const torch::Tensor& plain = shadow.plain;
        uint16_t* sp = plain.defined() && plain.scalar_type() == torch::kBFloat16 &&
                               plain.is_contiguous() && plain.numel() == n
                           ? reinterpret_cast<uint16_t*>(plain.data_ptr<at::BFloat16>())
                           : nullptr;
        const bool packed = shadow.packed() && p.dim() == 2 &&
                            shadow.forward.out_features() == p.size(0) &&
                            shadow.forward.in_features() == p.size(1);
        bert::kernels::ScatteredLayout layouts[2];
        if (packed) {
          layouts[0] = shadow.forward.writer();
          layouts[1] = shadow.input_grad.writer();
        }
        const bool copies = sp != nullptr || packed;
        // Across threads in chunks that start at multiples of kBlock elements: the compiler's
        // vector loop and its scalar tail round differently (a multiply-add may be fused in one
        // and not the other), and so each element takes the path it takes in a single call,
        // and the weights are the same bits on any number of threads (and with a bf16 copy,
        // whose pieces are multiples of kBlock too). Packed copies are written 16 whole rows
        // at a time (a piece of 16 rows, where that is a multiple of kBlock).
        constexpr int64_t kBlock = 64;
        const int64_t rows16 = packed ? 16 * p.size(1) : 0;
        const int64_t block = rows16 > 0 && rows16 % kBlock == 0 ? rows16 : kBlock;
        const int64_t kPiece = std::max(64 * kBlock, block);
        bert::parallel_for(
            0, (n + block - 1) / block, std::max<int64_t>(1, 16384 / block),
            [&](int64_t first, int64_t last) {
              const int64_t begin = first * block, end = std::min(n, last * block);
              const int64_t piece = copies ? kPiece : end - begin;  // else one call
              for (int64_t at = begin; at < end; at += piece) {
                const int64_t count = std::min(piece, end - at);
                // With copies, the update in runs of 64 blocks at most (a piece of 16 long rows
                // holds more of the four arrays than the cache does), then the piece's copies.
                const int64_t run_length = copies ? 64 * kBlock : count;
                for (int64_t run = at; run < at + count; run += run_length)
                  adamw_update(pp + run, gp + run, mp + run, vp + run,
                               std::min(run_length, at + count - run), decay, b1, one_minus_b1, b2,
                               one_minus_b2, bc2_sqrt, epsilon, neg_step, grad_scale);
                if (sp != nullptr) bert::kernels::f32_to_bf16(pp + at, sp + at, count);
                if (packed) bert::kernels::f32_to_bf16_scattered(pp + at, at, count, layouts, 2);
              }
            });
        // Written through its pointer, as no in-place op would be: say so to whoever keeps
        // something made from the weight (bert::Linear's bf16 cast for inference).
        torch::autograd::impl::bump_version(p);
        if (copies) bert::bf16_shadow::written(p);
      }
    }
    return {};
  }

 private:
  bool hf_epsilon_;
  float grad_scale_ = 1.0f;
};

}  // namespace

bool is_no_decay_parameter(const std::string& name) {
  return ends_with(name, "bias") || name.find("LayerNorm.") != std::string::npos;
}

namespace {

/// HF's two groups: weight decay for the rest, none for is_no_decay_parameter().
std::vector<torch::optim::OptimizerParamGroup> decay_groups(const torch::nn::Module& model,
                                                            const AdamWSettings& s) {
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& p : model.named_parameters()) {
    if (!p.value().requires_grad()) continue;
    (is_no_decay_parameter(p.key()) ? no_decay : decay).push_back(p.value());
  }
  const auto options = [&](double weight_decay) {
    return std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(s.learning_rate)
                                                            .betas({s.beta1, s.beta2})
                                                            .eps(s.eps)
                                                            .weight_decay(weight_decay));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, options(s.weight_decay));
  groups.emplace_back(no_decay, options(0.0));
  return groups;
}

torch::optim::AdamWOptions defaults(const AdamWSettings& s) {
  return torch::optim::AdamWOptions(s.learning_rate).betas({s.beta1, s.beta2}).eps(s.eps);
}

}  // namespace

std::unique_ptr<torch::optim::AdamW> make_adamw(const torch::nn::Module& model,
                                                const AdamWSettings& s) {
  return std::make_unique<FusedAdamW>(decay_groups(model, s), defaults(s));
}

const std::vector<OptimizerFactory>& optimizer_factories() {
  static const std::vector<OptimizerFactory> factories = {
      {"adamw", "AdamW with decoupled weight decay, fused update (torch.optim.AdamW's arithmetic)",
       [](const torch::nn::Module& model, const AdamWSettings& s) {
         return std::unique_ptr<torch::optim::Optimizer>(make_adamw(model, s));
       }},
      {"adamw_hf",
       "transformers' AdamW (Trainer's adamw_hf, v4.31's default): eps before the bias "
       "correction; fused",
       [](const torch::nn::Module& model, const AdamWSettings& s) {
         return std::unique_ptr<torch::optim::Optimizer>(
             std::make_unique<FusedAdamW>(decay_groups(model, s), defaults(s), true));
       }},
      {"adamw_torch", "LibTorch's own AdamW (unfused; a reference for the fused one)",
       [](const torch::nn::Module& model, const AdamWSettings& s) {
         return std::unique_ptr<torch::optim::Optimizer>(
             std::make_unique<torch::optim::AdamW>(decay_groups(model, s), defaults(s)));
       }},
  };
  return factories;
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::string& name,
                                                        const torch::nn::Module& model,
                                                        const AdamWSettings& settings) {
  std::string names;
  for (const auto& f : optimizer_factories()) {
    if (f.name == name) return f.create(model, settings);
    names += (names.empty() ? "" : ", ") + f.name;
  }
  throw ConfigError(fmt::format("unknown optimizer '{}'; expected one of: {}", name, names));
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double learning_rate) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(learning_rate);
}

namespace {

/// The total 2-norm of the gradients of `parameters` where each one defined is a dense,
/// contiguous float32 CPU tensor: sum_of_squares over pieces of a fixed length, the pieces spread
/// over the threads and added in order in double, so that any number of threads gives the same
/// value, within a float32 rounding or two of the exact norm (LibTorch's float norms drift with
/// the order of their sums, and split where the thread count says). One pass over every
/// gradient at memory speed, where LibTorch's per-tensor norms took twice as long (bench section
/// clip_norm). None where some gradient does not qualify (LibTorch's norms then).
std::optional<double> gradient_norm(const std::vector<torch::Tensor>& parameters) {
  RECORD_FUNCTION("bertft::gradient_norm", std::vector<c10::IValue>());  // for profilers
  constexpr int64_t kPiece = 16384;
  std::vector<std::pair<const float*, int64_t>> pieces;
  for (const auto& p : parameters) {
    const auto& g = p.grad();
    if (!g.defined()) continue;
    if (g.layout() != torch::kStrided || !g.device().is_cpu() || g.scalar_type() != torch::kFloat ||
        !g.is_contiguous())
      return std::nullopt;
    const float* data = g.data_ptr<float>();
    for (int64_t at = 0; at < g.numel(); at += kPiece)
      pieces.emplace_back(data + at, std::min(kPiece, g.numel() - at));
  }
  std::vector<double> sums(pieces.size());
  bert::parallel_for(0, static_cast<int64_t>(pieces.size()), 8, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      sums[i] = sum_of_squares(pieces[i].first, pieces[i].second);
  });
  double total = 0;
  for (const double s : sums) total += s;
  return std::sqrt(total);
}

}  // namespace

double clip_gradients(torch::optim::Optimizer& optimizer,
                      const std::vector<torch::Tensor>& parameters,
                      double max_norm) {
  torch::NoGradGuard no_grad;
  if (std::none_of(parameters.begin(), parameters.end(),
                   [](const torch::Tensor& p) { return p.grad().defined(); }))
    return 0.0;
  torch::Tensor total;  // float32, as clip_grad_norm_'s
  if (const auto norm = gradient_norm(parameters)) {
    total = torch::tensor(static_cast<float>(*norm));
  } else {
    std::vector<torch::Tensor> norms;  // clip_grad_norm_'s own arithmetic
    for (const auto& p : parameters)
      if (p.grad().defined()) norms.push_back(p.grad().norm(2));
    total = norms.size() == 1 ? norms[0] : torch::stack(norms).norm(2);
  }
  const torch::Tensor coefficient =
      torch::clamp(max_norm / (total + 1e-6), c10::nullopt, 1.0);  // float32, as the gradients
  if (auto* fused = dynamic_cast<FusedAdamW*>(&optimizer);
      fused != nullptr && coefficient.device().is_cpu() &&
      coefficient.scalar_type() == torch::kFloat) {
    fused->scale_next_gradients(coefficient.item<float>());
  } else {
    for (const auto& p : parameters)
      if (p.grad().defined()) p.grad().mul_(coefficient);
  }
  return total.item<double>();
}

void release_gradients(const std::vector<torch::Tensor>& parameters) {
  for (const auto& p : parameters) p.mutable_grad() = torch::Tensor();
}

}  // namespace bert::tasks
