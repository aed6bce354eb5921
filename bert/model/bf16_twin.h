#pragma once

#include <torch/torch.h>

#include "bert/common/override.h"

namespace bert::bf16_twin {

/// bf16 inference casts each float32 activation a projection takes: a LayerNorm's output enters
/// the next layer's query, key and value projections (three casts of one tensor) or the FFN's
/// first projection, and is kept in float32 as the residual. The LayerNorm writes its bf16
/// rounding too, while each row is still in cache, and remembers it here (per thread, one tensor
/// at a time); the projections' cast takes it instead of reading the float32 tensor again. The
/// twin equals x.to(torch::kBFloat16) bit for bit (round to nearest even, as LibTorch casts).

/// Whether a float32 activation made now, without autograd recording, should get a twin: under
/// CPU bf16 autocast, unless BERTFT_BF16_TWIN=off or a ScopedBf16Twins(false).
bool wanted();

/// x (contiguous float32) as a tensor of the same data whose memory also holds `twin` (bf16, x's
/// sizes, contiguous: its rounding), remembered as its twin on this thread in place of the one
/// before. The twin lives as long as that memory (no longer) and answers while the returned
/// tensor is unchanged. A write shows in its version counter, which an InferenceMode tensor does
/// not keep: the caller hands it only to code that does not write into it in place (bertft's
/// encoder layers and heads do not).
torch::Tensor remember(const torch::Tensor& x, const torch::Tensor& twin);

/// x in bf16: its remembered twin where it is still x's (the same tensor, unchanged since), else
/// x.to(torch::kBFloat16).
torch::Tensor cast(const torch::Tensor& x);

/// How many of this thread's casts a twin has answered so far (tests and benchmarks).
int64_t answered();

/// Overrides BERTFT_BF16_TWIN while alive (tests and benchmarks), then restores the previous
/// choice.
class ScopedBf16Twins : detail::ScopedOverride {
 public:
  explicit ScopedBf16Twins(bool on);
};

}  // namespace bert::bf16_twin
