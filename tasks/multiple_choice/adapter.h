#pragma once

#include <memory>
#include <string>

#include "bert/common/yaml.h"
#include "data/example.h"
#include "tasks/common/sequence.h"
#include "tasks/registry.h"
#include "tasks/task_adapter.h"

namespace bert::tasks {

struct MultipleChoiceOptions {
  int64_t max_seq_length = 128;
  tok::Truncation truncation = tok::Truncation::kLongestFirst;

  template <class Self, class Visitor>
  static void visit(Self& self, Visitor&& field) {
    field("max_seq_length", self.max_seq_length, "Tokens per (context, choice) input");
    field("truncation", self.truncation, "longest_first | only_first | only_second");
  }
};

/// Multiple choice (SWAG): every choice is encoded as the pair (context, choice); the pooled
/// [CLS] of each goes through a linear layer to one score; softmax over choices
/// (BertForMultipleChoice). Metric: accuracy.
class MultipleChoiceAdapter final : public TaskAdapter {
 public:
  explicit MultipleChoiceAdapter(MultipleChoiceOptions options) : options_(options) {}
  static std::unique_ptr<TaskAdapter> create(const YamlReader& options, ErrorList& errors);
  /// This task's registry entry (names, HF architectures, metrics, scorer).
  static TaskInfo info();
  /// `bertft score --task multiple_choice`.
  static ScoreReport score(const ScoreRequest& request);

  std::string type() const override { return "multiple_choice"; }
  int64_t max_seq_length() const override { return options_.max_seq_length; }
  bool supports_label_smoothing() const override { return true; }
  YAML::Node options() const override { return write_struct(options_); }
  std::shared_ptr<const ExampleSet> read(const data::DataSpec& spec) override;
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
  std::string main_metric() const override { return "accuracy"; }

 private:
  MultipleChoiceOptions options_;
};

}  // namespace bert::tasks
