#pragma once

#include <torch/torch.h>

#include <string>

#include "bert/model/bert_model.h"
#include "bert/model/dropout.h"
#include "tasks/task_adapter.h"

namespace bert::tasks {

/// Where the head reads the encoder, i.e. which HF model class it reproduces.
enum class HeadKind {
  kPooled,   ///< XxxForSequenceClassification [labels]
  kChoices,  ///< XxxForMultipleChoice: rows flattened, one score per row
  kTokens,   ///< XxxForTokenClassification: hidden -> dropout -> "classifier" [labels]
  kSpan,     ///< XxxForQuestionAnswering: hidden -> "qa_outputs" [2]
};

/// The HF task models of every ModelFamily as one module: the encoder, registered under the
/// family's prefix ("bert", "roberta", "distilbert", "electra"), plus the head HF's class has,
/// so that state-dict keys are exactly HF's. For kPooled / kChoices the sentence vector is
///   BERT:        pooler -> dropout -> "classifier"
///   RoBERTa:     kPooled: first token -> dropout -> "classifier.dense" -> tanh -> dropout ->
///                "classifier.out_proj"; kChoices: pooler -> dropout -> "classifier"
///   ELECTRA:     kPooled as RoBERTa with GELU; kChoices: first token -> (dropout) ->
///                "sequence_summary.summary" -> GELU -> dropout -> "classifier"
///   DistilBERT:  first token -> "pre_classifier" -> ReLU -> dropout -> "classifier"
/// and DistilBERT's span head applies its qa_dropout first.
class BertTaskModelImpl : public TaskModelImpl {
 public:
  /// `outputs`: labels (kPooled, kTokens), ignored for kChoices (1) and kSpan (2). The head is
  /// initialised like HF (weights ~ N(0, initializer_range), bias 0); dropout probabilities are
  /// those of the family's HF class (classifier_dropout, else hidden_dropout_prob, for BERT).
  BertTaskModelImpl(const BertConfig& config, HeadKind kind, int64_t outputs);

  /// Logits: [batch, outputs] | [batch, choices] | [batch, seq, outputs] | [batch, seq, 2].
  torch::Tensor forward(const Batch& batch) override;

  HeadKind kind() const { return kind_; }

  BertModel bert{nullptr};

 private:
  /// The sentence vector of kPooled / kChoices rows, before the last Linear.
  torch::Tensor sentence_vector(const BertModelOutput& out);

  HeadKind kind_;
  ModelFamily family_;
  bool uses_pooler_ = false;
  bert::Dropout dropout_{nullptr};
  bert::Dropout first_dropout_{nullptr};  ///< ELECTRA's summary_first_dropout (multiple choice)
  torch::nn::Linear pre_{nullptr};        ///< classifier.dense / pre_classifier / summary
  Activation pre_activation_ = Activation::kGelu;
  bool pre_tanh_ = false;
  torch::nn::Linear head_{nullptr};
};

}  // namespace bert::tasks
