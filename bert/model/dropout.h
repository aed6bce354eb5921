#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <ostream>

#include "bert/model/dropout_kernel.h"

namespace bert {

/// Inverted dropout: zeroes each element with probability p, scales the rest by 1 / (1 - p).
/// On CPU float32/bfloat16 tensors the mask is a keyed hash of the element index (keys drawn from
/// LibTorch's default CPU generator, so torch::manual_seed and a restored generator state repeat
/// it); nothing is stored for backward, which recomputes the mask. One vectorised pass each way
/// instead of bernoulli_ + mul (about 13% of a bert-base bf16 train step here). Other devices and
/// dtypes use torch::dropout. Identity when !training or p == 0.
torch::Tensor hash_dropout(const torch::Tensor& x, double p, bool training);

/// The keys of one hash_dropout mask: 64 bits from LibTorch's default CPU generator (the draw
/// hash_dropout makes). For kernels that drop a tensor they never hold whole (the attention's
/// probabilities head by head) as hash_dropout would.
uint64_t draw_dropout_keys();
/// hash_dropout's mask for probability p (0 <= p < 1) and `keys`.
kernels::DropoutMask dropout_mask(double p, uint64_t keys);

/// A parameter-free module around hash_dropout, in place of torch::nn::Dropout.
class DropoutImpl : public torch::nn::Cloneable<DropoutImpl> {
 public:
  explicit DropoutImpl(double p = 0.5);
  void reset() override {}
  torch::Tensor forward(const torch::Tensor& x) { return hash_dropout(x, p, is_training()); }
  void pretty_print(std::ostream& stream) const override;
  /// Whether forward changes anything (training mode and p > 0).
  bool active() const { return is_training() && p > 0; }

  double p;
};
TORCH_MODULE(Dropout);

}  // namespace bert
