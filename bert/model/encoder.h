#pragma once

#include <torch/torch.h>

#include <vector>

#include "bert/model/bert_config.h"
#include "bert/model/layer.h"

namespace bert {

/// What the encoder and BertModel return. Optional parts are empty unless requested.
struct BertModelOutput {
  torch::Tensor last_hidden_state;  ///< [batch, seq, hidden]
  torch::Tensor pooler_output;      ///< [batch, hidden]; undefined without a pooler
  /// num_hidden_layers + 1 tensors [batch, seq, hidden]: embedding output, then each layer's.
  std::vector<torch::Tensor> hidden_states;
  /// num_hidden_layers tensors [batch, heads, seq, seq] of attention probabilities.
  std::vector<torch::Tensor> attentions;
};

/// What a forward pass should return besides the last hidden state.
struct ForwardOptions {
  bool output_hidden_states = false;
  bool output_attentions = false;
};

/// The stack of encoder layers. Children: layer (ModuleList, "layer.0", "layer.1", ...).
class BertEncoderImpl : public torch::nn::Module {
 public:
  explicit BertEncoderImpl(const BertConfig& config);
  /// Runs every layer over `hidden` [batch, seq, hidden]; fills `out` (last_hidden_state and,
  /// as requested, hidden_states / attentions).
  void forward(torch::Tensor hidden,
               const torch::Tensor& additive_mask,
               const ForwardOptions& options,
               BertModelOutput& out);

 private:
  torch::nn::ModuleList layers_{nullptr};
};
TORCH_MODULE(BertEncoder);

/// tanh(dense(hidden[:, 0])): the [CLS] representation. Children: dense.
class BertPoolerImpl : public torch::nn::Module {
 public:
  explicit BertPoolerImpl(const BertConfig& config);
  /// [batch, seq, hidden] -> [batch, hidden].
  torch::Tensor forward(const torch::Tensor& hidden);

 private:
  torch::nn::Linear dense_{nullptr};
};
TORCH_MODULE(BertPooler);

}  // namespace bert
