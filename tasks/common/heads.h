#pragma once

#include <torch/torch.h>

#include <string>

#include "bert/model/bert_model.h"
#include "bert/model/dropout.h"
#include "tasks/task_adapter.h"

namespace bert::tasks {

/// Where the head reads the encoder, i.e. which HF model class it reproduces.
enum class HeadKind {
  kPooled,   ///< BertForSequenceClassification: pooler -> dropout -> "classifier" [labels]
  kChoices,  ///< BertForMultipleChoice: rows flattened, pooler -> dropout -> "classifier" [1]
  kTokens,   ///< BertForTokenClassification: no pooler; hidden -> dropout -> "classifier"
  kSpan,     ///< BertForQuestionAnswering: no pooler; hidden -> "qa_outputs" [2]
};

/// The four HF task models as one module: "bert" (encoder, with a pooler for kPooled /
/// kChoices) plus the head, so state-dict keys are exactly HF's ("bert.encoder...",
/// "classifier.weight", "qa_outputs.bias").
class BertTaskModelImpl : public TaskModelImpl {
 public:
  /// `outputs`: labels (kPooled, kTokens), ignored for kChoices (1) and kSpan (2). The head is
  /// initialised like HF (weights ~ N(0, initializer_range), bias 0); the dropout probability is
  /// classifier_dropout if set, else hidden_dropout_prob.
  BertTaskModelImpl(const BertConfig& config, HeadKind kind, int64_t outputs);

  /// Logits: [batch, outputs] | [batch, choices] | [batch, seq, outputs] | [batch, seq, 2].
  torch::Tensor forward(const Batch& batch) override;

  HeadKind kind() const { return kind_; }
  /// The head's registered name ("classifier" or "qa_outputs").
  std::string head_name() const { return kind_ == HeadKind::kSpan ? "qa_outputs" : "classifier"; }

  BertModel bert{nullptr};
  bert::Dropout dropout{nullptr};
  torch::nn::Linear head{nullptr};

 private:
  HeadKind kind_;
};

}  // namespace bert::tasks
