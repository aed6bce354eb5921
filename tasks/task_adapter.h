#pragma once

#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bert/model/bert_config.h"
#include "bert/tokenizer/tokenizer.h"
#include "data/data_spec.h"
#include "tasks/common/label_map.h"
#include "tasks/metrics/metric_info.h"

/// The fine-tuning layer's contract: one TaskAdapter per task family, chosen by name from the
/// recipe (`task.type`), owning everything task-specific so the Trainer stays generic.
namespace bert::tasks {

/// Label value skipped by the losses (HF / PyTorch convention).
constexpr int64_t kIgnoreIndex = -100;

/// One model input (after tokenisation) and its training target.
struct Feature {
  int64_t example = 0;                               ///< index of the example it came from
  std::vector<std::vector<int64_t>> input_ids;       ///< [rows][tokens]; rows = 1, or choices
  std::vector<std::vector<int64_t>> token_type_ids;  ///< same shape
  std::vector<int64_t> token_labels;  ///< per token of row 0 (token tasks; kIgnoreIndex = none)
  int64_t label = kIgnoreIndex;       ///< class or choice index
  std::vector<int64_t> label_set;     ///< multi-label classification: the gold labels' ids
  float target = 0.0f;                ///< regression target
  int64_t start_position = 0, end_position = 0;  ///< answer span (QA); 0/0 = [CLS] = no answer

  /// Longest row (what the batch pads to).
  int64_t length() const;
};

/// The examples of one split as read by the adapter (each adapter stores its own type).
class ExampleSet {
 public:
  virtual ~ExampleSet() = default;
  virtual size_t size() const = 0;
  std::string source;  ///< file it was read from
};

/// ExampleSet holding a vector of one raw example type.
template <class E>
class Examples final : public ExampleSet {
 public:
  size_t size() const override { return items.size(); }
  std::vector<E> items;
};

/// The raw examples held by `set`; TORCH_CHECK naming `task` if they are of another type.
template <class E>
const std::vector<E>& items_of(const ExampleSet& set, const char* task) {
  const auto* examples = dynamic_cast<const Examples<E>*>(&set);
  TORCH_CHECK(examples, task, ": examples of another task");
  return examples->items;
}

/// Features of one split plus what the adapter needs to map model outputs back to examples.
/// Adapters derive from it to keep their own maps (QA windows, word positions).
class FeatureSet {
 public:
  virtual ~FeatureSet() = default;
  std::vector<Feature> features;
  std::shared_ptr<const ExampleSet> examples;
  int64_t pad_id = 0;
  bool labelled = false;  ///< every example had a gold label (evaluate() is possible)
  /// Why labelled examples were left unscored (labelled false): with unknown labels unscored,
  /// the first gold label the model does not have, as "<where>: label 'x' is not ...".
  std::string unscored;
  /// Examples without a gold label (each makes labelled false), and the first of them as
  /// "<where>: example '<id>'" (not kept by the feature cache).
  int64_t num_unlabelled = 0;
  std::string first_unlabelled;

  /// Number of features and the length of feature `i` (what batching needs). A derived set
  /// that keeps its features outside memory (pre-training shards) overrides both.
  virtual size_t size() const { return features.size(); }
  virtual int64_t length(size_t i) const { return features[i].length(); }

  /// What a derived set adds to the base, written / read by the feature cache
  /// (tasks/common/feature_cache.h). read_extra throws DataError on a short or bad stream.
  virtual void write_extra(std::ostream& out) const {}
  virtual void read_extra(std::istream& in) {}
};

/// A padded batch. input_ids / attention_mask / token_type_ids are [batch, seq] int64, or
/// [batch, choices, seq] for multiple choice. `labels` is [batch] int64 (classes, choices),
/// [batch] float (regression), [batch, labels] float (multi-label: 1 for each gold label),
/// [batch, seq] int64 (token tags) or [batch, 2] int64 (QA start, end); undefined when the
/// features have no targets.
struct Batch {
  torch::Tensor input_ids, attention_mask, token_type_ids, labels;
  /// Pre-training: [masked, 2] int64 (row, position) of the masked tokens; else undefined.
  torch::Tensor masked_positions;
  /// Pre-training, optional (select_last_layer_rows): [rows, 1 + most masked in a row] int64,
  /// each row's position 0 ([CLS]) then its masked positions (the rest 0), and [masked] int64,
  /// each masked token's column there. The last layer then computes those positions alone.
  torch::Tensor last_layer_rows, masked_slots;
  std::vector<int64_t> feature_indices;  ///< which features, in row order
  std::vector<int64_t> lengths;          ///< real (unpadded) length of each row 0

  int64_t size() const { return static_cast<int64_t>(feature_indices.size()); }
  /// The same batch with every tensor on `device`.
  Batch to(const torch::Device& device) const;
};

/// Metrics of one evaluation, the name of the one that selects checkpoints, and predictions.
struct Evaluation {
  std::map<std::string, double> metrics;
  std::string main_metric;
  nlohmann::json predictions;  ///< per example, in the dataset's official format
  double main() const;
};

/// Encoder + task head. forward() returns logits: [batch, labels], [batch, choices],
/// [batch, seq, labels] or [batch, seq, 2] (start, end) depending on the task.
class TaskModelImpl : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const Batch& batch) = 0;
};
using TaskModel = std::shared_ptr<TaskModelImpl>;

/// What one task family provides. Adapters are configured once (options from the recipe),
/// then read data, fix labels from the training split, featurize, build the model, compute the
/// loss and turn outputs back into predictions and metrics. featurize(), collate(), loss() and
/// evaluate() are const and thread-safe.
class TaskAdapter {
 public:
  virtual ~TaskAdapter() = default;

  /// The registry name (`task.type`).
  virtual std::string type() const = 0;
  /// The HF class this task exports as ("BertForSequenceClassification", ...). Default: the
  /// first of the task's `architectures` in TaskRegistry::global().
  virtual std::string architecture() const;
  /// The task options as given (after defaults), for resolved recipes and export metadata.
  virtual YAML::Node options() const = 0;
  /// The longest input (tokens per row) featurize() builds, 0 when the task sets none; a
  /// recipe checks it against the model's max_position_embeddings.
  virtual int64_t max_seq_length() const { return 0; }

  /// Reads one split. May record facts of the dataset (GLUE task, SQuAD version) that later
  /// steps use as defaults. Throws DataError / ConfigError.
  virtual std::shared_ptr<const ExampleSet> read(const data::DataSpec& spec) = 0;
  /// Fixes the label set from the training split (no-op for tasks without labels).
  virtual void fit_labels(const ExampleSet& train) {}
  /// Label names by id (config.json `id2label`); empty for QA, multiple choice, regression.
  virtual std::vector<std::string> labels() const { return {}; }
  /// Restores labels from a fine-tuned checkpoint's config.
  virtual void set_labels(const std::vector<std::string>& labels) {}
  /// Writes what HF's config.json needs to rebuild this task's model: `architectures` and, for
  /// labelled tasks, id2label (label2id follows) and problem_type. Default: architecture() and
  /// labels().
  virtual void configure_export(BertConfig& config) const;

  /// Tokenises examples. With `training`, every example must have a target (DataError naming
  /// it otherwise); evaluation features of labelled data carry targets too. A label unseen in
  /// training is a DataError with its name and file:line, unless unknown labels are unscored.
  virtual std::shared_ptr<FeatureSet> featurize(std::shared_ptr<const ExampleSet> examples,
                                                const tok::Tokenizer& tokenizer,
                                                bool training) const = 0;
  /// False when featurize() output must not go through the feature cache (it is cheap or lives
  /// on disk already).
  virtual bool cacheable_features() const { return true; }
  /// An empty feature set of the type featurize() returns (the feature cache fills it).
  virtual std::shared_ptr<FeatureSet> new_feature_set() const {
    return std::make_shared<FeatureSet>();
  }
  /// Pads `indices` of `features` to the longest of them (dynamic padding) into one batch.
  virtual Batch collate(const FeatureSet& features, const std::vector<int64_t>& indices) const;

  /// A fresh model: encoder (randomly initialised; load weights afterwards) plus this task's
  /// head under HF's names, head initialised as HF does.
  virtual TaskModel build_model(const BertConfig& config) const = 0;
  /// Scalar loss of a batch's logits, as the matching HF model computes it.
  virtual torch::Tensor loss(const torch::Tensor& logits, const Batch& batch) const = 0;
  /// True when loss() is a cross-entropy over the last dimension of the logits with `labels`
  /// of the leading dimensions (kIgnoreIndex skipped), so that the Trainer may smooth it
  /// (training.label_smoothing, HF's LabelSmoother).
  virtual bool supports_label_smoothing() const { return false; }
  /// Stores each row of `logits` (CPU, float32, trimmed to the row's real length for per-token
  /// outputs) at outputs[feature index]. `outputs` must have features.size() entries.
  virtual void gather(const Batch& batch,
                      const torch::Tensor& logits,
                      std::vector<torch::Tensor>& outputs) const;

  /// Predictions per example from per-feature outputs (official format of the dataset).
  virtual nlohmann::json predict(const FeatureSet& features,
                                 const std::vector<torch::Tensor>& outputs) const = 0;
  /// The prediction files in the format `bertft score --task <type>` reads, as (suffix, text):
  /// suffix "" is the main file, others go beside it (the main file's name without its
  /// extension + suffix). Default: predict() as JSON lines (a list) or one JSON object.
  /// `with_logits` adds each example's raw output scores where the task has them per example
  /// (classification, multiple choice); others throw ConfigError.
  virtual std::vector<std::pair<std::string, std::string>> prediction_files(
      const FeatureSet& features,
      const std::vector<torch::Tensor>& outputs,
      bool with_logits) const;
  /// Predictions plus the task's official metrics (needs labelled features).
  virtual Evaluation evaluate(const FeatureSet& features,
                              const std::vector<torch::Tensor>& outputs) const = 0;
  /// Name of the metric that selects the best checkpoint.
  virtual std::string main_metric() const = 0;
  /// Whether a larger or a smaller main_metric() is better. Default: the metric table's
  /// direction (tasks/metrics/metric_info.h).
  virtual metrics::MetricGoal main_metric_goal() const;

  /// Prediction (`bertft predict --data`): a gold label the model does not have (a file
  /// labelled "0"/"1" for a model of "NEGATIVE"/"POSITIVE") leaves the features unlabelled,
  /// FeatureSet::unscored saying why, instead of failing the predictions. Off by default: for
  /// training and evaluation such a label is an error.
  void set_unknown_labels_unscored(bool on) { unknown_labels_unscored_ = on; }

 protected:
  bool unknown_labels_unscored_ = false;
  /// The label id of `label`, or where unknown labels are unscored and the model lacks it,
  /// nullopt with `set` marked unlabelled (the first such label as its reason).
  std::optional<int64_t> gold_label_id(const LabelMap& labels,
                                       const std::string& label,
                                       const std::string& where,
                                       FeatureSet& set) const;
  /// Marks `set` unlabelled for an example without a gold label, counting it and keeping the
  /// first one's place for the messages.
  static void note_unlabelled(FeatureSet& set, const std::string& where, const std::string& id);
  /// The common start of evaluate(): checks that `features` are labelled and returns an
  /// Evaluation holding `predictions` (what predict() gives) and the main metric's name.
  Evaluation start_evaluation(const FeatureSet& features, nlohmann::json predictions) const;
};

/// `set` as the adapter's own FeatureSet type F; TORCH_CHECK naming `task` otherwise.
template <class F>
const F& features_as(const FeatureSet& set, const char* task) {
  const auto* features = dynamic_cast<const F*>(&set);
  TORCH_CHECK(features, task, ": features of another task");
  return *features;
}

/// Predictions as a file: JSON lines for a list, else one indented JSON object.
std::string predictions_text(const nlohmann::json& predictions);

}  // namespace bert::tasks
