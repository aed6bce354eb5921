#include "tasks/pretraining/adapter.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "bert/common/error.h"
#include "bert/common/log.h"
#include "bert/common/strings.h"

namespace bert::tasks {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

/// The NSP label of a packed (full-sentence) instance: cross-entropy's ignore index.
constexpr int64_t kNoNspLabel = -100;

}  // namespace

ShardFeatureSet::~ShardFeatureSet() {
  for (const auto& m : maps_)
    if (m.data != nullptr) ::munmap(const_cast<char*>(m.data), m.size);
}

void ShardFeatureSet::open(const std::vector<fs::path>& shards, int64_t limit) {
  for (const auto& path : shards) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) throw DataError(path.string() + ": cannot open");
    struct stat st {};
    ::fstat(fd, &st);
    const auto size = static_cast<size_t>(st.st_size);
    void* data = size > 0 ? ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0) : nullptr;
    ::close(fd);
    if (data == MAP_FAILED) throw DataError(path.string() + ": mmap failed");
    maps_.push_back({static_cast<const char*>(data), size});
    const auto shard = static_cast<uint32_t>(maps_.size() - 1);
    const char* p = maps_.back().data;
    const int64_t count = shard_instance_count(p, size, path);
    size_t offset = kShardHeaderBytes;
    for (int64_t i = 0; i < count; ++i) {
      const size_t bytes = decode_instance(p + offset, size - offset, nullptr);
      if (bytes == 0)
        throw DataError(fmt::format("{}: instance {} is damaged or cut short", path.string(), i));
      uint16_t n = 0;
      std::memcpy(&n, p + offset, 2);
      index_.push_back({shard, n, offset});
      offset += bytes;
    }
  }
  if (limit > 0 && index_.size() > static_cast<size_t>(limit))
    index_.resize(static_cast<size_t>(limit));
  uses.assign(index_.size(), 0);
}

PretrainingInstance ShardFeatureSet::instance(size_t i) const {
  const auto& e = index_.at(i);
  const auto& m = maps_[e.shard];
  PretrainingInstance out;
  decode_instance(m.data + e.offset, m.size - e.offset, &out);
  return out;
}

PretrainingModelImpl::PretrainingModelImpl(const BertConfig& config) {
  if (config.family() != ModelFamily::kBert) {
    bert = register_module(family_base_prefix(config.family()),
                           BertModel(config, /*add_pooling_layer=*/false));
    lm_head.emplace(*this, config, bert->embeddings->word_embeddings->weight);
    return;
  }
  BertForPreTraining inner(config);  // builds the heads with the decoder tied to the embeddings
  bert = register_module("bert", inner->bert);
  cls = register_module("cls", inner->cls);
}

void select_last_layer_rows(Batch& batch) {
  const auto positions = batch.masked_positions.to(torch::kCPU).contiguous();
  const int64_t rows = batch.input_ids.size(0), masked = positions.size(0);
  const auto at = positions.accessor<int64_t, 2>();
  std::vector<int64_t> count(static_cast<size_t>(rows), 0), slots(static_cast<size_t>(masked));
  for (int64_t k = 0; k < masked; ++k) {
    const int64_t row = at[k][0];
    TORCH_CHECK(row >= 0 && row < rows, "masked position ", k, " names row ", row, " of ", rows);
    slots[static_cast<size_t>(k)] = 1 + count[static_cast<size_t>(row)]++;
  }
  const int64_t width = 1 + (rows == 0 ? 0 : *std::max_element(count.begin(), count.end()));
  auto table = torch::zeros({rows, width}, torch::kLong);  // column 0: [CLS]
  auto t = table.accessor<int64_t, 2>();
  for (int64_t k = 0; k < masked; ++k) t[at[k][0]][slots[static_cast<size_t>(k)]] = at[k][1];
  batch.last_layer_rows = table.to(batch.masked_positions.device());
  batch.masked_slots = torch::tensor(slots, torch::kLong).to(batch.masked_positions.device());
}

torch::Tensor PretrainingModelImpl::forward(const Batch& batch) {
  // With the rows chosen in collate, the last layer computes [CLS] (the pooler's) and the masked
  // positions alone; the masked tokens are then read at their columns of those rows.
  const bool rows = batch.last_layer_rows.defined() && batch.masked_slots.defined();
  ForwardOptions options;
  if (rows) options.last_layer_rows = batch.last_layer_rows;
  const auto out =
      bert->forward(batch.input_ids, batch.attention_mask, batch.token_type_ids, options);
  const auto& positions = batch.masked_positions;
  const auto selected = out.last_hidden_state.index(
      {positions.select(1, 0), rows ? batch.masked_slots : positions.select(1, 1)});  // [M, H]
  if (lm_head) return lm_head->forward(selected);                                     // [M, V]
  const auto mlm = cls->predictions(selected);                                        // [M, V]
  const auto nsp = cls->seq_relationship(out.pooler_output);                          // [B, 2]
  const auto padded = torch::nn::functional::pad(
      nsp.to(mlm.scalar_type()), torch::nn::functional::PadFuncOptions({0, mlm.size(1) - 2}));
  return torch::cat({mlm, padded}, 0);
}

TaskInfo PretrainingAdapter::info() {
  TaskInfo info;
  info.name = "pretraining";
  info.description =
      "Pre-training over instance shards (bertft pretrain-data): BERT's MLM + NSP, MLM alone for "
      "RoBERTa, XLM-R, DistilBERT and ELECTRA";
  info.create = &create;
  info.option_docs = [] { return describe_struct<PretrainingOptions>("task"); };
  info.architectures = {"BertForPreTraining", "BertForMaskedLM"};
  info.metrics = {"mlm_accuracy", "mlm_loss", "nsp_accuracy", "nsp_loss"};
  return info;
}

std::unique_ptr<TaskAdapter> PretrainingAdapter::create(const YamlReader& options,
                                                        ErrorList& errors) {
  PretrainingOptions o;
  read_struct(options, o, errors);
  if (o.masked_lm_prob <= 0 || o.masked_lm_prob >= 1)
    errors.add(options.where("masked_lm_prob") + ": must be in (0, 1)");
  if (o.max_predictions_per_seq < 1)
    errors.add(options.where("max_predictions_per_seq") + ": must be >= 1");
  return std::make_unique<PretrainingAdapter>(o);
}

std::shared_ptr<const ExampleSet> PretrainingAdapter::read(const data::DataSpec& spec) {
  auto set = std::make_shared<ShardExamples>();
  set->source = spec.path.string();
  if (fs::is_directory(spec.path)) {
    for (const auto& entry : fs::directory_iterator(spec.path)) {
      const auto name = entry.path().filename().string();
      if (starts_with(name, "instances-") && ends_with(name, ".bin"))
        set->shards.push_back(entry.path());
    }
    std::sort(set->shards.begin(), set->shards.end());
    if (set->shards.empty())
      throw DataError(spec.path.string() +
                      ": no instances-*.bin shards (write them with `bertft pretrain-data`)");
  } else {
    set->shards.push_back(spec.path);
  }
  for (const auto& shard : set->shards) set->instances += InstanceReader(shard).count();
  if (spec.limit > 0) set->instances = std::min<int64_t>(set->instances, spec.limit);
  return set;
}

std::shared_ptr<FeatureSet> PretrainingAdapter::featurize(
    std::shared_ptr<const ExampleSet> examples,
    const tok::Tokenizer& tokenizer,
    bool /*training*/) const {
  const auto* shards = dynamic_cast<const ShardExamples*>(examples.get());
  TORCH_CHECK(shards, "pretraining: examples of another task");
  auto set = std::make_shared<ShardFeatureSet>();
  set->open(shards->shards, shards->instances);
  set->examples = examples;
  set->special = tokenizer.special_tokens();
  set->vocab_size = tokenizer.vocab_size();
  set->pad_id = std::max<int64_t>(0, set->special.pad_id);
  set->labelled = true;
  if (set->special.mask_id < 0) throw ConfigError("pretraining: the tokenizer has no [MASK] token");
  log::info("[task] {}: {} instances in {} shard(s)", examples->source, set->size(),
            shards->shards.size());
  return set;
}

Batch PretrainingAdapter::collate(const FeatureSet& features,
                                  const std::vector<int64_t>& indices) const {
  const auto& set = dynamic_cast<const ShardFeatureSet&>(features);
  int64_t length = 0;
  for (const auto i : indices) length = std::max(length, set.length(static_cast<size_t>(i)));
  const auto rows = static_cast<int64_t>(indices.size());
  std::vector<int64_t> ids(static_cast<size_t>(rows * length), set.pad_id), types(ids.size(), 0),
      mask(ids.size(), 0);
  std::vector<int64_t> positions, labels, nsp;
  Batch batch;
  PretrainingDataOptions masking;
  masking.masked_lm_prob = options_.masked_lm_prob;
  masking.max_predictions_per_seq = options_.max_predictions_per_seq;
  masking.whole_word_mask = options_.whole_word_mask;
  for (int64_t r = 0; r < rows; ++r) {
    const auto index = static_cast<size_t>(indices[static_cast<size_t>(r)]);
    auto instance = set.instance(index);
    if (options_.dynamic_masking) {  // undo the stored masks: the labels are the original tokens
      for (size_t k = 0; k < instance.masked_positions.size(); ++k)
        instance.tokens[static_cast<size_t>(instance.masked_positions[k])] =
            instance.masked_labels[k];
      instance.masked_positions.clear();
      instance.masked_labels.clear();
    }
    if (instance.masked_positions.empty()) {  // unmasked: mask now, freshly each use
      uint32_t use = 0;
      {
        std::lock_guard<std::mutex> lock(set.uses_mutex);
        use = set.uses[index]++;
      }
      std::mt19937_64 rng(static_cast<uint64_t>(options_.seed) * 0x9E3779B97F4A7C15ULL ^
                          (index * 1000003ULL + use));
      mask_instance(instance, masking, set.special, set.vocab_size, rng);
    }
    const auto n = static_cast<int64_t>(instance.tokens.size());
    const auto row = static_cast<size_t>(r * length);
    for (int64_t t = 0; t < n; ++t) {
      ids[row + static_cast<size_t>(t)] = instance.tokens[static_cast<size_t>(t)];
      types[row + static_cast<size_t>(t)] = t >= instance.segment_a_length ? 1 : 0;
      mask[row + static_cast<size_t>(t)] = 1;
    }
    for (size_t k = 0; k < instance.masked_positions.size(); ++k) {
      positions.push_back(r);
      positions.push_back(instance.masked_positions[k]);
      labels.push_back(instance.masked_labels[k]);
    }
    nsp.push_back(instance.packed ? kNoNspLabel : instance.is_random_next ? 1 : 0);
    batch.feature_indices.push_back(static_cast<int64_t>(index));
    batch.lengths.push_back(n);
  }
  batch.input_ids = torch::tensor(ids, torch::kLong).view({rows, length});
  batch.token_type_ids = torch::tensor(types, torch::kLong).view({rows, length});
  batch.attention_mask = torch::tensor(mask, torch::kLong).view({rows, length});
  batch.masked_positions = torch::tensor(positions, torch::kLong).view({-1, 2});
  select_last_layer_rows(batch);
  labels.insert(labels.end(), nsp.begin(), nsp.end());
  batch.labels = torch::tensor(labels, torch::kLong);
  return batch;
}

TaskModel PretrainingAdapter::build_model(const BertConfig& config) const {
  return std::make_shared<PretrainingModelImpl>(config);
}

torch::Tensor PretrainingAdapter::loss(const torch::Tensor& logits, const Batch& batch) const {
  namespace F = torch::nn::functional;
  const int64_t masked = batch.masked_positions.size(0);
  const auto all = logits.to(torch::kFloat);
  const auto mlm = F::cross_entropy(all.narrow(0, 0, masked), batch.labels.narrow(0, 0, masked));
  if (all.size(0) == masked) return mlm;  // a family without NSP
  // Packed (full-sentence) instances have no NSP label: the NSP mean runs over the labelled rows,
  // and a batch of only packed rows adds 0 (the count stays on the device: no host round trip).
  const auto nsp_labels = batch.labels.narrow(0, masked, batch.size());
  const auto nsp_sum = F::cross_entropy(
      all.narrow(0, masked, batch.size()).narrow(1, 0, 2), nsp_labels,
      F::CrossEntropyFuncOptions().ignore_index(kNoNspLabel).reduction(torch::kSum));
  return mlm + nsp_sum / nsp_labels.ne(kNoNspLabel).sum().clamp_min(1);
}

void PretrainingAdapter::configure_export(BertConfig& config) const {
  config.architectures({config.family() == ModelFamily::kBert
                            ? std::string("BertForPreTraining")
                            : family_architecture(config.family(), "BertForMaskedLM")});
}

void PretrainingAdapter::gather(const Batch& batch,
                                const torch::Tensor& logits,
                                std::vector<torch::Tensor>& outputs) const {
  // Per instance: a row [predicted id, label, -log p(label), 0] per masked position, then with
  // NSP [NSP logit 0, NSP logit 1, NSP label, 1].
  const auto all = logits.to(torch::kFloat).cpu().contiguous();
  const auto positions = batch.masked_positions.cpu();
  const auto labels = batch.labels.cpu();
  const int64_t masked = positions.size(0);
  const auto log_probs = torch::log_softmax(all.narrow(0, 0, masked), 1);
  const auto predicted = log_probs.argmax(1);
  const auto pos = positions.accessor<int64_t, 2>();
  const auto lab = labels.accessor<int64_t, 1>();
  const auto pred = predicted.accessor<int64_t, 1>();
  const auto lp = log_probs.accessor<float, 2>();
  const auto a = all.accessor<float, 2>();
  std::vector<std::vector<float>> rows(static_cast<size_t>(batch.size()));
  for (int64_t k = 0; k < masked; ++k) {
    auto& row = rows[static_cast<size_t>(pos[k][0])];
    row.push_back(static_cast<float>(pred[k]));
    row.push_back(static_cast<float>(lab[k]));
    row.push_back(-lp[k][lab[k]]);
    row.push_back(0.0F);
  }
  const bool nsp = all.size(0) > masked;
  for (int64_t r = 0; r < batch.size(); ++r) {
    auto& row = rows[static_cast<size_t>(r)];
    if (nsp && lab[masked + r] != kNoNspLabel)
      row.insert(row.end(),
                 {a[masked + r][0], a[masked + r][1], static_cast<float>(lab[masked + r]), 1.0F});
    outputs[static_cast<size_t>(batch.feature_indices[static_cast<size_t>(r)])] =
        torch::tensor(row).view({-1, 4});
  }
}

json PretrainingAdapter::predict(const FeatureSet& features,
                                 const std::vector<torch::Tensor>& outputs) const {
  json out = json::array();
  for (size_t i = 0; i < features.size(); ++i) {
    const auto o = outputs[i].accessor<float, 2>();
    json record = {{"instance", i}, {"masked_predictions", json::array()}};
    for (int64_t k = 0; k < outputs[i].size(0); ++k) {
      if (o[k][3] == 0) {
        record["masked_predictions"].push_back(static_cast<int64_t>(o[k][0]));
      } else {
        const double top = std::max(o[k][0], o[k][1]);
        const double e0 = std::exp(o[k][0] - top), e1 = std::exp(o[k][1] - top);
        record["not_next_probability"] = e1 / (e0 + e1);
      }
    }
    out.push_back(std::move(record));
  }
  return out;
}

Evaluation PretrainingAdapter::evaluate(const FeatureSet& features,
                                        const std::vector<torch::Tensor>& outputs) const {
  Evaluation ev;
  ev.main_metric = main_metric();
  double mlm_nll = 0, nsp_nll = 0;
  int64_t masked = 0, mlm_correct = 0, nsp_rows = 0, nsp_correct = 0;
  for (size_t i = 0; i < features.size(); ++i) {
    const auto o = outputs[i].accessor<float, 2>();
    for (int64_t k = 0; k < outputs[i].size(0); ++k) {
      if (o[k][3] == 0) {
        mlm_correct += o[k][0] == o[k][1];
        mlm_nll += o[k][2];
        ++masked;
        continue;
      }
      const double l0 = o[k][0], l1 = o[k][1];
      const auto label = static_cast<int64_t>(o[k][2]);
      const double top = std::max(l0, l1);
      const double log_z = top + std::log(std::exp(l0 - top) + std::exp(l1 - top));
      nsp_nll -= (label == 0 ? l0 : l1) - log_z;
      nsp_correct += (l1 > l0 ? 1 : 0) == label;
      ++nsp_rows;
    }
  }
  ev.metrics["mlm_accuracy"] =
      masked > 0 ? static_cast<double>(mlm_correct) / static_cast<double>(masked) : 0.0;
  ev.metrics["mlm_loss"] = masked > 0 ? mlm_nll / static_cast<double>(masked) : 0.0;
  if (nsp_rows > 0) {
    ev.metrics["nsp_accuracy"] = static_cast<double>(nsp_correct) / static_cast<double>(nsp_rows);
    ev.metrics["nsp_loss"] = nsp_nll / static_cast<double>(nsp_rows);
  }
  ev.predictions = json::array();
  return ev;
}

}  // namespace bert::tasks
