#include "tasks/token_classification/entities.h"

#include <fmt/format.h>

#include <algorithm>

#include "bert/common/error.h"
#include "bert/tokenizer/unicode.h"
#include "bert/tokenizer/wordpiece.h"

namespace bert::tasks {
namespace {

using json = nlohmann::json;

/// A sub-token or word with its label, before grouping.
struct Member {
  std::string label;
  double score = 0;
  std::string word;
  int64_t start = 0, end = 0;
};

/// First index of the highest value (numpy's argmax).
size_t argmax(const std::vector<float>& v) {
  return static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

/// Entity type of a label, and whether the label begins an entity.
std::pair<std::string, bool> entity_type(const std::string& label) {
  const bool prefixed = label.size() > 2 && label[1] == '-' &&
                        std::string("BIES").find(label[0]) != std::string::npos;
  if (!prefixed) return {label, false};
  return {label.substr(2), label[0] == 'B' || label[0] == 'S'};
}

/// A word's member from its sub-tokens [first, last).
Member word_member(const std::vector<TokenPrediction>& tokens,
                   size_t first,
                   size_t last,
                   const std::vector<std::string>& labels,
                   Aggregation strategy,
                   const tok::Tokenizer& tokenizer) {
  std::vector<std::string> pieces;
  for (size_t t = first; t < last; ++t) pieces.push_back(tokens[t].token);
  std::vector<float> probabilities = tokens[first].probabilities;
  if (strategy == Aggregation::kMax) {
    size_t best = first;  // the first of the most confident (Python's max)
    for (size_t t = first + 1; t < last; ++t)
      if (tokens[t].probabilities[argmax(tokens[t].probabilities)] >
          tokens[best].probabilities[argmax(tokens[best].probabilities)])
        best = t;
    probabilities = tokens[best].probabilities;
  } else if (strategy == Aggregation::kAverage) {
    for (size_t t = first + 1; t < last; ++t)
      for (size_t l = 0; l < probabilities.size(); ++l)
        probabilities[l] += tokens[t].probabilities[l];
    for (auto& p : probabilities) p /= static_cast<float>(last - first);
  }
  const size_t label = argmax(probabilities);
  return {labels.at(label), probabilities[label], tokenizer.convert_tokens_to_string(pieces),
          tokens[first].start, tokens[last - 1].end};
}

}  // namespace

Aggregation parse_aggregation(const std::string& name, const std::string& where) {
  if (name == "none") return Aggregation::kNone;
  if (name == "simple") return Aggregation::kSimple;
  if (name == "first") return Aggregation::kFirst;
  if (name == "average") return Aggregation::kAverage;
  if (name == "max") return Aggregation::kMax;
  throw ConfigError(fmt::format(
      "{}: '{}' is not an aggregation (none | simple | first | average | max)", where, name));
}

std::vector<TokenPrediction> text_subtokens(const std::string& text,
                                            const tok::Tokenizer& tokenizer) {
  std::vector<char32_t> cps;
  std::vector<uint32_t> bytes;  // where each code point starts, then the text's end
  tok::unicode::decode_utf8(text, cps, bytes);
  const auto code_point = [&](uint32_t byte) {
    return static_cast<int64_t>(std::lower_bound(bytes.begin(), bytes.end(), byte) - bytes.begin());
  };
  const auto space = [&](int64_t i) {
    return i < static_cast<int64_t>(cps.size()) && cps[static_cast<size_t>(i)] == U' ';
  };
  const auto* wordpiece = dynamic_cast<const tok::WordPieceTokenizer*>(&tokenizer);
  const bool word_aware = wordpiece && !wordpiece->options().continuing_subword_prefix.empty();
  const auto unk = tokenizer.special_tokens().unk_id;
  std::vector<TokenPrediction> out;
  for (auto& piece : tokenizer.tokenize(text)) {
    TokenPrediction t;
    t.id = piece.id;
    t.index = static_cast<int64_t>(out.size()) + 1;  // after [CLS]
    t.start = code_point(piece.begin);
    t.end = code_point(piece.end);
    bool continues = word_aware ? tok::unicode::code_point_count(piece.token) != t.end - t.start
                                : t.start > 0 && !space(t.start - 1) && !space(t.start);
    if (piece.id == unk) {  // shown as the text it stands for, and a word of its own
      t.token = text.substr(piece.begin, piece.end - piece.begin);
      continues = false;
    } else {
      t.token = std::move(piece.token);
    }
    t.word = out.empty() ? 0 : out.back().word + (continues ? 0 : 1);
    out.push_back(std::move(t));
  }
  return out;
}

json aggregate_entities(const std::vector<TokenPrediction>& tokens,
                        const std::vector<std::string>& labels,
                        Aggregation strategy,
                        const std::string& outside,
                        const tok::Tokenizer& tokenizer) {
  for (const auto& t : tokens)
    TORCH_CHECK(t.probabilities.size() == labels.size(),
                "aggregate_entities: ", t.probabilities.size(), " probabilities for ",
                labels.size(), " labels");
  json out = json::array();
  std::vector<Member> members;
  if (strategy == Aggregation::kNone || strategy == Aggregation::kSimple) {
    for (const auto& t : tokens) {
      const size_t label = argmax(t.probabilities);
      if (strategy == Aggregation::kNone) {
        if (labels[label] != outside)
          out.push_back({{"entity", labels[label]},
                         {"score", t.probabilities[label]},
                         {"index", t.index},
                         {"word", t.token},
                         {"start", t.start},
                         {"end", t.end}});
      } else {
        members.push_back({labels[label], t.probabilities[label], t.token, t.start, t.end});
      }
    }
    if (strategy == Aggregation::kNone) return out;
  } else {
    for (size_t first = 0; first < tokens.size();) {
      size_t last = first + 1;
      while (last < tokens.size() && tokens[last].word == tokens[first].word) ++last;
      members.push_back(word_member(tokens, first, last, labels, strategy, tokenizer));
      first = last;
    }
  }
  // Adjacent members of one type form an entity unless a member begins one.
  std::string type;
  size_t first = 0;
  const auto flush = [&](size_t end) {
    if (end == first || type == outside) return;
    double sum = 0;
    std::vector<std::string> words;
    for (size_t m = first; m < end; ++m) {
      sum += members[m].score;
      words.push_back(members[m].word);
    }
    out.push_back({{"entity_group", type},
                   {"score", sum / static_cast<double>(end - first)},
                   {"word", tokenizer.convert_tokens_to_string(words)},
                   {"start", members[first].start},
                   {"end", members[end - 1].end}});
  };
  for (size_t m = 0; m < members.size(); ++m) {
    const auto [t, begins] = entity_type(members[m].label);
    if (m == 0 || t != type || begins) {
      flush(m);
      type = t;
      first = m;
    }
  }
  flush(members.size());
  return out;
}

}  // namespace bert::tasks
