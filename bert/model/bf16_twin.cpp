#include "bert/model/bf16_twin.h"

#include "bert/common/autocast.h"
#include "bert/model/onednn_detail.h"

namespace bert::bf16_twin {
namespace {

/// A ScopedBf16Twins' choice.
detail::Override twins;

using WeakImpl = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;

WeakImpl nobody() {
  return WeakImpl(c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>());
}

struct Twin {
  /// The remembered tensor's TensorImpl and its twin's, held weakly: the twin lives in the
  /// tensor's memory (remember()), and neither address is reused while the entry is kept.
  WeakImpl owner = nobody(), twin = nobody();
  const void* data = nullptr;  ///< the tensor's data
  int64_t version = -1;        ///< its version when remembered (see version())
  int64_t answered = 0;        ///< casts a twin answered on this thread
};

Twin& kept() {
  thread_local Twin t;
  return t;
}

bool on() {
  static const bool env_on = !detail::env_is("BERTFT_BF16_TWIN", "off");
  return twins.on_or(env_on);
}

/// x's version counter; -1 for an inference tensor (InferenceMode's tensors keep none).
int64_t version(const torch::Tensor& x) {
  return x.is_inference() ? -1 : static_cast<int64_t>(x._version());
}

}  // namespace

bool wanted() {
  return on() && autocast::enabled(c10::kCPU) && autocast::dtype(c10::kCPU) == torch::kBFloat16;
}

torch::Tensor remember(const torch::Tensor& x, const torch::Tensor& twin) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat && x.is_contiguous() && x.device().is_cpu() &&
                  twin.scalar_type() == torch::kBFloat16 && twin.sizes() == x.sizes() &&
                  twin.is_contiguous(),
              "bf16_twin::remember: a contiguous float32 CPU x and a contiguous bf16 twin of its "
              "sizes, got ",
              x.scalar_type(), " ", x.sizes(), " and ", twin.scalar_type(), " ", twin.sizes());
  // The same data, its memory's release also releasing x's and the twin's references.
  torch::Tensor held = torch::from_blob(
      x.data_ptr(), x.sizes(), [x, twin](void*) {}, x.options());
  Twin& t = kept();
  t.owner = WeakImpl(held.getIntrusivePtr());
  t.twin = WeakImpl(twin.getIntrusivePtr());
  t.data = held.data_ptr();
  t.version = version(held);
  return held;
}

torch::Tensor cast(const torch::Tensor& x) {
  Twin& t = kept();
  if (t.owner._unsafe_get_target() == x.unsafeGetTensorImpl() && t.data == x.data_ptr() &&
      t.version == version(x)) {
    if (auto twin = t.twin.lock(); twin && twin->sizes() == x.sizes()) {
      ++t.answered;
      return torch::Tensor(std::move(twin));
    }
  }
  return x.to(torch::kBFloat16);
}

int64_t answered() {
  return kept().answered;
}

ScopedBf16Twins::ScopedBf16Twins(bool on) : ScopedOverride(twins, on ? 1 : 0) {}

}  // namespace bert::bf16_twin
