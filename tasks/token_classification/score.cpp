// `bertft score --task token_classification`: conlleval's input (token ... gold predicted).
#include <fmt/format.h>

#include "bert/common/error.h"
#include "data/readers.h"
#include "data/text_file.h"
#include "tasks/metrics/span_f1.h"
#include "tasks/token_classification/adapter.h"

namespace bert::tasks {

ScoreReport TokenClassificationAdapter::score(const ScoreRequest& request) {
  // One token per line, gold and predicted tags as the last two columns.
  const auto file = data::read_text_file(request.predictions);
  std::vector<std::vector<std::string>> words(1), gold(1), predicted(1);
  for (const auto& line : data::split_lines(file.text)) {
    const auto fields = data::split_fields(line.text);
    if (fields.empty() || fields[0] == "-DOCSTART-") {
      if (!words.back().empty()) {
        words.emplace_back();
        gold.emplace_back();
        predicted.emplace_back();
      }
      continue;
    }
    if (fields.size() < 3)
      throw DataError(
          fmt::format("{}:{}: expected 'token ... gold predicted' (at least 3 columns), got {}",
                      file.name, line.number, fields.size()));
    words.back().emplace_back(fields[0]);
    gold.back().emplace_back(fields[fields.size() - 2]);
    predicted.back().emplace_back(fields.back());
  }
  if (words.back().empty()) {
    words.pop_back();
    gold.pop_back();
    predicted.pop_back();
  }
  if (!request.data.empty()) {  // the prediction file must follow the dataset word by word
    const auto sentences = data::read_tagged(score_data_spec(request));
    if (sentences.size() != words.size())
      throw DataError(fmt::format("{}: {} sentences, but {} has {}", request.predictions.string(),
                                  words.size(), request.data.string(), sentences.size()));
    for (size_t s = 0; s < sentences.size(); ++s)
      if (sentences[s].words != words[s])
        throw DataError(fmt::format("{}: sentence {} does not match {} ({})",
                                    request.predictions.string(), s + 1, request.data.string(),
                                    sentences[s].where));
  }
  const auto scheme = parse_enum<metrics::TagScheme>(request.tag_scheme);
  if (!scheme)
    throw ConfigError(fmt::format("score: unknown --tag-scheme '{}'; expected one of: {}",
                                  request.tag_scheme, enum_choices<metrics::TagScheme>()));
  const auto s = metrics::score_entities(gold, predicted, request.strict, *scheme);
  nlohmann::json out{{"precision", s.overall.precision()},
                     {"recall", s.overall.recall()},
                     {"f1", s.overall.f1()},
                     {"accuracy", s.accuracy()}};
  for (const auto& [type, c] : s.by_type)
    out["types"][type] = {
        {"precision", c.precision()}, {"recall", c.recall()}, {"f1", c.f1()}, {"number", c.gold}};
  return {out, metrics::conlleval_report(s)};
}

}  // namespace bert::tasks
