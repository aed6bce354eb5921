#pragma once

#include <torch/torch.h>

#include <map>
#include <string>

#include "bert/model/bert_model.h"

namespace bert {

/// dense -> activation -> LayerNorm before the MLM decoder. Children: dense, LayerNorm.
class BertPredictionHeadTransformImpl : public torch::nn::Module {
 public:
  explicit BertPredictionHeadTransformImpl(const BertConfig& config);
  torch::Tensor forward(const torch::Tensor& hidden);

 private:
  Activation activation_;
  torch::nn::Linear dense_{nullptr};
  torch::nn::LayerNorm layer_norm_{nullptr};
};
TORCH_MODULE(BertPredictionHeadTransform);

/// MLM head: transform, then a decoder whose weight is the word-embedding matrix (tied, not a
/// copy) plus its own bias. Children: transform; parameter: bias [vocab].
class BertLMPredictionHeadImpl : public torch::nn::Module {
 public:
  BertLMPredictionHeadImpl(const BertConfig& config, torch::Tensor tied_decoder_weight);
  /// [batch, seq, hidden] -> logits [batch, seq, vocab].
  torch::Tensor forward(const torch::Tensor& hidden);

  torch::Tensor bias;

 private:
  BertPredictionHeadTransform transform_{nullptr};
  torch::Tensor decoder_weight_;  // the word embedding weight [vocab, hidden], not registered here
};
TORCH_MODULE(BertLMPredictionHead);

/// MLM + NSP heads. Children: predictions, seq_relationship.
class BertPreTrainingHeadsImpl : public torch::nn::Module {
 public:
  BertPreTrainingHeadsImpl(const BertConfig& config, torch::Tensor tied_decoder_weight);

  BertLMPredictionHead predictions{nullptr};
  torch::nn::Linear seq_relationship{nullptr};
};
TORCH_MODULE(BertPreTrainingHeads);

/// The MLM head of a non-BERT family's XxxForMaskedLM, its parts registered on `owner` under HF's
/// names so that state-dict keys are HF's:
///   RoBERTa, XLM-R:     lm_head.{dense, layer_norm, bias}
///   DistilBERT:         vocab_transform, vocab_layer_norm, vocab_projector.bias
///   ELECTRA (generator): generator_predictions.{dense, LayerNorm}, generator_lm_head.bias
/// dense [hidden -> hidden, ELECTRA: -> embedding_size] -> GELU (DistilBERT: its activation) ->
/// LayerNorm -> a decoder whose weight is the word-embedding matrix (tied) plus the bias.
/// BERT's own is BertLMPredictionHead (`cls.predictions`).
class MaskedLMHead {
 public:
  MaskedLMHead(torch::nn::Module& owner, const BertConfig& config, torch::Tensor tied);
  /// [..., hidden] -> logits [..., vocab].
  torch::Tensor forward(const torch::Tensor& hidden);

 private:
  Activation activation_;
  torch::nn::Linear dense_{nullptr};
  torch::nn::LayerNorm layer_norm_{nullptr};
  torch::Tensor bias_;
  torch::Tensor decoder_weight_;
};

struct PreTrainingOutput {
  BertModelOutput encoder;
  torch::Tensor prediction_logits;        ///< [batch, seq, vocab]
  torch::Tensor seq_relationship_logits;  ///< [batch, 2]
};

struct PreTrainingLoss {
  torch::Tensor total;  ///< mlm + nsp (HF BertForPreTraining's loss)
  torch::Tensor mlm;    ///< cross-entropy over positions whose label != -100
  torch::Tensor nsp;    ///< cross-entropy of IsNext (0) / NotNext (1)
};

/// BERT with its pre-training heads; keys equal HF `BertForPreTraining` (`bert.*`, `cls.*`).
class BertForPreTrainingImpl : public torch::nn::Module {
 public:
  explicit BertForPreTrainingImpl(const BertConfig& config);

  PreTrainingOutput forward(const torch::Tensor& input_ids,
                            const torch::Tensor& attention_mask = {},
                            const torch::Tensor& token_type_ids = {},
                            const ForwardOptions& options = {});

  /// HF's BertForPreTraining loss. mlm_labels [batch, seq] int64 (-100 = not predicted),
  /// next_sentence_label [batch] int64.
  static PreTrainingLoss loss(const PreTrainingOutput& out,
                              const torch::Tensor& mlm_labels,
                              const torch::Tensor& next_sentence_label);

  /// State-dict keys that HF writes as aliases of tied tensors (in pytorch_model.bin, not in
  /// model.safetensors), mapped to the parameter they alias: BertForPreTraining's and the
  /// masked-LM decoders of the other families (MaskedLMHead).
  static const std::map<std::string, std::string>& tied_aliases();

  BertModel bert{nullptr};
  BertPreTrainingHeads cls{nullptr};
};
TORCH_MODULE(BertForPreTraining);

}  // namespace bert
