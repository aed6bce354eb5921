#include "bert/model/layer.h"

namespace bert {

torch::Tensor apply_activation(Activation activation, const torch::Tensor& x) {
  switch (activation) {
    case Activation::kGelu:
      return torch::gelu(x);
    case Activation::kGeluNew:
      return torch::gelu(x, "tanh");
    case Activation::kRelu:
      return torch::relu(x);
  }
  TORCH_INTERNAL_ASSERT(false, "unknown activation");
}

BertIntermediateImpl::BertIntermediateImpl(const BertConfig& c) : activation_(c.hidden_act()) {
  dense_ = register_module("dense", Linear(c.hidden_size(), c.intermediate_size()));
}

namespace {

/// apply_activation in place: the same values (the same kernels, bf16 under autocast included).
torch::Tensor apply_activation_in_place(Activation activation, torch::Tensor x) {
  switch (activation) {
    case Activation::kGelu:
      return at::gelu_(x);
    case Activation::kGeluNew:
      return at::gelu_(x, "tanh");
    case Activation::kRelu:
      return at::relu_(x);
  }
  TORCH_INTERNAL_ASSERT(false, "unknown activation");
}

}  // namespace

torch::Tensor BertIntermediateImpl::forward(const torch::Tensor& hidden) {
  torch::Tensor x = dense_(hidden);
  // Without autograd (evaluation, prediction, embedding) the activation overwrites the
  // projection's own fresh output: one [tokens, intermediate_size] buffer less at the peak.
  if (!x.requires_grad()) return apply_activation_in_place(activation_, std::move(x));
  return apply_activation(activation_, x);
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
  return layer_norm_(dropout_(dense_(intermediate)) + residual);
}

BertLayerImpl::BertLayerImpl(const BertConfig& c) {
  attention_ = register_module("attention", BertAttention(c));
  intermediate_ = register_module("intermediate", BertIntermediate(c));
  output_ = register_module("output", BertOutput(c));
}

torch::Tensor BertLayerImpl::forward(const torch::Tensor& hidden,
                                     const torch::Tensor& additive_mask,
                                     torch::Tensor* probs_out) {
  const torch::Tensor attended = attention_->forward(hidden, additive_mask, probs_out);
  return output_(intermediate_(attended), attended);
}

}  // namespace bert
