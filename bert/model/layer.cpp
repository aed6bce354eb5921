#include "bert/model/layer.h"

#include "bert/model/layer_norm.h"
#include "bert/model/onednn_linear.h"

namespace bert {

namespace {

/// The activation, in place on `x` (the same kernels and values, bf16 under autocast included)
/// or into a new tensor.
torch::Tensor activate(Activation activation, torch::Tensor x, bool in_place) {
  switch (activation) {
    case Activation::kGelu:
      return in_place ? at::gelu_(x) : torch::gelu(x);
    case Activation::kGeluNew:
      return in_place ? at::gelu_(x, "tanh") : torch::gelu(x, "tanh");
    case Activation::kRelu:
      return in_place ? at::relu_(x) : torch::relu(x);
  }
  TORCH_INTERNAL_ASSERT(false, "unknown activation");
}

}  // namespace

torch::Tensor apply_activation(Activation activation, const torch::Tensor& x) {
  return activate(activation, x, /*in_place=*/false);
}

BertIntermediateImpl::BertIntermediateImpl(const BertConfig& c) : activation_(c.hidden_act()) {
  dense_ = register_module("dense", Linear(c.hidden_size(), c.intermediate_size()));
}

torch::Tensor BertIntermediateImpl::forward(const torch::Tensor& hidden) {
  // Without autograd, on the oneDNN paths (fp32, and bf16 under autocast), the exact GELU runs
  // in the GEMM's output pass.
  if (activation_ == Activation::kGelu && !dense_->is_int8() &&
      !linear_needs_autograd(hidden, dense_->weight, dense_->bias)) {
    if (use_onednn_linear(hidden, dense_->weight))
      return onednn_linear_gelu(hidden, dense_->weight, dense_->bias);
    if (use_onednn_bf16_linear(hidden, dense_->weight))
      return dense_->bf16_inference(hidden, /*gelu=*/true);
  }
  torch::Tensor x = dense_(hidden);
  // Without autograd (evaluation, prediction, embedding) the activation overwrites the
  // projection's own fresh output: one [tokens, intermediate_size] buffer less at the peak.
  const bool in_place = !x.requires_grad();
  return activate(activation_, std::move(x), in_place);
}

BertOutputImpl::BertOutputImpl(const BertConfig& c) {
  dense_ = register_module("dense", Linear(c.intermediate_size(), c.hidden_size()));
  layer_norm_ = register_module(
      "LayerNorm",
      torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.hidden_size()}).eps(c.layer_norm_eps())));
  dropout_ = register_module("dropout", Dropout(c.hidden_dropout_prob()));
}

torch::Tensor BertOutputImpl::forward(const torch::Tensor& intermediate,
                                      const torch::Tensor& residual) {
  if (!dropout_->active())
    if (const auto sum = linear_add_if_inference(*dense_, intermediate, residual); sum.defined())
      return add_layer_norm(*layer_norm_, sum);
  return add_layer_norm(*layer_norm_, dropout_(dense_(intermediate)), residual);
}

BertLayerImpl::BertLayerImpl(const BertConfig& c) {
  attention_ = register_module("attention", BertAttention(c));
  intermediate_ = register_module("intermediate", BertIntermediate(c));
  output_ = register_module("output", BertOutput(c));
}

torch::Tensor BertLayerImpl::forward(const torch::Tensor& hidden,
                                     const torch::Tensor& additive_mask,
                                     torch::Tensor* probs_out,
                                     const torch::Tensor& queries) {
  const torch::Tensor attended = attention_->forward(hidden, additive_mask, probs_out, queries);
  return output_(intermediate_(attended), attended);
}

}  // namespace bert
