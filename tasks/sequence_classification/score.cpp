// `bertft score --task sequence_classification`: one label (or score) per example.
#include <fmt/format.h>

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
