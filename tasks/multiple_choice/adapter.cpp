#include "tasks/multiple_choice/adapter.h"

#include <fmt/format.h>

#include "bert/common/error.h"
#include "bert/common/log.h"
#include "data/readers.h"
#include "tasks/common/heads.h"
#include "tasks/common/sequence.h"
#include "tasks/metrics/classification.h"

namespace bert::tasks {
namespace {

using json = nlohmann::json;
using ChoiceExamples = Examples<data::ChoiceExample>;

}  // namespace

TaskInfo MultipleChoiceAdapter::info() {
  TaskInfo info;
  info.name = "multiple_choice";
  info.description = "context + N candidate endings -> choice (SWAG)";
  info.create = &create;
  info.option_docs = [] { return describe_struct<MultipleChoiceOptions>("task"); };
  info.architectures = {"BertForMultipleChoice"};
  info.metrics = {"accuracy"};
  info.score_formats =
      "one choice index per line, or JSONL with \"label\" and an optional \"id\"; --data: SWAG CSV";
  info.score = &score;
  return info;
}

std::unique_ptr<TaskAdapter> MultipleChoiceAdapter::create(const YamlReader& reader,
                                                           ErrorList& errors) {
  MultipleChoiceOptions o;
  read_struct(reader, o, errors);
  check_max_seq_length(reader, o.max_seq_length, errors);
  return std::make_unique<MultipleChoiceAdapter>(o);
}

std::shared_ptr<const ExampleSet> MultipleChoiceAdapter::read(const data::DataSpec& spec) {
  auto set = std::make_shared<ChoiceExamples>();
  set->source = spec.path.string();
  set->items = data::read_choice_examples(spec);
  return set;
}

std::shared_ptr<FeatureSet> MultipleChoiceAdapter::featurize(
    std::shared_ptr<const ExampleSet> examples,
    const tok::Tokenizer& tokenizer,
    bool training) const {
  const auto& items = items_of<data::ChoiceExample>(*examples, "multiple_choice");
  auto set = std::make_shared<FeatureSet>();
  set->examples = examples;
  set->pad_id = std::max<int64_t>(tokenizer.special_tokens().pad_id, 0);
  set->labelled = !items.empty();
  tok::EncodeOptions encode;
  encode.max_length = options_.max_seq_length;
  encode.truncation = options_.truncation;
  size_t truncated = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& e = items[i];
    if (!items.empty() && e.choices.size() != items[0].choices.size())
      throw DataError(fmt::format("{}: {} choices, but the first example has {}", e.where,
                                  e.choices.size(), items[0].choices.size()));
    Feature f;
    f.example = static_cast<int64_t>(i);
    if (e.label) {
      f.label = *e.label;
    } else {
      if (training)
        throw DataError(fmt::format("{}: training example '{}' has no label", e.where, e.id));
      note_unlabelled(*set, e.where, e.id);
    }
    bool cut = false;
    for (const auto& choice : e.choices) {
      const auto enc = tokenizer.encode(e.context, choice, encode);
      cut |= enc.num_truncated > 0;
      f.input_ids.push_back(enc.ids);
      f.token_type_ids.push_back(enc.type_ids);
    }
    truncated += cut;
    set->features.push_back(std::move(f));
  }
  if (truncated)
    log::warn(
        "[task] {}: {} of {} examples had a (context, choice) longer than max_seq_length {}; "
        "truncated",
        examples->source, truncated, items.size(), options_.max_seq_length);
  return set;
}

Batch MultipleChoiceAdapter::collate(const FeatureSet& features,
                                     const std::vector<int64_t>& indices) const {
  auto batch = TaskAdapter::collate(features, indices);
  if (batch.input_ids.dim() == 2) {  // a single choice collapses; keep [batch, choices, seq]
    batch.input_ids = batch.input_ids.unsqueeze(1);
    batch.attention_mask = batch.attention_mask.unsqueeze(1);
    batch.token_type_ids = batch.token_type_ids.unsqueeze(1);
  }
  std::vector<int64_t> labels;
  for (int64_t i : indices) labels.push_back(features.features[static_cast<size_t>(i)].label);
  batch.labels = torch::tensor(labels, torch::kLong);
  return batch;
}

TaskModel MultipleChoiceAdapter::build_model(const BertConfig& config) const {
  return std::make_shared<BertTaskModelImpl>(config, HeadKind::kChoices, 1);
}

torch::Tensor MultipleChoiceAdapter::loss(const torch::Tensor& logits, const Batch& batch) const {
  return torch::cross_entropy_loss(logits.to(torch::kFloat),
                                   batch.labels);  // [batch, choices] vs [batch]
}

std::vector<std::pair<std::string, std::string>> MultipleChoiceAdapter::prediction_files(
    const FeatureSet& set, const std::vector<torch::Tensor>& outputs, bool with_logits) const {
  auto predictions = predict(set, outputs);
  if (with_logits)
    for (size_t f = 0; f < set.features.size(); ++f) {
      const auto row = outputs.at(f).to(torch::kFloat64).contiguous();
      predictions[f]["logits"] =
          std::vector<double>(row.data_ptr<double>(), row.data_ptr<double>() + row.numel());
    }
  return {{"", predictions_text(predictions)}};
}

json MultipleChoiceAdapter::predict(const FeatureSet& set,
                                    const std::vector<torch::Tensor>& outputs) const {
  const auto& items = items_of<data::ChoiceExample>(*set.examples, "multiple_choice");
  json out = json::array();
  for (size_t f = 0; f < set.features.size(); ++f) {
    const auto& e = items[static_cast<size_t>(set.features[f].example)];
    const auto probs = torch::softmax(outputs.at(f), 0);
    const int64_t best = probs.argmax().item<int64_t>();
    out.push_back({{"id", e.id}, {"label", best}, {"probability", probs[best].item<double>()}});
  }
  return out;
}

Evaluation MultipleChoiceAdapter::evaluate(const FeatureSet& set,
                                           const std::vector<torch::Tensor>& outputs) const {
  auto ev = start_evaluation(set, predict(set, outputs));
  std::vector<int64_t> predicted, gold;
  for (size_t f = 0; f < set.features.size(); ++f) {
    predicted.push_back(ev.predictions[f]["label"].get<int64_t>());
    gold.push_back(set.features[f].label);
  }
  ev.metrics["accuracy"] = metrics::accuracy(predicted, gold);
  return ev;
}

}  // namespace bert::tasks
