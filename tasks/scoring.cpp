#include "tasks/scoring.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "bert/common/error.h"
#include "bert/common/strings.h"
#include "data/text_file.h"

namespace bert::tasks {

using json = nlohmann::json;

data::DataSpec score_data_spec(const ScoreRequest& request, const std::string& task) {
  if (!task.empty() && request.data.empty())
    throw ConfigError("score: --data is required for --task " + task);
  data::DataSpec spec;
  spec.path = request.data;
  if (const auto f = parse_enum<data::DataFormat>(request.format)) {
    spec.format = *f;
  } else {
    throw ConfigError(fmt::format("score: unknown --format '{}'; expected one of: {}",
                                  request.format, enum_choices<data::DataFormat>()));
  }
  spec.glue_task = request.glue_task;
  return spec;
}

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
      for (const char* key : {"label", "labels", "prediction", "score"})
        if (j.contains(key)) {
          value = &j.at(key);
          break;
        }
      if (!value)
        throw DataError(fmt::format(
            "{}: expected a \"label\", \"labels\", \"prediction\" or \"score\" key", p.where));
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

std::vector<std::string> align_predictions(const std::vector<std::string>& example_ids,
                                           const std::vector<std::string>& wheres,
                                           const std::vector<LinePrediction>& preds,
                                           const std::filesystem::path& path) {
  const bool by_id = !preds.empty() && std::all_of(preds.begin(), preds.end(),
                                                   [](const auto& p) { return p.id.has_value(); });
  std::vector<std::string> out;
  if (by_id) {
    std::map<std::string, std::string> values;
    for (const auto& p : preds) values[*p.id] = p.value;
    for (size_t i = 0; i < example_ids.size(); ++i) {
      const auto it = values.find(example_ids[i]);
      if (it == values.end())
        throw DataError(fmt::format("{}: no prediction for id '{}' ({})", path.string(),
                                    example_ids[i], wheres[i]));
      out.push_back(it->second);
    }
    return out;
  }
  if (preds.size() != example_ids.size())
    throw DataError(
        fmt::format("{}: {} predictions for {} examples in the data (give one per line, in order, "
                    "or JSONL with ids)",
                    path.string(), preds.size(), example_ids.size()));
  for (const auto& p : preds) out.push_back(p.value);
  return out;
}

double parse_score_number(const std::string& text, const std::string& where) {
  if (const auto v = parse_double(text)) return *v;
  throw DataError(fmt::format("{}: '{}' is not a number", where, text));
}

}  // namespace bert::tasks
