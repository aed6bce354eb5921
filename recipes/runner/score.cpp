#include "recipes/runner/score.h"

#include <fmt/format.h>

#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "bert/common/error.h"
#include "bert/common/strings.h"
#include "data/glue.h"
#include "data/readers.h"
#include "data/text_file.h"
#include "tasks/common/label_map.h"
#include "tasks/metrics/classification.h"
#include "tasks/metrics/regression.h"
#include "tasks/metrics/span_f1.h"
#include "tasks/metrics/squad.h"

namespace bert::recipes {
namespace {

using json = nlohmann::json;
namespace metrics = tasks::metrics;

data::DataSpec data_spec(const ScoreOptions& o) {
  data::DataSpec spec;
  spec.path = o.data;
  if (const auto f = parse_enum<data::DataFormat>(o.format)) {
    spec.format = *f;
  } else {
    throw ConfigError(fmt::format("score: unknown --format '{}'; expected one of: {}", o.format,
                                  enum_choices<data::DataFormat>()));
  }
  spec.glue_task = o.glue_task;
  return spec;
}

/// One prediction per line: plain text, or JSONL with "label" / "prediction" / "score" and an
/// optional "id".
struct LinePrediction {
  std::optional<std::string> id;
  std::string value;
  std::string where;
};

std::vector<LinePrediction> read_line_predictions(const std::filesystem::path& path) {
  const auto file = data::read_text_file(path);
  std::vector<LinePrediction> out;
  for (const auto& line : data::split_lines(file.text)) {
    const auto first = line.text.find_first_not_of(" \t");
    if (first == std::string_view::npos) continue;
    LinePrediction p;
    p.where = fmt::format("{}:{}", file.name, line.number);
    if (line.text[first] == '{') {
      const json j = data::parse_json(line.text, p.where);
      const json* value = nullptr;
      for (const char* key : {"label", "prediction", "score"})
        if (j.contains(key)) {
          value = &j.at(key);
          break;
        }
      if (!value)
        throw DataError(
            fmt::format("{}: expected a \"label\", \"prediction\" or \"score\" key", p.where));
      p.value = value->is_string() ? value->get<std::string>() : value->dump();
      if (j.contains("id"))
        p.id = j["id"].is_string() ? j["id"].get<std::string>() : j["id"].dump();
    } else {
      const auto last = line.text.find_last_not_of(" \t");
      p.value = std::string(line.text.substr(first, last - first + 1));
    }
    out.push_back(std::move(p));
  }
  return out;
}

/// Predictions in the examples' order: by id when every prediction has one, else by position.
template <class Example>
std::vector<std::string> align_predictions(const std::vector<Example>& examples,
                                           const std::vector<LinePrediction>& preds,
                                           const std::filesystem::path& path) {
  const bool by_id = !preds.empty() && std::all_of(preds.begin(), preds.end(),
                                                   [](const auto& p) { return p.id.has_value(); });
  std::vector<std::string> out;
  if (by_id) {
    std::map<std::string, std::string> values;
    for (const auto& p : preds) values[*p.id] = p.value;
    for (const auto& e : examples) {
      const auto it = values.find(e.id);
      if (it == values.end())
        throw DataError(
            fmt::format("{}: no prediction for id '{}' ({})", path.string(), e.id, e.where));
      out.push_back(it->second);
    }
    return out;
  }
  if (preds.size() != examples.size())
    throw DataError(
        fmt::format("{}: {} predictions for {} examples in the data (give one per line, in order, "
                    "or JSONL with ids)",
                    path.string(), preds.size(), examples.size()));
  for (const auto& p : preds) out.push_back(p.value);
  return out;
}

double parse_number(const std::string& text, const std::string& where) {
  if (const auto v = parse_double(text)) return *v;
  throw DataError(fmt::format("{}: '{}' is not a number", where, text));
}

int score_classification(const ScoreOptions& o) {
  const auto spec = data_spec(o);
  const auto examples = data::read_text_examples(spec);
  const auto predicted =
      align_predictions(examples, read_line_predictions(o.predictions), o.predictions);
  bool regression = o.regression;
  if (data::resolve_format(spec, data::DataFormat::kTsv) == data::DataFormat::kGlue) {
    const auto glue = data::find_glue_task(
        o.glue_task.empty() ? o.data.parent_path().filename().string() : o.glue_task);
    regression = regression || (glue && glue->regression);
  }
  json out;
  out["examples"] = examples.size();
  if (regression) {
    std::vector<double> p, g;
    for (size_t i = 0; i < examples.size(); ++i) {
      if (!examples[i].label)
        throw DataError(fmt::format("{}: example has no gold score", examples[i].where));
      g.push_back(parse_number(*examples[i].label, examples[i].where));
      p.push_back(parse_number(predicted[i],
                               o.predictions.string() + fmt::format(" (prediction {})", i + 1)));
    }
    out["pearson"] = metrics::pearson(p, g);
    out["spearman"] = metrics::spearman(p, g);
  } else {
    std::vector<std::string> names;
    for (const auto& e : examples) {
      if (!e.label) throw DataError(fmt::format("{}: example has no gold label", e.where));
      names.push_back(*e.label);
    }
    names.insert(names.end(), predicted.begin(), predicted.end());
    const auto labels = tasks::LabelMap::from_observed(names);
    std::vector<int64_t> p, g;
    for (size_t i = 0; i < examples.size(); ++i) {
      g.push_back(*labels.find(*examples[i].label));
      p.push_back(*labels.find(predicted[i]));
    }
    out["accuracy"] = metrics::accuracy(p, g);
    out["macro_f1"] = metrics::f1_macro(p, g);
    out["mcc"] = metrics::matthews_corrcoef(p, g);
    const std::string positive = o.positive_label.empty() ? "1" : o.positive_label;
    if (const auto id = labels.find(positive)) out["f1"] = metrics::f1_binary(p, g, *id);
  }
  std::cout << out.dump(2) << '\n';
  return 0;
}

int score_choices(const ScoreOptions& o) {
  const auto examples = data::read_choice_examples(data_spec(o));
  const auto predicted =
      align_predictions(examples, read_line_predictions(o.predictions), o.predictions);
  std::vector<int64_t> p, g;
  for (size_t i = 0; i < examples.size(); ++i) {
    if (!examples[i].label)
      throw DataError(fmt::format("{}: example has no gold label", examples[i].where));
    g.push_back(*examples[i].label);
    p.push_back(static_cast<int64_t>(parse_number(predicted[i], o.predictions.string())));
  }
  std::cout << json{{"examples", examples.size()}, {"accuracy", metrics::accuracy(p, g)}}.dump(2)
            << '\n';
  return 0;
}

int score_squad(const ScoreOptions& o) {
  data::DataSpec spec = data_spec(o);
  spec.format = data::DataFormat::kSquad;
  std::string version;
  const auto examples = data::read_squad(spec, &version);
  const auto preds = data::read_json_file(o.predictions);
  if (!preds.is_object())
    throw DataError(fmt::format("{}: expected a JSON object {{question id: answer text}}",
                                o.predictions.string()));
  std::map<std::string, std::string> predictions;
  for (const auto& [id, answer] : preds.items()) {
    if (!answer.is_string())
      throw DataError(
          fmt::format("{}: the answer for '{}' is not a string", o.predictions.string(), id));
    predictions[id] = answer.get<std::string>();
  }
  std::vector<metrics::SquadGold> gold;
  for (const auto& e : examples) {
    metrics::SquadGold g{e.id, {}, e.is_impossible};
    for (const auto& a : e.answers) g.answers.push_back(a.text);
    gold.push_back(std::move(g));
  }
  std::map<std::string, double> na_probs;
  if (!o.na_probs.empty()) {
    for (const auto& [id, p] : data::read_json_file(o.na_probs).items())
      na_probs[id] = p.get<double>();
  }
  const auto scores =
      metrics::score_squad(gold, predictions, version.empty() ? "1.1" : version,
                           o.na_probs.empty() ? nullptr : &na_probs, o.na_prob_threshold);
  std::cout << scores.dump(2) << '\n';
  return 0;
}

int score_tagging(const ScoreOptions& o) {
  // conlleval's input: one token per line, gold and predicted tags as the last two columns.
  const auto file = data::read_text_file(o.predictions);
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
  if (!o.data.empty()) {  // the prediction file must follow the dataset word by word
    data::DataSpec spec = data_spec(o);
    const auto sentences = data::read_conll(spec);
    if (sentences.size() != words.size())
      throw DataError(fmt::format("{}: {} sentences, but {} has {}", o.predictions.string(),
                                  words.size(), o.data.string(), sentences.size()));
    for (size_t s = 0; s < sentences.size(); ++s)
      if (sentences[s].words != words[s])
        throw DataError(fmt::format("{}: sentence {} does not match {} ({})",
                                    o.predictions.string(), s + 1, o.data.string(),
                                    sentences[s].where));
  }
  const auto scheme = parse_enum<metrics::TagScheme>(o.tag_scheme);
  if (!scheme)
    throw ConfigError(fmt::format("score: unknown --tag-scheme '{}'; expected one of: {}",
                                  o.tag_scheme, enum_choices<metrics::TagScheme>()));
  const auto s = metrics::score_entities(gold, predicted, o.strict, *scheme);
  std::cout << metrics::conlleval_report(s);
  json out{{"precision", s.overall.precision()},
           {"recall", s.overall.recall()},
           {"f1", s.overall.f1()},
           {"accuracy", s.accuracy()}};
  for (const auto& [type, c] : s.by_type)
    out["types"][type] = {
        {"precision", c.precision()}, {"recall", c.recall()}, {"f1", c.f1()}, {"number", c.gold}};
  std::cout << out.dump(2) << '\n';
  return 0;
}

}  // namespace

int run_score(const ScoreOptions& o) {
  if (o.task == "sequence_classification") return score_classification(o);
  if (o.task == "multiple_choice") return score_choices(o);
  if (o.task == "question_answering") return score_squad(o);
  if (o.task == "token_classification") return score_tagging(o);
  throw ConfigError(
      fmt::format("score: unknown --task '{}'; expected sequence_classification, multiple_choice, "
                  "question_answering or token_classification",
                  o.task));
}

}  // namespace bert::recipes
