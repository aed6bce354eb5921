#include "bert/model/dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/record_function.h>

#include <cmath>
#include <mutex>

#include "bert/common/parallel.h"
#include "bert/model/dropout_kernel.h"

namespace bert {

uint64_t draw_dropout_keys() {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return at::check_generator<at::CPUGeneratorImpl>(generator)->random64();
}

kernels::DropoutMask dropout_mask(double p, uint64_t keys) {
  kernels::DropoutMask mask;
  mask.key0 = static_cast<uint32_t>(keys);
  mask.key1 = static_cast<uint32_t>(keys >> 32);
  mask.threshold = static_cast<uint32_t>(std::min(std::llround(p * 4294967296.0), 4294967295LL));
  mask.scale = static_cast<float>(1.0 / (1.0 - p));
  return mask;
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

constexpr int64_t kGrain = 1 << 15;  // elements per parallel chunk

torch::Tensor apply_mask(const torch::Tensor& input, const kernels::DropoutMask& mask) {
  RECORD_FUNCTION("bert::dropout_mask", std::vector<c10::IValue>({input}));
  const torch::Tensor x = input.contiguous();
  torch::Tensor y = torch::empty_like(x, torch::MemoryFormat::Contiguous);
  const bool bf16 = x.scalar_type() == torch::kBFloat16;
  const auto* in = static_cast<const char*>(x.data_ptr());
  auto* out = static_cast<char*>(y.data_ptr());
  parallel_for(0, x.numel(), kGrain, [&](int64_t begin, int64_t end) {
    if (bf16)
      kernels::dropout_bf16(reinterpret_cast<const uint16_t*>(in) + begin,
                            reinterpret_cast<uint16_t*>(out) + begin, end - begin, begin, mask);
    else
      kernels::dropout_f32(reinterpret_cast<const float*>(in) + begin,
                           reinterpret_cast<float*>(out) + begin, end - begin, begin, mask);
  });
  return y;
}

struct HashDropout : torch::autograd::Function<HashDropout> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, double p) {
    const uint64_t keys = draw_dropout_keys();
    ctx->saved_data["keys"] = static_cast<int64_t>(keys);
    ctx->saved_data["p"] = p;
    return apply_mask(x, dropout_mask(p, keys));
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto mask = dropout_mask(ctx->saved_data["p"].toDouble(),
                                   static_cast<uint64_t>(ctx->saved_data["keys"].toInt()));
    return {apply_mask(grads[0], mask), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor hash_dropout(const torch::Tensor& x, double p, bool training) {
  TORCH_CHECK(p >= 0.0 && p <= 1.0, "dropout probability must be in [0, 1], got ", p);
  if (!training || p == 0.0) return x;
  if (p == 1.0) return x * 0;
  const bool hashed = x.device().is_cpu() &&
                      (x.scalar_type() == torch::kFloat || x.scalar_type() == torch::kBFloat16);
  if (!hashed) return torch::dropout(x, p, /*train=*/true);
  return HashDropout::apply(x, p);
}

DropoutImpl::DropoutImpl(double p) : p(p) {
  TORCH_CHECK(p >= 0.0 && p <= 1.0, "dropout probability must be in [0, 1], got ", p);
}

void DropoutImpl::pretty_print(std::ostream& stream) const {
  stream << "bert::Dropout(p=" << p << ")";
}

}  // namespace bert
