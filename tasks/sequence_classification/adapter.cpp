#include "tasks/sequence_classification/adapter.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "bert/common/error.h"
#include "bert/common/log.h"
#include "bert/common/strings.h"
#include "data/readers.h"
#include "data/text_file.h"
#include "tasks/common/heads.h"
#include "tasks/common/windows.h"
#include "tasks/metrics/classification.h"
#include "tasks/metrics/regression.h"

namespace bert {
const std::vector<std::pair<const char*, tasks::LongInputs>>& EnumNames<tasks::LongInputs>::get() {
  static const std::vector<std::pair<const char*, tasks::LongInputs>> names = {
      {"truncate", tasks::LongInputs::kTruncate}, {"windows", tasks::LongInputs::kWindows}};
  return names;
}
}  // namespace bert

namespace bert::tasks {
namespace {

using json = nlohmann::json;
using TextExamples = Examples<data::TextExample>;

const std::vector<std::string> kClassificationMetrics = {"accuracy", "f1", "macro_f1", "mcc"};
const std::vector<std::string> kRegressionMetrics = {"pearson", "spearman", "mse"};
const std::vector<std::string> kMultiLabelMetrics = {"micro_f1", "macro_f1", "accuracy"};

std::string_view trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

/// Whether `label` reads as a JSON list (what a JSONL reader keeps of ["a", "b"]).
bool is_json_list(const std::string& label) {
  const auto t = trimmed(label);
  return t.size() >= 2 && t.front() == '[' && t.back() == ']' &&
         nlohmann::json::accept(t.begin(), t.end());
}

double parse_score(const std::string& text, const std::string& where) {
  if (const auto v = parse_double(text)) return *v;
  throw DataError(fmt::format("{}: regression target '{}' is not a number", where, text));
}

}  // namespace

SequenceClassificationAdapter::SequenceClassificationAdapter(SequenceClassificationOptions options)
    : options_(std::move(options)) {
  if (!options_.labels.empty()) labels_ = LabelMap(options_.labels);
}

TaskInfo SequenceClassificationAdapter::info() {
  TaskInfo info;
  info.name = "sequence_classification";
  info.description = "one text or a text pair -> label, or score (num_labels: 1)";
  info.create = &create;
  info.option_docs = [] { return describe_struct<SequenceClassificationOptions>("task"); };
  info.architectures = {"BertForSequenceClassification"};
  info.options_from_config = [](const BertConfig& config) {
    YAML::Node options(YAML::NodeType::Map);
    if (config.problem_type() && *config.problem_type() == "regression") options["num_labels"] = 1;
    if (config.problem_type() && *config.problem_type() == "multi_label_classification")
      options["multi_label"] = true;
    return options;
  };
  info.metrics = {"accuracy", "f1", "macro_f1", "mcc", "pearson", "spearman", "mse", "micro_f1"};
  info.score_formats =
      "one label per line (a score with --regression), or JSONL with \"label\", \"labels\" (a "
      "list: multi-label), \"prediction\" or "
      "\"score\" and an optional \"id\"; --data: GLUE TSV, CSV, TSV or JSONL";
  info.score = &score;
  return info;
}

std::unique_ptr<TaskAdapter> SequenceClassificationAdapter::create(const YamlReader& reader,
                                                                   ErrorList& errors) {
  SequenceClassificationOptions o;
  read_struct(reader, o, errors);
  check_max_seq_length(reader, o.max_seq_length, errors);
  if (o.num_labels < 0) errors.add(reader.where("num_labels") + ": must be >= 0");
  if (o.num_labels == 1 && !o.labels.empty())
    errors.add(reader.where("labels") + ": a regression task (num_labels: 1) has no label names");
  if (o.num_labels > 1 && !o.labels.empty() &&
      static_cast<int64_t>(o.labels.size()) != o.num_labels)
    errors.add(reader.where("labels") +
               fmt::format(": {} names for num_labels {}", o.labels.size(), o.num_labels));
  if (o.multi_label) {
    if (o.num_labels == 1)
      errors.add(reader.where("num_labels") +
                 ": 1 is regression; a multi_label task has a probability for each label");
    if (o.label_separator.empty()) errors.add(reader.where("label_separator") + ": is empty");
    if (!(o.threshold > 0 && o.threshold < 1))
      errors.add(reader.where("threshold") + ": must be in (0, 1)");
    if (!o.positive_label.empty())
      errors.add(reader.where("positive_label") +
                 ": binary F1's positive class; a multi_label task scores every label");
  }
  if (o.long_inputs == LongInputs::kWindows &&
      (o.window_stride < 0 || o.window_stride >= o.max_seq_length - 3))
    errors.add(reader.where("window_stride") + ": must be in [0, max_seq_length - 3)");
  if (!o.main_metric.empty()) {
    // Regression or classification may only be known from the data (GLUE STS-B): until then
    // either kind's metrics are accepted, and fit_labels() checks the choice.
    std::vector<std::string> valid;
    if (o.multi_label) {
      valid = kMultiLabelMetrics;
    } else {
      if (o.num_labels != 1) valid = kClassificationMetrics;
      if (o.num_labels <= 1)
        valid.insert(valid.end(), kRegressionMetrics.begin(), kRegressionMetrics.end());
    }
    if (std::find(valid.begin(), valid.end(), o.main_metric) == valid.end()) {
      std::string all;
      for (const auto& v : valid) all += (all.empty() ? "" : ", ") + v;
      errors.add(fmt::format("{}: unknown metric '{}'; expected one of: {}",
                             reader.where("main_metric"), o.main_metric, all));
    }
  }
  return std::make_unique<SequenceClassificationAdapter>(std::move(o));
}

YAML::Node SequenceClassificationAdapter::options() const {
  return write_struct(options_);
}

std::shared_ptr<const ExampleSet> SequenceClassificationAdapter::read(const data::DataSpec& spec) {
  auto set = std::make_shared<TextExamples>();
  set->source = spec.path.string();
  set->items = data::read_text_examples(spec);
  if (data::resolve_format(spec, data::DataFormat::kTsv) == data::DataFormat::kGlue && !glue_) {
    glue_ = data::find_glue_task(
        spec.glue_task.empty() ? spec.path.parent_path().filename().string() : spec.glue_task);
    if (glue_ && glue_->regression && options_.num_labels == 0 && !multi_label())
      options_.num_labels = 1;
  }
  return set;
}

void SequenceClassificationAdapter::fit_labels(const ExampleSet& train) {
  if (!options_.main_metric.empty() && !multi_label()) {  // multi_label's: checked in create()
    const auto& valid = regression() ? kRegressionMetrics : kClassificationMetrics;
    if (std::find(valid.begin(), valid.end(), options_.main_metric) == valid.end())
      throw ConfigError(fmt::format(
          "task.main_metric: '{}' is a {} metric, but {} is a {} task; use one of {}",
          options_.main_metric, regression() ? "classification" : "regression", train.source,
          regression() ? "regression" : "classification", fmt::join(valid, ", ")));
  }
  if (regression() || !labels_.empty()) return;
  const auto& items = items_of<data::TextExample>(train, "sequence_classification");
  if (multi_label()) {
    std::vector<std::string> observed;
    for (const auto& e : items)
      if (e.label)
        for (auto& label : split_label_set(*e.label, e.where)) observed.push_back(std::move(label));
    labels_ = LabelMap::from_observed(observed);
  } else if (glue_ && !glue_->labels.empty()) {
    labels_ = LabelMap(glue_->labels);
  } else {
    std::vector<std::string> observed;
    for (const auto& e : items)
      if (e.label) {
        if (is_json_list(*e.label))
          throw ConfigError(fmt::format(
              "{}: the label is a list ({}); several labels per example need task.multi_label: "
              "true",
              e.where, *e.label));
        observed.push_back(*e.label);
      }
    labels_ = LabelMap::from_observed(observed);
  }
  if (labels_.size() < 2 && options_.num_labels == 0)
    throw DataError(fmt::format(
        "{}: found {} distinct label(s) ({}); classification needs at least 2{}", train.source,
        labels_.size(), labels_.joined(), multi_label() ? "" : " (regression: set num_labels: 1)"));
  if (options_.num_labels > 1 && labels_.size() != options_.num_labels)
    throw DataError(fmt::format("{}: num_labels is {} but the data has {} labels ({})",
                                train.source, options_.num_labels, labels_.size(),
                                labels_.joined()));
}

void SequenceClassificationAdapter::set_labels(const std::vector<std::string>& labels) {
  // A trained classifier has two labels or more: none or one is a regression (also a GLUE
  // STS-B run, regression known from its data, whose result lists no labels).
  if (labels.size() <= 1) {
    options_.num_labels = 1;
    return;
  }
  labels_ = LabelMap(labels);
}

void SequenceClassificationAdapter::configure_export(BertConfig& config) const {
  TaskAdapter::configure_export(config);
  if (regression()) {
    config.id2label({"LABEL_0"});
    config.problem_type("regression");
  } else if (multi_label()) {
    config.problem_type("multi_label_classification");
  } else {
    config.problem_type("single_label_classification");
  }
}

std::shared_ptr<FeatureSet> SequenceClassificationAdapter::featurize(
    std::shared_ptr<const ExampleSet> examples,
    const tok::Tokenizer& tokenizer,
    bool training) const {
  const auto& items = items_of<data::TextExample>(*examples, "sequence_classification");
  TORCH_CHECK(regression() || !labels_.empty(),
              "sequence_classification: fit_labels() before featurize()");
  auto set = std::make_shared<FeatureSet>();
  set->examples = examples;
  set->pad_id = std::max<int64_t>(tokenizer.special_tokens().pad_id, 0);
  set->labelled = !items.empty();
  const int64_t max_len = options_.max_seq_length;
  size_t truncated = 0, windowed = 0;

  tok::EncodeOptions encode;
  encode.max_length = max_len;
  encode.truncation = options_.truncation;
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& e = items[i];
    Feature proto;
    proto.example = static_cast<int64_t>(i);
    if (e.label) {
      if (regression()) {
        proto.target = static_cast<float>(parse_score(*e.label, e.where));
      } else if (multi_label()) {
        for (const auto& label : split_label_set(*e.label, e.where))
          if (const auto id = gold_label_id(labels_, label_name(label), e.where, *set))
            proto.label_set.push_back(*id);
        std::sort(proto.label_set.begin(), proto.label_set.end());
      } else {
        proto.label = gold_label_id(labels_, *e.label, e.where, *set).value_or(kIgnoreIndex);
      }
    } else {
      if (training)
        throw DataError(fmt::format("{}: training example '{}' has no label", e.where, e.id));
      note_unlabelled(*set, e.where, e.id);
    }
    if (options_.long_inputs == LongInputs::kTruncate) {
      const auto enc = e.text_b ? tokenizer.encode(e.text_a, *e.text_b, encode)
                                : tokenizer.encode(e.text_a, std::nullopt, encode);
      truncated += enc.num_truncated > 0;
      Feature f = proto;
      f.input_ids = {enc.ids};
      f.token_type_ids = {enc.type_ids};
      set->features.push_back(std::move(f));
      continue;
    }
    // Windows: over text_a alone, or over text_b with text_a (cut to half the room) repeated.
    auto a = piece_ids(tokenizer.tokenize(e.text_a));
    std::vector<int64_t> b;
    if (e.text_b) b = piece_ids(tokenizer.tokenize(*e.text_b));
    const int64_t specials = tokenizer.num_special_tokens(e.text_b.has_value());
    std::vector<int64_t>& slid = e.text_b ? b : a;
    if (e.text_b) {
      const int64_t keep_a = std::max<int64_t>(1, (max_len - specials) / 2);
      if (static_cast<int64_t>(a.size() + b.size()) + specials > max_len &&
          static_cast<int64_t>(a.size()) > keep_a) {
        a.resize(static_cast<size_t>(
            std::max<int64_t>(keep_a, max_len - specials - static_cast<int64_t>(b.size()))));
        ++truncated;
      }
    }
    const int64_t capacity = max_len - specials - (e.text_b ? static_cast<int64_t>(a.size()) : 0);
    const auto windows =
        split_windows(static_cast<int64_t>(slid.size()), capacity, options_.window_stride);
    windowed += windows.size() > 1;
    for (const auto& w : windows) {
      const std::vector<int64_t> part(slid.begin() + w.begin, slid.begin() + w.end);
      auto [ids, types] =
          e.text_b ? bert_sequence(tokenizer, a, &part) : bert_sequence(tokenizer, part);
      Feature f = proto;
      f.input_ids = {std::move(ids)};
      f.token_type_ids = {std::move(types)};
      set->features.push_back(std::move(f));
    }
  }
  if (truncated)
    log::warn(
        "[task] {}: {} of {} examples were longer than max_seq_length {} and were truncated "
        "(long_inputs: {})",
        examples->source, truncated, items.size(), max_len, enum_name(options_.long_inputs));
  if (windowed)
    log::info("[task] {}: {} examples split into overlapping windows ({} features)",
              examples->source, windowed, set->features.size());
  return set;
}

Batch SequenceClassificationAdapter::collate(const FeatureSet& features,
                                             const std::vector<int64_t>& indices) const {
  auto batch = TaskAdapter::collate(features, indices);
  if (regression()) {
    std::vector<float> targets;
    for (int64_t i : indices) targets.push_back(features.features[static_cast<size_t>(i)].target);
    batch.labels = torch::tensor(targets, torch::kFloat);
  } else if (multi_label()) {
    batch.labels = torch::zeros({static_cast<int64_t>(indices.size()), labels_.size()});
    auto rows = batch.labels.accessor<float, 2>();
    for (size_t b = 0; b < indices.size(); ++b)
      for (int64_t id : features.features[static_cast<size_t>(indices[b])].label_set)
        rows[static_cast<int64_t>(b)][id] = 1.0f;
  } else {
    std::vector<int64_t> labels;
    for (int64_t i : indices) labels.push_back(features.features[static_cast<size_t>(i)].label);
    batch.labels = torch::tensor(labels, torch::kLong);
  }
  return batch;
}

TaskModel SequenceClassificationAdapter::build_model(const BertConfig& config) const {
  return std::make_shared<BertTaskModelImpl>(config, HeadKind::kPooled,
                                             regression() ? 1 : labels_.size());
}

torch::Tensor SequenceClassificationAdapter::loss(const torch::Tensor& logits,
                                                  const Batch& batch) const {
  if (regression())  // HF: MSELoss()(logits.squeeze(), labels.squeeze())
    return torch::mse_loss(logits.squeeze().to(torch::kFloat),
                           batch.labels.squeeze().to(torch::kFloat));
  if (multi_label())  // HF: BCEWithLogitsLoss()(logits, labels), the mean over every label
    return torch::binary_cross_entropy_with_logits(logits.to(torch::kFloat),
                                                   batch.labels.to(torch::kFloat));
  return torch::cross_entropy_loss(logits.to(torch::kFloat),
                                   batch.labels);  // [batch, labels] vs [batch]
}

std::vector<torch::Tensor> SequenceClassificationAdapter::example_logits(
    const FeatureSet& set, const std::vector<torch::Tensor>& outputs) const {
  const size_t n = set.examples->size();
  std::vector<torch::Tensor> sums(n);
  std::vector<int64_t> counts(n, 0);
  for (size_t f = 0; f < set.features.size(); ++f) {
    TORCH_CHECK(outputs.at(f).defined(), "no model output for feature ", f);
    const auto e = static_cast<size_t>(set.features[f].example);
    sums[e] = sums[e].defined() ? sums[e] + outputs[f] : outputs[f].clone();
    ++counts[e];
  }
  for (size_t e = 0; e < n; ++e) sums[e] = sums[e] / static_cast<double>(counts[e]);
  return sums;
}

std::vector<std::pair<std::string, std::string>> SequenceClassificationAdapter::prediction_files(
    const FeatureSet& set, const std::vector<torch::Tensor>& outputs, bool with_logits) const {
  auto predictions = predict(set, outputs);
  if (with_logits) {
    const auto logits = example_logits(set, outputs);
    for (size_t e = 0; e < logits.size(); ++e) {
      const auto row = logits[e].to(torch::kFloat64).contiguous();
      predictions[e]["logits"] =
          std::vector<double>(row.data_ptr<double>(), row.data_ptr<double>() + row.numel());
    }
  }
  if (multi_label()) return {{"", predictions_text(predictions)}};  // no GLUE task has several
  // GLUE's submission format beside the main file: "index<TAB>prediction", one row per example
  // in input order, the label's name (a score for regression).
  std::string glue = "index\tprediction\n";
  for (const auto& p : predictions)
    glue += p["id"].get<std::string>() + '\t' +
            (regression() ? fmt::format("{:.6f}", p["score"].get<double>())
                          : p["label"].get<std::string>()) +
            '\n';
  return {{"", predictions_text(predictions)}, {".glue.tsv", glue}};
}

json SequenceClassificationAdapter::predict(const FeatureSet& set,
                                            const std::vector<torch::Tensor>& outputs) const {
  const auto& items = items_of<data::TextExample>(*set.examples, "sequence_classification");
  const auto logits = example_logits(set, outputs);
  json out = json::array();
  for (size_t e = 0; e < items.size(); ++e) {
    if (regression()) {
      out.push_back({{"id", items[e].id}, {"score", logits[e].item<double>()}});
    } else if (multi_label()) {
      const auto probs = torch::sigmoid(logits[e]).to(torch::kFloat64).contiguous();
      json labels = json::array(), probabilities = json::object();
      for (int64_t l = 0; l < labels_.size(); ++l) {
        const double p = probs.data_ptr<double>()[l];
        probabilities[labels_.name(l)] = p;
        if (p > options_.threshold) labels.push_back(labels_.name(l));
      }
      out.push_back({{"id", items[e].id}, {"labels", labels}, {"probabilities", probabilities}});
    } else {
      const auto probs = torch::softmax(logits[e], 0);
      const int64_t best = probs.argmax().item<int64_t>();
      out.push_back({{"id", items[e].id},
                     {"label", labels_.name(best)},
                     {"probability", probs[best].item<double>()}});
    }
  }
  return out;
}

Evaluation SequenceClassificationAdapter::evaluate(
    const FeatureSet& set, const std::vector<torch::Tensor>& outputs) const {
  const auto& items = items_of<data::TextExample>(*set.examples, "sequence_classification");
  auto ev = start_evaluation(set, predict(set, outputs));
  if (regression()) {
    std::vector<double> predicted, gold;
    for (size_t e = 0; e < items.size(); ++e) {
      predicted.push_back(ev.predictions[e]["score"].get<double>());
      gold.push_back(parse_score(*items[e].label, items[e].where));
    }
    ev.metrics["pearson"] = metrics::pearson(predicted, gold);
    ev.metrics["spearman"] = metrics::spearman(predicted, gold);
    double mse = 0;
    for (size_t i = 0; i < gold.size(); ++i)
      mse += (predicted[i] - gold[i]) * (predicted[i] - gold[i]);
    ev.metrics["mse"] = gold.empty() ? 0 : mse / static_cast<double>(gold.size());
    return ev;
  }
  if (multi_label()) {
    metrics::LabelSets predicted, gold;
    for (size_t e = 0; e < items.size(); ++e) {
      auto& p = predicted.emplace_back();
      for (const auto& name : ev.predictions[e]["labels"])
        p.insert(labels_.id(name.get<std::string>(), items[e].where));
      auto& g = gold.emplace_back();
      for (const auto& label : split_label_set(*items[e].label, items[e].where))
        g.insert(labels_.id(label_name(label), items[e].where));
    }
    ev.metrics["micro_f1"] = metrics::f1_micro(predicted, gold);
    ev.metrics["macro_f1"] = metrics::f1_macro(predicted, gold, labels_.size());
    ev.metrics["accuracy"] = metrics::subset_accuracy(predicted, gold);
    return ev;
  }
  std::vector<int64_t> predicted, gold;
  for (size_t e = 0; e < items.size(); ++e) {
    predicted.push_back(labels_.id(ev.predictions[e]["label"].get<std::string>(), items[e].where));
    gold.push_back(labels_.id(*items[e].label, items[e].where));
  }
  ev.metrics["accuracy"] = metrics::accuracy(predicted, gold);
  ev.metrics["mcc"] = metrics::matthews_corrcoef(predicted, gold);
  ev.metrics["macro_f1"] = metrics::f1_macro(predicted, gold);
  if (labels_.size() == 2) {
    int64_t positive = 1;
    if (!options_.positive_label.empty()) {
      positive = labels_.id(options_.positive_label, "task.positive_label");
    } else if (const auto one = labels_.find("1")) {
      positive = *one;
    }
    ev.metrics["f1"] = metrics::f1_binary(predicted, gold, positive);
  } else {
    ev.metrics["f1"] = ev.metrics["macro_f1"];
  }
  return ev;
}

std::string SequenceClassificationAdapter::main_metric() const {
  if (!options_.main_metric.empty()) return options_.main_metric;
  if (multi_label()) return "micro_f1";  // also on a GLUE file: its metrics are single-label
  if (glue_ && !glue_->metrics.empty()) return glue_->metrics.front();
  return regression() ? "spearman" : "accuracy";
}

bool SequenceClassificationAdapter::is_label_list(const std::string& label) {
  return trimmed(label).substr(0, 1) == "[";
}

std::string SequenceClassificationAdapter::label_name(const std::string& label) const {
  if (labels_.find(label)) return label;
  return labels_.name_of_id(label).value_or(label);
}

std::vector<std::string> SequenceClassificationAdapter::split_label_set(
    const std::string& label, const std::string& where) const {
  std::vector<std::string> out;
  const auto add = [&](std::string name) {
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(std::move(name));
  };
  if (is_label_list(label)) {
    // Valid JSON that starts with '[' is a list.
    for (const auto& item : data::parse_json(trimmed(label), where)) {
      if (item.is_string() && !item.get<std::string>().empty()) {
        add(item.get<std::string>());
      } else if (item.is_number_integer()) {
        add(item.dump());  // an id (HF datasets' Sequence(ClassLabel)), matched in featurize()
      } else {
        throw DataError(fmt::format(
            "{}: the label list {} holds {}; expected label names (non-empty strings) or ids "
            "(integers)",
            where, label, item.dump()));
      }
    }
    return out;
  }
  std::string_view rest = label;
  while (true) {
    const auto cut = rest.find(options_.label_separator);
    const auto name = trimmed(rest.substr(0, cut));
    if (!name.empty()) add(std::string(name));
    if (cut == std::string_view::npos) break;
    rest.remove_prefix(cut + options_.label_separator.size());
  }
  return out;
}

}  // namespace bert::tasks
