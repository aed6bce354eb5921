// `bertft score --task multiple_choice`: one choice index per example.
#include <fmt/format.h>

#include "bert/common/error.h"
#include "data/readers.h"
#include "tasks/metrics/classification.h"
#include "tasks/multiple_choice/adapter.h"

namespace bert::tasks {

ScoreReport MultipleChoiceAdapter::score(const ScoreRequest& request) {
  const auto examples = data::read_choice_examples(score_data_spec(request, "multiple_choice"));
  const auto predicted = predictions_for(examples, request);
  std::vector<int64_t> p, g;
  for (size_t i = 0; i < examples.size(); ++i) {
    if (!examples[i].label)
      throw DataError(fmt::format("{}: example has no gold label", examples[i].where));
    g.push_back(*examples[i].label);
    p.push_back(
        static_cast<int64_t>(parse_score_number(predicted[i], request.predictions.string())));
  }
  return {nlohmann::json{{"examples", examples.size()}, {"accuracy", metrics::accuracy(p, g)}}, ""};
}

}  // namespace bert::tasks
