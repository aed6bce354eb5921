#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bert/common/yaml.h"
#include "data/example.h"
#include "tasks/registry.h"
#include "tasks/task_adapter.h"

namespace bert::tasks {

struct QuestionAnsweringOptions {
  int64_t max_seq_length = 384;
  /// Tokens shared by consecutive windows of a long context (HF run_qa.py's doc_stride).
  int64_t doc_stride = 128;
  /// Questions longer than this many tokens are cut (Google's run_squad.py).
  int64_t max_query_length = 64;
  /// Start and end candidates considered per window, and answers kept per question.
  int64_t n_best_size = 20;
  /// Longest answer in tokens.
  int64_t max_answer_length = 30;
  /// SQuAD v2.0 (unanswerable questions); default: detected from the data.
  std::optional<bool> version_2_with_negative;
  /// Predict "no answer" when null score - best span score exceeds this (v2.0).
  double null_score_diff_threshold = 0.0;

  template <class Self, class Visitor>
  static void visit(Self& self, Visitor&& field) {
    field("max_seq_length", self.max_seq_length,
          "Tokens per window: [CLS] question [SEP] context [SEP]");
    field("doc_stride", self.doc_stride, "Overlap in tokens between context windows");
    field("max_query_length", self.max_query_length, "Question tokens kept");
    field("n_best_size", self.n_best_size, "Start/end candidates per window");
    field("max_answer_length", self.max_answer_length, "Longest answer in tokens");
    field("version_2_with_negative", self.version_2_with_negative,
          "SQuAD v2.0 (default: from the data)");
    field("null_score_diff_threshold", self.null_score_diff_threshold,
          "No-answer threshold (v2.0)");
  }
};

/// Features of SQuAD examples: one per context window, plus each window token's byte span in
/// the context ((-1, -1) for question and special tokens).
class QaFeatureSet final : public FeatureSet {
 public:
  std::vector<std::vector<std::pair<int64_t, int64_t>>> offsets;
  /// Per feature: whether its gold answer span maps back to exactly the answer text.
  std::vector<bool> answer_aligned;

  void write_extra(std::ostream& out) const override;
  void read_extra(std::istream& in) override;
};

/// One answer candidate of post-processing.
struct QaCandidate {
  std::string text;
  double score = 0, start_logit = 0, end_logit = 0, probability = 0;
  int64_t byte_start = -1, byte_end = -1;  ///< the span in the context's UTF-8 bytes (-1: null)
};

/// Extractive question answering (SQuAD v1.1 / v2.0; BertForQuestionAnswering): start/end
/// logits per token, long contexts in overlapping windows, n-best post-processing mapped back
/// to the context through token offsets, v2.0 null answers with a threshold; the evaluation
/// also reports the threshold that maximises dev F1 (the BERT paper's tuning).
class QuestionAnsweringAdapter final : public TaskAdapter {
 public:
  explicit QuestionAnsweringAdapter(QuestionAnsweringOptions options) : options_(options) {}
  static std::unique_ptr<TaskAdapter> create(const YamlReader& options, ErrorList& errors);
  /// This task's registry entry (names, HF architectures, metrics, scorer).
  static TaskInfo info();
  /// `bertft score --task question_answering`.
  static ScoreReport score(const ScoreRequest& request);

  std::string type() const override { return "question_answering"; }
  int64_t max_seq_length() const override { return options_.max_seq_length; }
  YAML::Node options() const override { return write_struct(options_); }
  std::shared_ptr<const ExampleSet> read(const data::DataSpec& spec) override;
  std::shared_ptr<FeatureSet> new_feature_set() const override {
    return std::make_shared<QaFeatureSet>();
  }
  std::shared_ptr<FeatureSet> featurize(std::shared_ptr<const ExampleSet> examples,
                                        const tok::Tokenizer& tokenizer,
                                        bool training) const override;
  Batch collate(const FeatureSet& features, const std::vector<int64_t>& indices) const override;
  TaskModel build_model(const BertConfig& config) const override;
  torch::Tensor loss(const torch::Tensor& logits, const Batch& batch) const override;
  nlohmann::json predict(const FeatureSet& features,
                         const std::vector<torch::Tensor>& outputs) const override;
  std::vector<std::pair<std::string, std::string>> prediction_files(
      const FeatureSet& features,
      const std::vector<torch::Tensor>& outputs,
      bool with_logits) const override;
  Evaluation evaluate(const FeatureSet& features,
                      const std::vector<torch::Tensor>& outputs) const override;
  std::string main_metric() const override { return v2() ? "best_f1" : "f1"; }

  bool v2() const { return options_.version_2_with_negative.value_or(false); }
  /// Every example's n-best candidates (best first) and its no-answer score difference
  /// (null score - best span score; v2.0 only, else 0).
  struct Decoded {
    std::vector<std::vector<QaCandidate>> nbest;
    std::vector<double> null_score_diff;
  };
  Decoded decode(const FeatureSet& features, const std::vector<torch::Tensor>& outputs) const;

 private:
  /// The answer per question id: the best span, or "" when (v2.0) the null score wins.
  nlohmann::json answers(const std::vector<data::QaExample>& items, const Decoded& decoded) const;

  QuestionAnsweringOptions options_;
};

}  // namespace bert::tasks
