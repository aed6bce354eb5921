#include "tasks/metrics/span_f1.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <stdexcept>

namespace bert {
const std::vector<std::pair<const char*, tasks::metrics::TagScheme>>&
EnumNames<tasks::metrics::TagScheme>::get() {
  using S = tasks::metrics::TagScheme;
  static const std::vector<std::pair<const char*, S>> names = {
      {"iob1", S::kIob1}, {"iob2", S::kIob2}, {"iobes", S::kIobes}};
  return names;
}
}  // namespace bert

namespace bert::tasks::metrics {
namespace {

/// (prefix letter, type) of a tag: "B-PER" -> ("B", "PER"), "O" -> ("O", "_").
std::pair<std::string, std::string> split_tag(const std::string& tag) {
  if (tag.empty()) return {"O", "_"};
  std::string prefix = tag.substr(0, 1);
  std::string rest = tag.substr(1);
  const auto dash = rest.find('-');
  std::string type = dash == std::string::npos ? rest : rest.substr(dash + 1);
  if (type.empty()) type = "_";
  return {prefix, type};
}

bool end_of_chunk(const std::string& prev_tag,
                  const std::string& tag,
                  const std::string& prev_type,
                  const std::string& type) {
  if (prev_tag == "E" || prev_tag == "S") return true;
  if (prev_tag == "B" && (tag == "B" || tag == "S" || tag == "O")) return true;
  if (prev_tag == "I" && (tag == "B" || tag == "S" || tag == "O")) return true;
  return prev_tag != "O" && prev_tag != "." && prev_type != type;
}

bool start_of_chunk(const std::string& prev_tag,
                    const std::string& tag,
                    const std::string& prev_type,
                    const std::string& type) {
  if (tag == "B" || tag == "S") return true;
  if ((prev_tag == "E" || prev_tag == "S" || prev_tag == "O") && (tag == "E" || tag == "I"))
    return true;
  return tag != "O" && tag != "." && prev_type != type;
}

std::vector<std::string> flatten(const std::vector<std::vector<std::string>>& sentences) {
  std::vector<std::string> out;
  for (const auto& s : sentences) {
    out.insert(out.end(), s.begin(), s.end());
    out.push_back("O");
  }
  return out;
}

}  // namespace

std::vector<Entity> lenient_entities(const std::vector<std::vector<std::string>>& sentences) {
  auto tags = flatten(sentences);
  tags.push_back("O");
  std::vector<Entity> out;
  std::string prev_tag = "O", prev_type;
  int64_t begin = 0;
  for (size_t i = 0; i < tags.size(); ++i) {
    const auto [tag, type] = split_tag(tags[i]);
    if (end_of_chunk(prev_tag, tag, prev_type, type))
      out.push_back({prev_type, begin, static_cast<int64_t>(i) - 1});
    if (start_of_chunk(prev_tag, tag, prev_type, type)) begin = static_cast<int64_t>(i);
    prev_tag = tag;
    prev_type = type;
  }
  return out;
}

std::vector<Entity> strict_entities(const std::vector<std::vector<std::string>>& sentences,
                                    TagScheme scheme) {
  std::vector<std::vector<std::string>> converted;
  const std::vector<std::vector<std::string>>* input = &sentences;
  if (scheme == TagScheme::kIob1) {
    for (const auto& s : sentences)
      converted.push_back(convert_tags(s, TagScheme::kIob1, TagScheme::kIob2));
    input = &converted;
    scheme = TagScheme::kIob2;
  }
  const auto tags = flatten(*input);
  std::vector<Entity> out;
  for (size_t i = 0; i < tags.size();) {
    const auto [tag, type] = split_tag(tags[i]);
    if (scheme == TagScheme::kIobes && tag == "S") {
      out.push_back({type, static_cast<int64_t>(i), static_cast<int64_t>(i)});
      ++i;
      continue;
    }
    if (tag != "B") {
      ++i;
      continue;
    }
    size_t j = i + 1;
    while (j < tags.size() && split_tag(tags[j]) == std::make_pair(std::string("I"), type)) ++j;
    if (scheme == TagScheme::kIob2) {
      out.push_back({type, static_cast<int64_t>(i), static_cast<int64_t>(j) - 1});
      i = j;
    } else {  // IOBES: must close with E-type
      if (j < tags.size() && split_tag(tags[j]) == std::make_pair(std::string("E"), type)) {
        out.push_back({type, static_cast<int64_t>(i), static_cast<int64_t>(j)});
        i = j + 1;
      } else {
        i = j;
      }
    }
  }
  return out;
}

EntityScores score_entities(const std::vector<std::vector<std::string>>& gold,
                            const std::vector<std::vector<std::string>>& predicted,
                            bool strict,
                            TagScheme scheme) {
  if (gold.size() != predicted.size())
    throw std::invalid_argument(fmt::format("entity scores: {} predicted sentences for {} gold",
                                            predicted.size(), gold.size()));
  EntityScores scores;
  for (size_t s = 0; s < gold.size(); ++s) {
    if (gold[s].size() != predicted[s].size())
      throw std::invalid_argument(
          fmt::format("entity scores: sentence {} has {} predicted tags for {} words", s,
                      predicted[s].size(), gold[s].size()));
    for (size_t i = 0; i < gold[s].size(); ++i) {
      ++scores.tokens;
      scores.correct_tokens += gold[s][i] == predicted[s][i];
    }
  }
  const auto g = strict ? strict_entities(gold, scheme) : lenient_entities(gold);
  const auto p = strict ? strict_entities(predicted, scheme) : lenient_entities(predicted);
  const std::set<Entity> gold_set(g.begin(), g.end());
  for (const auto& e : g) {
    ++scores.overall.gold;
    ++scores.by_type[e.type].gold;
  }
  for (const auto& e : p) {
    ++scores.overall.predicted;
    auto& t = scores.by_type[e.type];
    ++t.predicted;
    if (gold_set.count(e)) {
      ++scores.overall.correct;
      ++t.correct;
    }
  }
  return scores;
}

std::string conlleval_report(const EntityScores& s) {
  std::string out =
      fmt::format("processed {} tokens with {} phrases; found: {} phrases; correct: {}.\n",
                  s.tokens, s.overall.gold, s.overall.predicted, s.overall.correct);
  out += fmt::format("accuracy: {:6.2f}%; precision: {:6.2f}%; recall: {:6.2f}%; FB1: {:6.2f}\n",
                     100 * s.accuracy(), 100 * s.overall.precision(), 100 * s.overall.recall(),
                     100 * s.overall.f1());
  for (const auto& [type, c] : s.by_type)
    out += fmt::format("{:>17}: precision: {:6.2f}%; recall: {:6.2f}%; FB1: {:6.2f}  {}\n", type,
                       100 * c.precision(), 100 * c.recall(), 100 * c.f1(), c.predicted);
  return out;
}

std::vector<std::string> convert_tags(const std::vector<std::string>& tags,
                                      TagScheme from,
                                      TagScheme to) {
  if (from == to) return tags;
  // Via entities: read leniently (any scheme), write in the target scheme.
  const auto entities = lenient_entities({tags});
  std::vector<std::string> out(tags.size(), "O");
  for (size_t k = 0; k < entities.size(); ++k) {
    const auto& e = entities[k];
    const bool follows_same =
        k > 0 && entities[k - 1].end + 1 == e.begin && entities[k - 1].type == e.type;
    for (int64_t i = e.begin; i <= e.end; ++i) {
      std::string prefix = "I";
      if (to == TagScheme::kIob2) {
        prefix = i == e.begin ? "B" : "I";
      } else if (to == TagScheme::kIob1) {
        prefix = (i == e.begin && follows_same) ? "B" : "I";
      } else {
        prefix = e.begin == e.end ? "S" : i == e.begin ? "B" : i == e.end ? "E" : "I";
      }
      out[static_cast<size_t>(i)] = prefix + "-" + e.type;
    }
  }
  return out;
}

}  // namespace bert::tasks::metrics
