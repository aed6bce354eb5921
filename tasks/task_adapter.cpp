#include "tasks/task_adapter.h"

#include <fmt/format.h>

#include <algorithm>

#include "bert/common/error.h"
#include "tasks/registry.h"

namespace bert::tasks {

int64_t Feature::length() const {
  size_t n = 0;
  for (const auto& row : input_ids) n = std::max(n, row.size());
  return static_cast<int64_t>(n);
}

Batch Batch::to(const torch::Device& device) const {
  Batch b = *this;
  const auto move = [&](torch::Tensor& t) {
    if (t.defined()) t = t.to(device, /*non_blocking=*/true);
  };
  move(b.input_ids);
  move(b.attention_mask);
  move(b.token_type_ids);
  move(b.labels);
  move(b.masked_positions);
  move(b.last_layer_rows);
  move(b.masked_slots);
  return b;
}

double Evaluation::main() const {
  const auto it = metrics.find(main_metric);
  TORCH_CHECK(it != metrics.end(), "evaluation has no metric '", main_metric, "'");
  return it->second;
}

Batch TaskAdapter::collate(const FeatureSet& set, const std::vector<int64_t>& indices) const {
  TORCH_CHECK(!indices.empty(), "collate: empty batch");
  const auto& first = set.features.at(static_cast<size_t>(indices[0]));
  const int64_t rows = static_cast<int64_t>(first.input_ids.size());
  const int64_t batch = static_cast<int64_t>(indices.size());
  int64_t length = 0;
  for (int64_t i : indices)
    length = std::max(length, set.features.at(static_cast<size_t>(i)).length());

  auto ids = torch::full({batch, rows, length}, set.pad_id, torch::kLong);
  auto mask = torch::zeros({batch, rows, length}, torch::kLong);
  auto types = torch::zeros({batch, rows, length}, torch::kLong);
  auto ids_a = ids.accessor<int64_t, 3>();
  auto mask_a = mask.accessor<int64_t, 3>();
  auto types_a = types.accessor<int64_t, 3>();
  Batch out;
  const bool token_labels = !first.token_labels.empty();
  torch::Tensor token_label_tensor;
  if (token_labels) token_label_tensor = torch::full({batch, length}, kIgnoreIndex, torch::kLong);
  for (int64_t b = 0; b < batch; ++b) {
    const auto& f = set.features[static_cast<size_t>(indices[static_cast<size_t>(b)])];
    TORCH_CHECK(static_cast<int64_t>(f.input_ids.size()) == rows,
                "collate: features with different row counts");
    for (int64_t r = 0; r < rows; ++r) {
      const auto& row = f.input_ids[static_cast<size_t>(r)];
      const auto& type_row = f.token_type_ids[static_cast<size_t>(r)];
      for (size_t t = 0; t < row.size(); ++t) {
        ids_a[b][r][static_cast<int64_t>(t)] = row[t];
        mask_a[b][r][static_cast<int64_t>(t)] = 1;
        types_a[b][r][static_cast<int64_t>(t)] = type_row[t];
      }
    }
    if (token_labels) {
      auto acc = token_label_tensor.accessor<int64_t, 2>();
      for (size_t t = 0; t < f.token_labels.size(); ++t)
        acc[b][static_cast<int64_t>(t)] = f.token_labels[t];
    }
    out.feature_indices.push_back(indices[static_cast<size_t>(b)]);
    out.lengths.push_back(static_cast<int64_t>(f.input_ids[0].size()));
  }
  if (rows == 1) {
    ids = ids.squeeze(1);  // [batch, seq]
    mask = mask.squeeze(1);
    types = types.squeeze(1);
  }
  out.input_ids = ids;
  out.attention_mask = mask;
  out.token_type_ids = types;
  if (token_labels) out.labels = token_label_tensor;
  return out;
}

std::string TaskAdapter::architecture() const {
  const auto* info = TaskRegistry::global().find(type());
  TORCH_CHECK(info && !info->architectures.empty(), type(),
              ": no HF architecture registered for this task (TaskInfo::architectures)");
  return info->architectures.front();
}

metrics::MetricGoal TaskAdapter::main_metric_goal() const {
  return metrics::metric_goal(main_metric());
}

void TaskAdapter::configure_export(BertConfig& config) const {
  config.architectures({family_architecture(config.family(), architecture())});
  config.id2label(labels());
}

void TaskAdapter::gather(const Batch& batch,
                         const torch::Tensor& logits,
                         std::vector<torch::Tensor>& outputs) const {
  const auto cpu = logits.detach().to(torch::kCPU, torch::kFloat);
  const bool per_token = cpu.dim() == 3 && batch.input_ids.dim() == 2;  // [batch, seq, k]
  for (int64_t i = 0; i < batch.size(); ++i) {
    auto row = cpu[i];
    if (per_token) row = row.slice(0, 0, batch.lengths[static_cast<size_t>(i)]);
    outputs.at(static_cast<size_t>(batch.feature_indices[static_cast<size_t>(i)])) = row.clone();
  }
}

std::optional<int64_t> TaskAdapter::gold_label_id(const LabelMap& labels,
                                                  const std::string& label,
                                                  const std::string& where,
                                                  FeatureSet& set) const {
  if (const auto id = labels.find(label)) return id;
  if (!unknown_labels_unscored_) return labels.id(label, where);  // throws, naming it
  if (set.unscored.empty())
    set.unscored = fmt::format("{}: label '{}' is not one of the model's labels ({})", where, label,
                               labels.joined());
  set.labelled = false;
  return std::nullopt;
}

void TaskAdapter::note_unlabelled(FeatureSet& set,
                                  const std::string& where,
                                  const std::string& id) {
  set.labelled = false;
  if (set.num_unlabelled++ == 0) set.first_unlabelled = fmt::format("{}: example '{}'", where, id);
}

Evaluation TaskAdapter::start_evaluation(const FeatureSet& features,
                                         nlohmann::json predictions) const {
  TORCH_CHECK(
      features.labelled, type(), ": cannot evaluate ",
      features.examples ? features.examples->source : "", ": some examples have no gold label",
      features.first_unlabelled.empty() ? "" : " (first: " + features.first_unlabelled + ")");
  Evaluation ev;
  ev.predictions = std::move(predictions);
  ev.main_metric = main_metric();
  return ev;
}

std::vector<std::pair<std::string, std::string>> TaskAdapter::prediction_files(
    const FeatureSet& features, const std::vector<torch::Tensor>& outputs, bool with_logits) const {
  if (with_logits)
    throw ConfigError(fmt::format(
        "--logits: task {} has no per-example scores to add (classification and multiple "
        "choice have)",
        type()));
  return {{"", predictions_text(predict(features, outputs))}};
}

std::string predictions_text(const nlohmann::json& predictions) {
  if (!predictions.is_array()) return predictions.dump(1) + "\n";
  std::string text;
  for (const auto& p : predictions) text += p.dump() + "\n";
  return text;
}

}  // namespace bert::tasks
