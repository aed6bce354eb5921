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

  template <class Self, class Visitor>
  static void visit(Self& self, Visitor&& field) {
    field("max_seq_length", self.max_seq_length, "Tokens per input, [CLS] and [SEP] included");
    field("num_labels", self.num_labels, "0 = from the data; 1 = regression");
    field("labels", self.labels, "Label names in id order (default: from the data)");
    field("truncation", self.truncation, "longest_first | only_first | only_second");
    field("long_inputs", self.long_inputs, "truncate | windows");
    field("window_stride", self.window_stride,
          "Overlap in tokens between windows (long_inputs: windows)");
    field("main_metric", self.main_metric, "accuracy | f1 | macro_f1 | mcc | pearson | spearman");
    field("positive_label", self.positive_label, "Positive class for binary F1");
  }
};

/// Single-sentence and sentence-pair classification or regression (SST-2, CoLA, MRPC, STS-B,
/// QQP, MNLI, QNLI, RTE, ...): [CLS] -> pooler -> dropout -> linear, cross-entropy or MSE.
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
  bool supports_label_smoothing() const override { return !regression(); }
  YAML::Node options() const override;
  std::shared_ptr<const ExampleSet> read(const data::DataSpec& spec) override;
  void fit_labels(const ExampleSet& train) override;
  std::vector<std::string> labels() const override { return labels_.names(); }
  void set_labels(const std::vector<std::string>& labels) override;
  /// Regression exports as HF does: one label "LABEL_0", problem_type "regression".
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
