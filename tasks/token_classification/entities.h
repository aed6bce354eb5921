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
  int64_t id = 0;  ///< vocabulary id
  std::string
      token;  ///< the vocabulary's token ("##nas"); the unknown token as the text it stands for
  size_t word = 0;    ///< index of the word it belongs to; a word's sub-tokens are adjacent
  int64_t index = 0;  ///< position in the input ([CLS] = 0) as if the text were one window
  int64_t start = 0, end = 0;        ///< span in the text (code points)
  std::vector<float> probabilities;  ///< softmax over the labels, in label-id order
};

/// One raw text's sub-tokens as HF 4.31's token-classification pipeline sees them: the whole
/// text through `tokenizer` (tokenize, as the pipeline's own tokenizer call; special tokens
/// written in the text stay whole), grouped into words by the pipeline's rule
/// (gather_pre_entities' is_subword): for a tokenizer with a continuing-subword prefix
/// (WordPiece's "##") a sub-token continues its word when its token is not as long as the text
/// it covers; for one without (byte-level BPE, SentencePiece: HF's fallback heuristic) when
/// neither the character before it nor its first character is a space (U+0020); an unknown
/// token begins a word. Spans in code points, positions from 1 ([CLS] = 0), probabilities
/// empty. TokenizerError for invalid UTF-8.
std::vector<TokenPrediction> text_subtokens(const std::string& text,
                                            const tok::Tokenizer& tokenizer);

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
