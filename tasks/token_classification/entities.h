#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bert/tokenizer/tokenizer.h"

namespace bert::tasks {

/// HF's TokenClassificationPipeline aggregation_strategy: how sub-tokens' predictions become
/// entities on raw text.
enum class Aggregation {
  kNone,     ///< every sub-token with its own label (no grouping)
  kSimple,   ///< sub-tokens grouped by their labels, word boundaries ignored
  kFirst,    ///< a word takes its first sub-token's label, then words are grouped
  kAverage,  ///< a word takes the label of its sub-tokens' mean probabilities
  kMax,      ///< a word takes the label of its most confident sub-token
};
/// "none" | "simple" | "first" | "average" | "max"; ConfigError naming `where` otherwise.
Aggregation parse_aggregation(const std::string& name, const std::string& where);

/// A sub-token of one raw text and the model's label probabilities for it.
struct TokenPrediction {
  std::string
      token;  ///< the vocabulary's token ("##nas"); the unknown token as the text it stands for
  size_t word = 0;    ///< index of the word it belongs to; a word's sub-tokens are adjacent
  int64_t index = 0;  ///< position in the input ([CLS] = 0) as if the text were one window
  int64_t start = 0, end = 0;        ///< span in the text (code points)
  std::vector<float> probabilities;  ///< softmax over the labels, in label-id order
};

/// HF 4.31's TokenClassificationPipeline post-processing of one text (its `tokens` in order):
/// kNone gives each sub-token as {"entity", "score", "index", "word" (the token), "start",
/// "end"}; the others give entities {"entity_group", "score" (the mean of its members' scores),
/// "word" (its members through convert_tokens_to_string), "start", "end"}. A label's entity
/// type is what follows "B-" / "I-" (bertft also reads IOBES "S-" as "B-" and "E-" as "I-"), a
/// bare label is its own type; adjacent members of one type are one entity unless a member
/// begins one ("B-", "S-"). For kFirst / kAverage / kMax the members are words (a word's
/// sub-tokens: `word` equal), with the label argmax of the first sub-token's probabilities, of
/// their mean, or of the sub-token whose highest probability is highest, and that probability
/// as the score. Sub-tokens or entities labelled `outside` are left out (HF's ignore_labels).
nlohmann::json aggregate_entities(const std::vector<TokenPrediction>& tokens,
                                  const std::vector<std::string>& labels,
                                  Aggregation strategy,
                                  const std::string& outside,
                                  const tok::Tokenizer& tokenizer);

}  // namespace bert::tasks
