#include "bert/model/pretraining.h"

#include "bert/model/init.h"
#include "bert/model/layer.h"
#include "bert/model/onednn_linear.h"

namespace bert {

constexpr int64_t kIgnoreIndex = -100;  // label value skipped by cross_entropy (HF convention)

BertPredictionHeadTransformImpl::BertPredictionHeadTransformImpl(const BertConfig& c)
    : activation_(c.hidden_act()) {
  dense_ = register_module("dense", torch::nn::Linear(c.hidden_size(), c.hidden_size()));
  layer_norm_ = register_module(
      "LayerNorm",
      torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.hidden_size()}).eps(c.layer_norm_eps())));
}

torch::Tensor BertPredictionHeadTransformImpl::forward(const torch::Tensor& hidden) {
  // Under bf16 autocast the dense output is bf16 with no fp32 residual to add, and LibTorch
  // 1.13's CPU layer_norm refuses a bf16 input with fp32 parameters: normalise in theirs.
  const auto x = apply_activation(activation_, fast_linear(hidden, dense_->weight, dense_->bias));
  return layer_norm_(x.to(layer_norm_->weight.scalar_type()));
}

BertLMPredictionHeadImpl::BertLMPredictionHeadImpl(const BertConfig& c, torch::Tensor tied)
    : decoder_weight_(std::move(tied)) {
  TORCH_CHECK(decoder_weight_.dim() == 2 && decoder_weight_.size(0) == c.vocab_size(),
              "tied decoder weight must be [vocab_size, hidden]");
  transform_ = register_module("transform", BertPredictionHeadTransform(c));
  bias = register_parameter("bias", torch::zeros({c.vocab_size()}));
}

torch::Tensor BertLMPredictionHeadImpl::forward(const torch::Tensor& hidden) {
  return fast_linear(transform_(hidden), decoder_weight_, bias);  // [batch, seq, vocab]
}

MaskedLMHead::MaskedLMHead(torch::nn::Module& owner, const BertConfig& c, torch::Tensor tied)
    : activation_(c.family() == ModelFamily::kDistilBert ? c.hidden_act() : Activation::kGelu),
      decoder_weight_(std::move(tied)) {
  TORCH_CHECK(c.family() != ModelFamily::kBert, "BERT's MLM head is BertLMPredictionHead");
  const int64_t out = c.family() == ModelFamily::kElectra ? c.embedding_dim() : c.hidden_size();
  TORCH_CHECK(decoder_weight_.dim() == 2 && decoder_weight_.size(0) == c.vocab_size() &&
                  decoder_weight_.size(1) == out,
              "tied decoder weight must be [vocab_size, ", out, "]");
  dense_ = torch::nn::Linear(c.hidden_size(), out);
  layer_norm_ = torch::nn::LayerNorm(torch::nn::LayerNormOptions({out}).eps(c.layer_norm_eps()));
  bias_ = torch::zeros({c.vocab_size()});
  // A module that only holds parameters under HF's names.
  const auto holder = [&](const std::string& name) {
    return owner.register_module(name, std::make_shared<torch::nn::Module>());
  };
  switch (c.family()) {
    case ModelFamily::kRoberta:
    case ModelFamily::kXlmRoberta: {
      const auto head = holder("lm_head");
      head->register_module("dense", dense_);
      head->register_module("layer_norm", layer_norm_);
      bias_ = head->register_parameter("bias", bias_);
      break;
    }
    case ModelFamily::kDistilBert:
      owner.register_module("vocab_transform", dense_);
      owner.register_module("vocab_layer_norm", layer_norm_);
      bias_ = holder("vocab_projector")->register_parameter("bias", bias_);
      break;
    case ModelFamily::kElectra: {
      const auto head = holder("generator_predictions");
      head->register_module("dense", dense_);
      head->register_module("LayerNorm", layer_norm_);
      bias_ = holder("generator_lm_head")->register_parameter("bias", bias_);
      break;
    }
    case ModelFamily::kBert:
      break;
  }
  torch::NoGradGuard no_grad;  // HF's _init_weights
  dense_->weight.normal_(0.0, c.initializer_range());
  dense_->bias.zero_();
  layer_norm_->weight.fill_(1.0);
  layer_norm_->bias.zero_();
}

torch::Tensor MaskedLMHead::forward(const torch::Tensor& hidden) {
  const auto x = apply_activation(activation_, fast_linear(hidden, dense_->weight, dense_->bias));
  // As BertPredictionHeadTransform: normalise in the parameters' dtype under bf16 autocast.
  return fast_linear(layer_norm_->forward(x.to(layer_norm_->weight.scalar_type())), decoder_weight_,
                     bias_);
}

BertPreTrainingHeadsImpl::BertPreTrainingHeadsImpl(const BertConfig& c, torch::Tensor tied) {
  predictions = register_module("predictions", BertLMPredictionHead(c, std::move(tied)));
  seq_relationship = register_module("seq_relationship", torch::nn::Linear(c.hidden_size(), 2));
}

BertForPreTrainingImpl::BertForPreTrainingImpl(const BertConfig& config) {
  bert = register_module("bert", BertModel(config));
  cls = register_module("cls",
                        BertPreTrainingHeads(config, bert->embeddings->word_embeddings->weight));
  init_bert_weights(*cls, config.initializer_range());
  torch::NoGradGuard no_grad;
  cls->predictions->bias.zero_();
}

PreTrainingOutput BertForPreTrainingImpl::forward(const torch::Tensor& input_ids,
                                                  const torch::Tensor& attention_mask,
                                                  const torch::Tensor& token_type_ids,
                                                  const ForwardOptions& options) {
  PreTrainingOutput out;
  out.encoder = bert->forward(input_ids, attention_mask, token_type_ids, options);
  out.prediction_logits = cls->predictions(out.encoder.last_hidden_state);  // [batch, seq, vocab]
  out.seq_relationship_logits = cls->seq_relationship(out.encoder.pooler_output);  // [batch, 2]
  return out;
}

PreTrainingLoss BertForPreTrainingImpl::loss(const PreTrainingOutput& out,
                                             const torch::Tensor& mlm_labels,
                                             const torch::Tensor& next_sentence_label) {
  namespace F = torch::nn::functional;
  const int64_t vocab = out.prediction_logits.size(-1);
  PreTrainingLoss l;
  l.mlm = F::cross_entropy(out.prediction_logits.reshape({-1, vocab}).to(torch::kFloat),
                           mlm_labels.reshape({-1}),
                           F::CrossEntropyFuncOptions().ignore_index(kIgnoreIndex));
  l.nsp = F::cross_entropy(out.seq_relationship_logits.to(torch::kFloat),
                           next_sentence_label.reshape({-1}));
  l.total = l.mlm + l.nsp;
  return l;
}

const std::map<std::string, std::string>& BertForPreTrainingImpl::tied_aliases() {
  static const std::map<std::string, std::string> aliases = {
      {"cls.predictions.decoder.weight", "bert.embeddings.word_embeddings.weight"},
      {"cls.predictions.decoder.bias", "cls.predictions.bias"},
      {"lm_head.decoder.weight", "roberta.embeddings.word_embeddings.weight"},
      {"lm_head.decoder.bias", "lm_head.bias"},
      {"vocab_projector.weight", "distilbert.embeddings.word_embeddings.weight"},
      {"generator_lm_head.weight", "electra.embeddings.word_embeddings.weight"},
  };
  return aliases;
}

}  // namespace bert
