// `bertft score --task token_classification`: conlleval's input (token ... gold predicted), or
// JSON lines of predicted tags with the gold data.
#include <fmt/format.h>

#include <functional>

#include "bert/common/error.h"
#include "data/readers.h"
#include "data/text_file.h"
#include "tasks/metrics/span_f1.h"
#include "tasks/token_classification/adapter.h"

namespace bert::tasks {

namespace {

using Sentences = std::vector<std::vector<std::string>>;

/// --data's sentences, checked to hold `words` sentence by sentence; `where(s)` names the
/// prediction file's sentence s in a message.
std::vector<data::TaggedSentence> aligned_data(const ScoreRequest& request,
                                               const Sentences& words,
                                               const std::function<std::string(size_t)>& where) {
  auto sentences = data::read_tagged(score_data_spec(request));
  if (sentences.size() != words.size())
    throw DataError(fmt::format("{}: {} sentences, but {} has {}", request.predictions.string(),
                                words.size(), request.data.string(), sentences.size()));
  for (size_t s = 0; s < sentences.size(); ++s)
    if (sentences[s].words != words[s])
      throw DataError(fmt::format("{}: sentence {} does not match {} ({})", where(s), s + 1,
                                  request.data.string(), sentences[s].where));
  return sentences;
}

/// CoNLL columns (conlleval's input): one token per line, gold and predicted tags the last two
/// columns; with --data, the file must follow the dataset word by word.
void read_column_predictions(const ScoreRequest& request,
                             const data::TextFile& file,
                             Sentences& words,
                             Sentences& gold,
                             Sentences& predicted) {
  words.resize(1);
  gold.resize(1);
  predicted.resize(1);
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
  if (!request.data.empty())
    aligned_data(request, words, [&](size_t) { return request.predictions.string(); });
}

/// JSON lines (`predict --out x.jsonl`: a sentence a line, its tokens and predicted ner_tags, as
/// the data reader takes them) against the gold tags of --data, sentence by sentence. The
/// readers give no sentence without words.
void read_json_lines_predictions(const ScoreRequest& request,
                                 Sentences& words,
                                 Sentences& gold,
                                 Sentences& predicted) {
  if (request.data.empty())
    throw ConfigError(
        fmt::format("score: {} holds JSON lines, predicted tags without the gold ones; give --data",
                    request.predictions.string()));
  data::DataSpec spec;
  spec.path = request.predictions;
  spec.format = data::DataFormat::kJsonl;
  const auto predictions = data::read_tagged(spec);
  for (const auto& p : predictions) {
    if (p.tags.empty()) throw DataError(fmt::format("{}: the sentence has no tags", p.where));
    words.push_back(p.words);
    predicted.push_back(p.tags);
  }
  for (const auto& s :
       aligned_data(request, words, [&](size_t s) { return predictions[s].where; })) {
    if (s.tags.empty()) throw DataError(fmt::format("{}: the sentence has no gold tags", s.where));
    gold.push_back(s.tags);
  }
}

}  // namespace

ScoreReport TokenClassificationAdapter::score(const ScoreRequest& request) {
  const auto file = data::read_text_file(request.predictions);
  Sentences words, gold, predicted;
  const auto first = file.text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && file.text[first] == '{') {
    read_json_lines_predictions(request, words, gold, predicted);
  } else {
    read_column_predictions(request, file, words, gold, predicted);
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
