// `bertft score --task sequence_classification`: one label (or score, or set of labels) per
// example.
#include <fmt/format.h>

#include <algorithm>

#include "bert/common/error.h"
#include "data/glue.h"
#include "data/readers.h"
#include "tasks/common/label_map.h"
#include "tasks/metrics/classification.h"
#include "tasks/metrics/regression.h"
#include "tasks/sequence_classification/adapter.h"

namespace bert::tasks {

ScoreReport SequenceClassificationAdapter::score(const ScoreRequest& request) {
  const auto spec = score_data_spec(request, "sequence_classification");
  const auto examples = data::read_text_examples(spec);
  const auto predicted = predictions_for(examples, request);
  bool regression = request.regression;
  if (data::resolve_format(spec, data::DataFormat::kTsv) == data::DataFormat::kGlue) {
    const auto glue = data::find_glue_task(request.glue_task.empty()
                                               ? request.data.parent_path().filename().string()
                                               : request.glue_task);
    regression = regression || (glue && glue->regression);
  }
  nlohmann::json out;
  out["examples"] = examples.size();
  // Multi-label: asked for, or predicted as lists (predict's "labels").
  const bool multi_label =
      request.multi_label || std::any_of(predicted.begin(), predicted.end(), is_label_list);
  if (multi_label && !regression) {
    SequenceClassificationOptions options;
    options.multi_label = true;
    options.label_separator = request.label_separator;
    if (options.label_separator.empty()) throw ConfigError("score: --label-separator is empty");
    const SequenceClassificationAdapter sets(options);
    std::vector<std::vector<std::string>> gold_names, predicted_names;
    std::vector<std::string> names;
    for (size_t i = 0; i < examples.size(); ++i) {
      if (!examples[i].label)
        throw DataError(fmt::format("{}: example has no gold labels", examples[i].where));
      gold_names.push_back(sets.split_label_set(*examples[i].label, examples[i].where));
      predicted_names.push_back(sets.split_label_set(
          predicted[i], request.predictions.string() + fmt::format(" (prediction {})", i + 1)));
      names.insert(names.end(), gold_names.back().begin(), gold_names.back().end());
      names.insert(names.end(), predicted_names.back().begin(), predicted_names.back().end());
    }
    const auto labels = LabelMap::from_observed(names);
    metrics::LabelSets p(examples.size()), g(examples.size());
    for (size_t i = 0; i < examples.size(); ++i) {
      for (const auto& name : gold_names[i]) g[i].insert(*labels.find(name));
      for (const auto& name : predicted_names[i]) p[i].insert(*labels.find(name));
    }
    out["micro_f1"] = metrics::f1_micro(p, g);
    out["macro_f1"] = metrics::f1_macro(p, g, labels.size());
    out["accuracy"] = metrics::subset_accuracy(p, g);
    return {out, ""};
  }
  if (regression) {
    std::vector<double> p, g;
    for (size_t i = 0; i < examples.size(); ++i) {
      if (!examples[i].label)
        throw DataError(fmt::format("{}: example has no gold score", examples[i].where));
      g.push_back(parse_score_number(*examples[i].label, examples[i].where));
      p.push_back(parse_score_number(
          predicted[i], request.predictions.string() + fmt::format(" (prediction {})", i + 1)));
    }
    out["pearson"] = metrics::pearson(p, g);
    out["spearman"] = metrics::spearman(p, g);
    return {out, ""};
  }
  std::vector<std::string> names;
  for (const auto& e : examples) {
    if (!e.label) throw DataError(fmt::format("{}: example has no gold label", e.where));
    names.push_back(*e.label);
  }
  names.insert(names.end(), predicted.begin(), predicted.end());
  const auto labels = LabelMap::from_observed(names);
  std::vector<int64_t> p, g;
  for (size_t i = 0; i < examples.size(); ++i) {
    g.push_back(*labels.find(*examples[i].label));
    p.push_back(*labels.find(predicted[i]));
  }
  out["accuracy"] = metrics::accuracy(p, g);
  out["macro_f1"] = metrics::f1_macro(p, g);
  out["mcc"] = metrics::matthews_corrcoef(p, g);
  const std::string positive = request.positive_label.empty() ? "1" : request.positive_label;
  if (const auto id = labels.find(positive)) out["f1"] = metrics::f1_binary(p, g, *id);
  return {out, ""};
}

}  // namespace bert::tasks
