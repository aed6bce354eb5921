// `bertft score --task question_answering`: SQuAD's {question id: answer text}.
#include <fmt/format.h>

#include <map>

#include "bert/common/error.h"
#include "data/readers.h"
#include "data/text_file.h"
#include "tasks/metrics/squad.h"
#include "tasks/question_answering/adapter.h"

namespace bert::tasks {

ScoreReport QuestionAnsweringAdapter::score(const ScoreRequest& request) {
  data::DataSpec spec = score_data_spec(request, "question_answering");
  spec.format = data::DataFormat::kSquad;
  std::string version;
  const auto examples = data::read_squad(spec, &version);
  const auto preds = data::read_json_file(request.predictions);
  if (!preds.is_object())
    throw DataError(fmt::format("{}: expected a JSON object {{question id: answer text}}",
                                request.predictions.string()));
  std::map<std::string, std::string> predictions;
  for (const auto& [id, answer] : preds.items()) {
    if (!answer.is_string())
      throw DataError(
          fmt::format("{}: the answer for '{}' is not a string", request.predictions.string(), id));
    predictions[id] = answer.get<std::string>();
  }
  std::vector<metrics::SquadGold> gold;
  for (const auto& e : examples) {
    metrics::SquadGold g{e.id, {}, e.is_impossible};
    for (const auto& a : e.answers) g.answers.push_back(a.text);
    gold.push_back(std::move(g));
  }
  std::map<std::string, double> na_probs;
  if (!request.na_probs.empty()) {
    const auto probabilities = data::read_json_file(request.na_probs);
    if (!probabilities.is_object())
      throw DataError(fmt::format("{}: expected a JSON object {{question id: probability}}",
                                  request.na_probs.string()));
    for (const auto& [id, p] : probabilities.items()) {
      if (!p.is_number())
        throw DataError(fmt::format("{}: the no-answer probability of '{}' is not a number",
                                    request.na_probs.string(), id));
      na_probs[id] = p.get<double>();
    }
  }
  return {metrics::score_squad(gold, predictions, version.empty() ? "1.1" : version,
                               request.na_probs.empty() ? nullptr : &na_probs,
                               request.na_prob_threshold),
          ""};
}

}  // namespace bert::tasks
