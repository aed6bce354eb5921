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
  /// The caller reads only the first position of the last layer's output (a sentence head: the
  /// pooler, or the first token): the last layer then computes that row alone, its keys and
  /// values still from every position, and last_hidden_state (with the last of hidden_states and
  /// attentions) holds that one position, [batch, 1, hidden]. Its values are those of the whole
  /// layer's first row (to rounding); the other rows' work (7.5% of bert-base's FLOPs at 128
  /// tokens) is skipped.
  bool first_token_only = false;
  /// [batch, rows] int64, or undefined: the positions of each sequence whose last-layer output
  /// the caller reads (pre-training's [CLS] and masked tokens; a row may repeat a position). The
  /// last layer then computes those rows alone, and last_hidden_state is [batch, rows, hidden],
  /// its row j of sequence b the output at position last_layer_rows[b][j].
  torch::Tensor last_layer_rows{};
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

  /// Activation checkpointing: when on, a forward with grad keeps only each layer's input and
  /// backward recomputes the layer (bert/model/activation_checkpoint.h); gradients unchanged.
  /// Forwards without grad, or asking for attentions, run the layers as they are.
  void set_activation_checkpointing(bool on) { checkpointing_ = on; }
  bool activation_checkpointing() const { return checkpointing_; }

 private:
  torch::nn::ModuleList layers_{nullptr};
  bool checkpointing_ = false;
};
TORCH_MODULE(BertEncoder);

/// Turns activation checkpointing on or off in every BertEncoder under `module` (a task model,
/// BertForPreTraining, ...); returns how many encoders it found.
int64_t set_activation_checkpointing(torch::nn::Module& module, bool on);

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
