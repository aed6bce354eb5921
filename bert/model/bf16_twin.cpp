#include "bert/model/bf16_twin.h"

#include <atomic>

#include "bert/common/autocast.h"
#include "bert/model/onednn_detail.h"

namespace bert::bf16_twin {
namespace {

/// A ScopedBf16Twins' choice (0 off, 1 on), or -1.
std::atomic<int> forced{-1};

using WeakImpl = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;

WeakImpl nobody() {
  return WeakImpl(c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>());
}

struct Twin {
  /// x's TensorImpl, held weakly: its address is not reused while the twin is kept.
  WeakImpl owner = nobody();
  const void* data = nullptr;  ///< x's data when the twin was made
  int64_t version = -1;        ///< and its version then (see version())
  torch::Tensor twin;
  int64_t answered = 0;  ///< casts it answered, this thread's twins together
};

Twin& kept() {
  thread_local Twin t;
  return t;
}

bool on() {
  if (const int f = forced.load(); f >= 0) return f == 1;
  static const bool env_on = !detail::env_is("BERTFT_BF16_TWIN", "off");
  return env_on;
}

/// x's version counter; -1 for an inference tensor (InferenceMode's tensors keep none).
int64_t version(const torch::Tensor& x) {
  return x.is_inference() ? -1 : static_cast<int64_t>(x._version());
}

}  // namespace

bool wanted() {
  return on() && autocast::enabled(c10::kCPU) && autocast::dtype(c10::kCPU) == torch::kBFloat16;
}

void remember(const torch::Tensor& x, torch::Tensor twin) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat && twin.scalar_type() == torch::kBFloat16 &&
                  twin.sizes() == x.sizes() && twin.is_contiguous(),
              "bf16_twin::remember: a contiguous bf16 tensor of x's sizes ", x.sizes(), ", got ",
              twin.scalar_type(), " ", twin.sizes());
  Twin& t = kept();
  t.twin = torch::Tensor();  // the old twin's memory first
  t.owner = WeakImpl(x.getIntrusivePtr());
  t.data = x.data_ptr();
  t.version = version(x);
  t.twin = std::move(twin);
}

torch::Tensor cast(const torch::Tensor& x) {
  Twin& t = kept();
  if (t.twin.defined()) {
    if (t.owner.expired()) {
      forget();
    } else if (t.owner._unsafe_get_target() == x.unsafeGetTensorImpl() && t.data == x.data_ptr() &&
               t.version == version(x) && t.twin.sizes() == x.sizes()) {
      ++t.answered;
      return t.twin;
    }
  }
  return x.to(torch::kBFloat16);
}

void forget() {
  Twin& t = kept();
  t.twin = torch::Tensor();
  t.owner = nobody();
  t.data = nullptr;
  t.version = -1;
}

int64_t answered() {
  return kept().answered;
}

ScopedBf16Twins::ScopedBf16Twins(bool on) : previous_(forced.exchange(on ? 1 : 0)) {}

ScopedBf16Twins::~ScopedBf16Twins() {
  forced.store(previous_);
}

}  // namespace bert::bf16_twin
