#pragma once

#include <torch/torch.h>

#include "bert/model/attention.h"
#include "bert/model/bert_config.h"
#include "bert/model/dropout.h"
#include "bert/model/linear.h"

namespace bert {

/// Applies the configured activation (exact GELU, tanh GELU or ReLU).
torch::Tensor apply_activation(Activation activation, const torch::Tensor& x);

/// First feed-forward projection + activation. Children: dense.
class BertIntermediateImpl : public torch::nn::Module {
 public:
  explicit BertIntermediateImpl(const BertConfig& config);
  /// [batch, seq, hidden] -> [batch, seq, intermediate].
  torch::Tensor forward(const torch::Tensor& hidden);

 private:
  Activation activation_;
  Linear dense_{nullptr};
};
TORCH_MODULE(BertIntermediate);

/// Second feed-forward projection with residual + LayerNorm. Children: dense, LayerNorm, dropout.
class BertOutputImpl : public torch::nn::Module {
 public:
  explicit BertOutputImpl(const BertConfig& config);
  /// intermediate [batch, seq, intermediate], residual [batch, seq, hidden] -> [batch, seq,
  /// hidden].
  torch::Tensor forward(const torch::Tensor& intermediate, const torch::Tensor& residual);

 private:
  Linear dense_{nullptr};
  torch::nn::LayerNorm layer_norm_{nullptr};
  Dropout dropout_{nullptr};
};
TORCH_MODULE(BertOutput);

/// One transformer encoder layer. Children: attention, intermediate, output.
class BertLayerImpl : public torch::nn::Module {
 public:
  explicit BertLayerImpl(const BertConfig& config);
  /// hidden [batch, seq, hidden] -> [batch, seq, hidden]; with `queries` [batch, rows, hidden]
  /// (rows of `hidden`: ForwardOptions::first_token_only, last_layer_rows) the output of those
  /// rows alone, [batch, rows, hidden].
  torch::Tensor forward(const torch::Tensor& hidden,
                        const torch::Tensor& additive_mask,
                        torch::Tensor* probs_out = nullptr,
                        const torch::Tensor& queries = {});

 private:
  BertAttention attention_{nullptr};
  BertIntermediate intermediate_{nullptr};
  BertOutput output_{nullptr};
};
TORCH_MODULE(BertLayer);

}  // namespace bert
