#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bert/common/yaml.h"
#include "data/example.h"
#include "data/glue.h"
#include "tasks/common/label_map.h"
#include "tasks/common/sequence.h"
#include "tasks/registry.h"
#include "tasks/task_adapter.h"

namespace bert::tasks {

/// How inputs longer than max_seq_length are handled (never silently).
enum class LongInputs {
  kTruncate,  ///< cut to max_seq_length (truncation strategy); the count is logged
  kWindows,   ///< overlapping windows; an example's logits are averaged over its windows
};

struct SequenceClassificationOptions {
  int64_t max_seq_length = 128;
  /// 0 = from the data; 1 = regression (MSE loss, as HF with num_labels 1).
  int64_t num_labels = 0;
  /// Fixed label order (default: GLUE's order for GLUE tasks, else sorted training labels).
  std::vector<std::string> labels;
  tok::Truncation truncation = tok::Truncation::kLongestFirst;
  LongInputs long_inputs = LongInputs::kTruncate;
  /// Tokens shared by consecutive windows (long_inputs: windows).
  int64_t window_stride = 64;
  /// Metric selecting the best checkpoint: accuracy, f1, macro_f1, mcc (classification);
  /// pearson, spearman (regression). Empty = the GLUE task's official one, else accuracy /
  /// spearman.
  std::string main_metric;
  /// The positive class of binary F1 (default "1" if it is a label, else the second label).
  std::string positive_label;
  /// Several labels per example (HF's problem_type multi_label_classification): a sigmoid per
  /// label, binary cross-entropy, a label predicted where its probability exceeds `threshold`.
  /// A label is a JSON list (JSONL's ["a", "b"], or integers: ids of `labels`) or a cell of
  /// names joined by `label_separator`; an empty one is an example with no label.
  bool multi_label = false;
  std::string label_separator = ",";
  double threshold = 0.5;

  template <class Self, class Visitor>
  static void visit(Self& self, Visitor&& field) {
    field("max_seq_length", self.max_seq_length, "Tokens per input, [CLS] and [SEP] included");
    field("num_labels", self.num_labels, "0 = from the data; 1 = regression");
    field("labels", self.labels, "Label names in id order (default: from the data)");
    field("truncation", self.truncation, "longest_first | only_first | only_second");
    field("long_inputs", self.long_inputs, "truncate | windows");
    field("window_stride", self.window_stride,
          "Overlap in tokens between windows (long_inputs: windows)");
    field("main_metric", self.main_metric,
          "accuracy | f1 | macro_f1 | mcc | pearson | spearman | mse; multi_label: micro_f1 | "
          "macro_f1 | accuracy");
    field("positive_label", self.positive_label, "Positive class for binary F1");
    field("multi_label", self.multi_label,
          "Several labels per example: a sigmoid per label (HF's multi_label_classification)");
    field("label_separator", self.label_separator,
          "multi_label: what joins a TSV/CSV label cell's labels (a JSON list needs none)");
    field("threshold", self.threshold,
          "multi_label: a label is predicted where its probability exceeds this");
  }
};

/// Single-sentence and sentence-pair classification or regression (SST-2, CoLA, MRPC, STS-B,
/// QQP, MNLI, QNLI, RTE, ...): [CLS] -> pooler -> dropout -> linear, cross-entropy or MSE; or
/// multi-label classification, binary cross-entropy over a sigmoid per label.
class SequenceClassificationAdapter final : public TaskAdapter {
 public:
  explicit SequenceClassificationAdapter(SequenceClassificationOptions options);
  static std::unique_ptr<TaskAdapter> create(const YamlReader& options, ErrorList& errors);
  /// This task's registry entry (names, HF architectures, metrics, scorer).
  static TaskInfo info();
  /// `bertft score --task sequence_classification`.
  static ScoreReport score(const ScoreRequest& request);

  std::string type() const override { return "sequence_classification"; }
  int64_t max_seq_length() const override { return options_.max_seq_length; }
  bool supports_label_smoothing() const override { return !regression() && !multi_label(); }
  YAML::Node options() const override;
  std::shared_ptr<const ExampleSet> read(const data::DataSpec& spec) override;
  void fit_labels(const ExampleSet& train) override;
  std::vector<std::string> labels() const override { return labels_.names(); }
  void set_labels(const std::vector<std::string>& labels) override;
  /// Regression exports as HF does: one label "LABEL_0", problem_type "regression"; multi-label
  /// as "multi_label_classification".
  void configure_export(BertConfig& config) const override;
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
  std::string main_metric() const override;

  bool regression() const { return options_.num_labels == 1; }
  bool multi_label() const { return options_.multi_label; }

  /// Whether a multi-label example's `label` is written as a JSON list (its first character
  /// past spaces is '['), not as names joined by label_separator.
  static bool is_label_list(const std::string& label);
  /// A multi-label example's labels as written (`label`: a JSON list, or names joined by
  /// label_separator), in order, without repeats; DataError naming `where` for a malformed list.
  std::vector<std::string> split_label_set(const std::string& label,
                                           const std::string& where) const;
  /// A multi-label list's item as a label name: itself, or the name of the id it is (integers
  /// of a JSON list, where the labels are names).
  std::string label_name(const std::string& label) const;

 private:
  /// Per example: mean of its windows' logits [labels].
  std::vector<torch::Tensor> example_logits(const FeatureSet& features,
                                            const std::vector<torch::Tensor>& outputs) const;

  SequenceClassificationOptions options_;
  std::optional<data::GlueTask> glue_;
  LabelMap labels_;
};

}  // namespace bert::tasks

namespace bert {
template <>
struct EnumNames<tasks::LongInputs> {
  static const std::vector<std::pair<const char*, tasks::LongInputs>>& get();
};
}  // namespace bert
