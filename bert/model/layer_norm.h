#pragma once

#include <torch/torch.h>

namespace bert {

/// norm(x + residual), or norm(x) where `residual` is undefined: the residual sum and LayerNorm of
/// an encoder layer's output in one pass of bertft's kernel (kernels::add_layer_norm_f32) where
/// it takes the operands: on the CPU, x float32 or bf16 (autocast's projection) with a float32
/// residual of x's shape (without one, x float32), the module's float32 affine over the last
/// dimension. The result is then float32, as the module's under autocast, within ~1e-6 relative
/// of it, and the same bit for bit with or without autograd; the gradients are LibTorch's
/// layer_norm backward's, from the kernel's sum and moments. Else (other devices and dtypes, and
/// with BERTFT_FUSED_LAYER_NORM=off, for side-by-side measurements) the module on x + residual.
torch::Tensor add_layer_norm(torch::nn::LayerNormImpl& norm,
                             const torch::Tensor& x,
                             const torch::Tensor& residual = {});

/// Whether add_layer_norm runs bertft's kernel on these operands.
bool add_layer_norm_fused(const torch::nn::LayerNormImpl& norm,
                          const torch::Tensor& x,
                          const torch::Tensor& residual = {});

}  // namespace bert
