#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bert/common/yaml.h"
#include "data/example.h"
#include "tasks/common/label_map.h"
#include "tasks/metrics/span_f1.h"
#include "tasks/registry.h"
#include "tasks/task_adapter.h"

namespace bert::tasks {

struct TokenClassificationOptions {
  int64_t max_seq_length = 128;
  /// Label every sub-token of a word (B- becomes I- after the first), not only the first.
  bool label_all_tokens = false;
  /// The tag scheme of the data files (and of the predictions written).
  metrics::TagScheme tag_scheme = metrics::TagScheme::kIob2;
  /// Scheme the model is trained in (default: tag_scheme); predictions are converted back.
  std::optional<metrics::TagScheme> train_scheme;
  /// Tokens shared by consecutive windows of a sentence longer than max_seq_length.
  int64_t window_stride = 32;
  /// Fill each input with the neighbouring sentences of the same document as unlabelled
  /// context (the BERT paper's CoNLL-2003 setting).
  bool document_context = false;
  /// Count only well-formed entities of tag_scheme (seqeval mode="strict"); default conlleval.
  bool strict = false;
  /// Fixed label order (default: sorted training tags).
  std::vector<std::string> labels;

  template <class Self, class Visitor>
  static void visit(Self& self, Visitor&& field) {
    field("max_seq_length", self.max_seq_length, "Tokens per input, [CLS] and [SEP] included");
    field("label_all_tokens", self.label_all_tokens, "Label every sub-token, not only the first");
    field("tag_scheme", self.tag_scheme, "iob1 | iob2 | iobes (the data's scheme)");
    field("train_scheme", self.train_scheme,
          "iob1 | iob2 | iobes to train in (default: tag_scheme)");
    field("window_stride", self.window_stride,
          "Overlap in tokens between windows of a long sentence");
    field("document_context", self.document_context, "Add neighbouring sentences as context");
    field("strict", self.strict, "Entity scores counting only well-formed entities");
    field("labels", self.labels, "Tag names in id order (default: sorted training tags)");
  }
};

/// Features of tagged sentences: per feature, the (token position, sub-token index in its
/// sentence) pairs of the sub-tokens read from it (each sub-token is read once, in the window
/// where it has the most context), and per sentence the word index of each sub-token.
class TokenFeatureSet final : public FeatureSet {
 public:
  std::vector<std::vector<std::pair<int64_t, int64_t>>> token_positions;
  std::vector<std::vector<int64_t>> token_words;
  size_t words_without_tokens = 0;

  void write_extra(std::ostream& out) const override;
  void read_extra(std::istream& in) override;
};

/// One sentence's sub-tokens, in order, as the model labels them.
struct SubTokenScores {
  std::vector<int64_t> words;   ///< each sub-token's word index
  torch::Tensor probabilities;  ///< [sub-tokens, labels] float: the softmax of its logits
};

/// Token tagging (CoNLL-2003 NER; BertForTokenClassification): label on the first sub-token of
/// each word (kIgnoreIndex elsewhere), long sentences in overlapping windows so no word loses
/// its label, predictions mapped back to words, entity-level P/R/F1 (conlleval / seqeval).
class TokenClassificationAdapter final : public TaskAdapter {
 public:
  explicit TokenClassificationAdapter(TokenClassificationOptions options);
  static std::unique_ptr<TaskAdapter> create(const YamlReader& options, ErrorList& errors);
  /// This task's registry entry (names, HF architectures, metrics, scorer).
  static TaskInfo info();
  /// `bertft score --task token_classification`.
  static ScoreReport score(const ScoreRequest& request);

  std::string type() const override { return "token_classification"; }
  int64_t max_seq_length() const override { return options_.max_seq_length; }
  bool supports_label_smoothing() const override { return true; }
  YAML::Node options() const override { return write_struct(options_); }
  std::shared_ptr<const ExampleSet> read(const data::DataSpec& spec) override;
  std::shared_ptr<FeatureSet> new_feature_set() const override {
    return std::make_shared<TokenFeatureSet>();
  }
  void fit_labels(const ExampleSet& train) override;
  std::vector<std::string> labels() const override { return labels_.names(); }
  void set_labels(const std::vector<std::string>& labels) override { labels_ = LabelMap(labels); }
  std::shared_ptr<FeatureSet> featurize(std::shared_ptr<const ExampleSet> examples,
                                        const tok::Tokenizer& tokenizer,
                                        bool training) const override;
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
  std::string main_metric() const override { return "f1"; }

  /// Predicted tags per sentence, in tag_scheme: each word's is the label at its first
  /// sub-token ('O', or the first label, for a word without sub-tokens).
  std::vector<std::vector<std::string>> predict_tags(
      const FeatureSet& features, const std::vector<torch::Tensor>& outputs) const;
  /// Each sentence's sub-tokens with their probabilities over labels() (the labels the model was
  /// trained in, train_scheme), every one read in the window where it has the most context:
  /// what HF's token-classification pipeline aggregates (tasks/token_classification/entities.h).
  std::vector<SubTokenScores> subtoken_scores(const FeatureSet& features,
                                              const std::vector<torch::Tensor>& outputs) const;

 private:
  metrics::TagScheme train_scheme() const {
    return options_.train_scheme.value_or(options_.tag_scheme);
  }
  /// The sentence's tags converted to train_scheme.
  std::vector<std::string> training_tags(const data::TaggedSentence& s) const;

  TokenClassificationOptions options_;
  LabelMap labels_;
};

}  // namespace bert::tasks
