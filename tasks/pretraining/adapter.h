#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bert/model/pretraining.h"
#include "tasks/pretraining/instances.h"
#include "tasks/registry.h"
#include "tasks/task_adapter.h"

namespace bert::tasks {

/// Options of the `pretraining` task (masking on the fly, for shards written unmasked).
struct PretrainingOptions {
  /// Mask on the fly, freshly each time an instance is used (RoBERTa's dynamic masking), even
  /// when the shards hold static masks (their original tokens are restored first). Shards
  /// written with --dynamic-masking are always masked on the fly.
  bool dynamic_masking = false;
  double masked_lm_prob = 0.15;
  int64_t max_predictions_per_seq = 20;
  bool whole_word_mask = false;
  /// Dynamic masks draw from (seed, instance, times the instance was used in this process); a
  /// resumed run starts those counts again, so bit-for-bit resume holds for static masks only.
  int64_t seed = 12345;

  template <class Self, class Visitor>
  static void visit(Self& self, Visitor&& field) {
    field("dynamic_masking", self.dynamic_masking,
          "Mask on the fly each time (ignore the shards' static masks)");
    field("masked_lm_prob", self.masked_lm_prob, "Dynamic masking: share of tokens to predict");
    field("max_predictions_per_seq", self.max_predictions_per_seq,
          "Dynamic masking: most masked positions");
    field("whole_word_mask", self.whole_word_mask, "Dynamic masking: mask whole words");
    field("seed", self.seed, "Dynamic masking seed");
  }
};

/// The instance shards of one split (a shard file, or every instances-*.bin of a directory).
class ShardExamples final : public ExampleSet {
 public:
  std::vector<std::filesystem::path> shards;
  int64_t instances = 0;
  size_t size() const override { return static_cast<size_t>(instances); }
};

/// Pre-training features that stay in the shard files: the files are memory-mapped and an index
/// of (shard, byte offset, length) per instance is all that is held in memory, so the corpus
/// is streamed from disk (the page cache) as batches need it.
class ShardFeatureSet final : public FeatureSet {
 public:
  ShardFeatureSet() = default;
  ~ShardFeatureSet() override;
  ShardFeatureSet(const ShardFeatureSet&) = delete;
  ShardFeatureSet& operator=(const ShardFeatureSet&) = delete;

  /// Maps `shards` and indexes their first `limit` instances (all when limit <= 0). Throws
  /// DataError naming a damaged file.
  void open(const std::vector<std::filesystem::path>& shards, int64_t limit = 0);
  size_t size() const override { return index_.size(); }
  int64_t length(size_t i) const override { return index_[i].length; }
  /// Instance `i`, decoded from its shard.
  PretrainingInstance instance(size_t i) const;

  tok::SpecialTokens special;
  int64_t vocab_size = 0;
  /// Times each instance was collated (dynamic masking draws fresh masks each time).
  mutable std::vector<uint32_t> uses;
  mutable std::mutex uses_mutex;

 private:
  struct Entry {
    uint32_t shard;
    uint16_t length;
    uint64_t offset;
  };
  struct Mapping {
    const char* data = nullptr;
    size_t size = 0;
  };
  std::vector<Mapping> maps_;
  std::vector<Entry> index_;
};

/// The pre-training model of a family, state-dict keys exactly HF's: BertForPreTraining for BERT
/// ("bert.*", "cls.*"), XxxForMaskedLM for the others (the encoder under its prefix, no pooler,
/// the MLM head of MaskedLMHead; they have no NSP head). forward() returns one tensor of rows:
/// the MLM logits [masked, vocab] of the masked positions (Batch::masked_positions, in order),
/// then, for BERT, each row's NSP logits in columns 0-1 (the rest 0). The MLM decoder runs only
/// on masked positions, as Google's implementation does; with Batch::last_layer_rows (collate
/// sets them) the last encoder layer too computes only [CLS] and the masked positions.
class PretrainingModelImpl : public TaskModelImpl {
 public:
  explicit PretrainingModelImpl(const BertConfig& config);
  torch::Tensor forward(const Batch& batch) override;

  BertModel bert{nullptr};
  BertPreTrainingHeads cls{nullptr};    ///< BERT
  std::optional<MaskedLMHead> lm_head;  ///< the other families
};

/// Sets batch.last_layer_rows and batch.masked_slots from batch.masked_positions (on the CPU:
/// collate calls it, so that a GPU step needs no host round trip).
void select_last_layer_rows(Batch& batch);

/// Pre-training over instance shards (`bertft pretrain-data`), through the same Trainer,
/// checkpoints, logs and export as fine-tuning: BERT's MLM + NSP (loss as HF
/// BertForPreTraining's: MLM cross-entropy over masked positions + NSP cross-entropy), and MLM
/// alone for the families without an NSP head (RoBERTa, XLM-R, DistilBERT, ELECTRA's generator
/// head; the instances' sentence pairs are their inputs, the NSP labels unused). Metrics:
/// mlm_accuracy (main), mlm_loss, and with NSP nsp_accuracy, nsp_loss. Instances stored unmasked
/// are masked on the fly. Exports as BertForPreTraining / XxxForMaskedLM.
class PretrainingAdapter final : public TaskAdapter {
 public:
  explicit PretrainingAdapter(PretrainingOptions options) : options_(std::move(options)) {}
  static std::unique_ptr<TaskAdapter> create(const YamlReader& options, ErrorList& errors);
  /// This task's registry entry (names, HF architectures, metrics, scorer).
  static TaskInfo info();

  std::string type() const override { return "pretraining"; }
  YAML::Node options() const override { return write_struct(options_); }
  std::shared_ptr<const ExampleSet> read(const data::DataSpec& spec) override;
  std::shared_ptr<FeatureSet> featurize(std::shared_ptr<const ExampleSet> examples,
                                        const tok::Tokenizer& tokenizer,
                                        bool training) const override;
  /// Shards are their own cache.
  bool cacheable_features() const override { return false; }
  Batch collate(const FeatureSet& features, const std::vector<int64_t>& indices) const override;
  TaskModel build_model(const BertConfig& config) const override;
  torch::Tensor loss(const torch::Tensor& logits, const Batch& batch) const override;
  void gather(const Batch& batch,
              const torch::Tensor& logits,
              std::vector<torch::Tensor>& outputs) const override;
  nlohmann::json predict(const FeatureSet& features,
                         const std::vector<torch::Tensor>& outputs) const override;
  Evaluation evaluate(const FeatureSet& features,
                      const std::vector<torch::Tensor>& outputs) const override;
  std::string main_metric() const override { return "mlm_accuracy"; }
  void configure_export(BertConfig& config) const override;

 private:
  PretrainingOptions options_;
};

}  // namespace bert::tasks
