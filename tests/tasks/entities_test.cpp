// Token classification on raw text: the sub-tokens and words HF's pipeline sees, and its
// aggregation strategies on hand-made sub-token probabilities (the HF comparison itself is
// PipelineTest's).
#include "tasks/token_classification/entities.h"

#include <gtest/gtest.h>

#include "bert/tokenizer/byte_level_bpe.h"
#include "bert/tokenizer/wordpiece.h"
#include "tests/support/test_support.h"

namespace bert::tasks {
namespace {

using json = nlohmann::json;

const std::vector<std::string> kLabels = {"O", "B-PER", "I-PER", "B-LOC", "I-LOC"};

const tok::Tokenizer& tokenizer() {
  static const auto t = [] {
    tok::WordPieceOptions options;
    options.normalizer.lowercase = true;
    options.normalizer.strip_accents = true;
    return std::make_unique<tok::WordPieceTokenizer>(
        std::vector<std::string>{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "jo", "##nas", "u",
                                 ".", "s", "new", "city", "met"},
        options);
  }();
  return *t;
}

/// "Jonas met U.S. ☃ new city" as its sub-tokens, each `confidence` sure of one label (the rest
/// shared evenly by the others).
std::vector<TokenPrediction> sentence() {
  struct Row {
    const char* token;
    size_t word;
    int64_t start, end;
    size_t label;
    float confidence;
  };
  const std::vector<Row> rows = {{"jo", 0, 0, 2, 1, 0.6f},    {"##nas", 0, 2, 5, 4, 0.9f},
                                 {"met", 1, 6, 9, 0, 0.8f},   {"u", 2, 10, 11, 3, 0.7f},
                                 {".", 3, 11, 12, 4, 0.6f},   {"s", 4, 12, 13, 4, 0.7f},
                                 {".", 5, 13, 14, 4, 0.5f},   {"☃", 6, 15, 16, 1, 0.5f},
                                 {"new", 7, 17, 20, 3, 0.9f}, {"city", 8, 21, 25, 3, 0.8f}};
  std::vector<TokenPrediction> out;
  for (const auto& r : rows) {
    TokenPrediction t;
    t.token = r.token;
    t.word = r.word;
    t.index = static_cast<int64_t>(out.size()) + 1;
    t.start = r.start;
    t.end = r.end;
    t.probabilities.assign(kLabels.size(), (1 - r.confidence) / 4);
    t.probabilities[r.label] = r.confidence;
    out.push_back(std::move(t));
  }
  return out;
}

json run(Aggregation strategy) {
  return aggregate_entities(sentence(), kLabels, strategy, "O", tokenizer());
}

/// (entity_group or entity, word, start, end, score) of each entity.
using Want = std::vector<std::tuple<std::string, std::string, int, int, double>>;

void expect_entities(const json& got, const Want& want) {
  ASSERT_EQ(got.size(), want.size()) << got.dump();
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& [label, word, start, end, score] = want[i];
    const auto& e = got[i];
    EXPECT_EQ(e.contains("entity") ? e["entity"] : e["entity_group"], label) << e.dump();
    EXPECT_EQ(e["word"], word) << e.dump();
    EXPECT_EQ(e["start"], start) << e.dump();
    EXPECT_EQ(e["end"], end) << e.dump();
    EXPECT_NEAR(e["score"].get<double>(), score, 1e-6) << e.dump();
  }
}

TEST(EntityAggregation, NoneGivesEverySubTokenButTheOutsideOnes) {
  const auto got = run(Aggregation::kNone);
  expect_entities(got, {{"B-PER", "jo", 0, 2, 0.6},
                        {"I-LOC", "##nas", 2, 5, 0.9},
                        {"B-LOC", "u", 10, 11, 0.7},
                        {"I-LOC", ".", 11, 12, 0.6},
                        {"I-LOC", "s", 12, 13, 0.7},
                        {"I-LOC", ".", 13, 14, 0.5},
                        {"B-PER", "☃", 15, 16, 0.5},
                        {"B-LOC", "new", 17, 20, 0.9},
                        {"B-LOC", "city", 21, 25, 0.8}});
  EXPECT_EQ(got[0]["index"], 1);
  EXPECT_EQ(got[2]["index"], 4);  // "met" (3) is left out
}

/// `jonas`, the entities from "Jonas", then those every strategy finds after "met": "u . s ."
/// as one entity, written as HF's WordPiece decoder writes it (no space before punctuation, one
/// before "s"), the unknown word, and "new" and "city" apart (each begins an entity).
Want with_the_rest(Want jonas) {
  jonas.insert(jonas.end(), {{"LOC", "u. s.", 10, 14, 0.625},
                             {"PER", "☃", 15, 16, 0.5},
                             {"LOC", "new", 17, 20, 0.9},
                             {"LOC", "city", 21, 25, 0.8}});
  return jonas;
}

TEST(EntityAggregation, SimpleGroupsSubTokensAcrossWordBoundaries) {
  // "jo" and "##nas" disagree, so the word is cut in two.
  expect_entities(run(Aggregation::kSimple),
                  with_the_rest({{"PER", "jo", 0, 2, 0.6}, {"LOC", "##nas", 2, 5, 0.9}}));
}

TEST(EntityAggregation, WordStrategiesAgreeOnWordsAndDifferOnTheirLabel) {
  // first: "jo"'s B-PER; max: "##nas"'s I-LOC (0.9 > 0.6); average: the mean row's I-LOC,
  // (0.1 + 0.9) / 2 against B-PER's (0.6 + 0.025) / 2.
  expect_entities(run(Aggregation::kFirst), with_the_rest({{"PER", "jonas", 0, 5, 0.6}}));
  expect_entities(run(Aggregation::kMax), with_the_rest({{"LOC", "jonas", 0, 5, 0.9}}));
  expect_entities(run(Aggregation::kAverage), with_the_rest({{"LOC", "jonas", 0, 5, 0.5}}));
}

TEST(EntityAggregation, GroupingRules) {
  // I- after O starts an entity; a type change ends one; IOBES S-/E- as B-/I-; bare labels are
  // their own type; the outside label is dropped.
  const std::vector<std::string> labels = {"O",     "I-ORG", "I-MISC", "S-LOC",
                                           "B-LOC", "E-LOC", "LABEL_3"};
  std::vector<TokenPrediction> tokens;
  for (const size_t label : {1, 2, 3, 4, 5, 6, 0, 6}) {
    TokenPrediction t;
    t.token = "u";
    t.word = tokens.size();
    t.start = static_cast<int64_t>(2 * tokens.size());
    t.end = t.start + 1;
    t.probabilities.assign(labels.size(), 0.0f);
    t.probabilities[label] = 1;
    tokens.push_back(std::move(t));
  }
  const auto got = aggregate_entities(tokens, labels, Aggregation::kFirst, "O", tokenizer());
  expect_entities(got, {{"ORG", "u", 0, 1, 1},
                        {"MISC", "u", 2, 3, 1},
                        {"LOC", "u", 4, 5, 1},
                        {"LOC", "u u", 6, 9, 1},
                        {"LABEL_3", "u", 10, 11, 1},
                        {"LABEL_3", "u", 14, 15, 1}});
}

// Ties go to the first, as numpy's argmax and Python's max take it: the first label of a row's
// highest probability, and with "max" the first sub-token of the word's most confident ones.
TEST(EntityAggregation, TiesGoToTheFirst) {
  const std::vector<std::string> labels = {"O", "B-PER", "B-LOC"};
  const auto word = [&](const std::vector<std::vector<float>>& rows) {
    std::vector<TokenPrediction> tokens;
    for (const auto& row : rows) {
      TokenPrediction t;
      t.token = tokens.empty() ? "jo" : "##nas";
      t.word = 0;
      t.start = tokens.empty() ? 0 : 2;
      t.end = tokens.empty() ? 2 : 5;
      t.probabilities = row;
      tokens.push_back(std::move(t));
    }
    return tokens;
  };
  // One sub-token, B-PER and B-LOC alike: B-PER.
  expect_entities(
      aggregate_entities(word({{0.2f, 0.4f, 0.4f}}), labels, Aggregation::kNone, "O", tokenizer()),
      {{"B-PER", "jo", 0, 2, 0.4}});
  // "max": both sub-tokens at 0.7, the first (B-LOC) decides.
  expect_entities(aggregate_entities(word({{0.1f, 0.2f, 0.7f}, {0.1f, 0.7f, 0.2f}}), labels,
                                     Aggregation::kMax, "O", tokenizer()),
                  {{"LOC", "jonas", 0, 5, 0.7}});
}

/// (token, word, start, end) of each sub-token.
using Cut = std::vector<std::tuple<std::string, size_t, int64_t, int64_t>>;

Cut cut_of(const std::vector<TokenPrediction>& tokens) {
  Cut out;
  for (size_t k = 0; k < tokens.size(); ++k) {
    EXPECT_EQ(tokens[k].index, static_cast<int64_t>(k) + 1);
    out.emplace_back(tokens[k].token, tokens[k].word, tokens[k].start, tokens[k].end);
  }
  return out;
}

TEST(TextSubTokens, WordPieceWordsEndWhereNoSubWordPrefixFollows) {
  // The sentence the strategies above are given: "##nas" continues "jo"; "U.S." is four words
  // (no piece of it has the prefix); the unknown snowman is its text and a word of its own.
  const std::string text = "Jonas met U.S. \u2603 new city";
  const auto tokens = text_subtokens(text, tokenizer());
  Cut want;
  for (const auto& t : sentence()) want.emplace_back(t.token, t.word, t.start, t.end);
  EXPECT_EQ(cut_of(tokens), want);
  EXPECT_EQ(tokens[1].id, tokenizer().token_to_id("##nas"));
  EXPECT_EQ(tokens[7].id, tokenizer().special_tokens().unk_id);
  EXPECT_TRUE(text_subtokens("  \t ", tokenizer()).empty());
}

TEST(TextSubTokens, WithoutASubWordPrefixASpaceBeginsAWord) {
  // RoBERTa's byte-level BPE marks no sub-word, so HF's fallback heuristic groups by spaces:
  // "U.S." and "c's" are one word each; of two spaces the first is a token of its own (an empty
  // span after HF's offset trimming) and a word, as is the word after it.
  using tok::byte_symbol;
  std::vector<std::string> vocab = {"<s>", "<pad>", "</s>", "<unk>"};
  for (int b = 0; b < 256; ++b) vocab.push_back(byte_symbol(static_cast<unsigned char>(b)));
  const std::string space = byte_symbol(' ');
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"a", "b"}, {space, "U"}, {space, "c"}, {"'", "s"}, {space, "ab"}};
  for (const auto& [a, b] : merges) vocab.push_back(a + b);
  vocab.push_back("<mask>");
  const tok::ByteLevelBpeTokenizer bpe(vocab, merges, {});
  const auto tokens = text_subtokens("ab U.S. c's  ab", bpe);
  const std::string g = space;
  EXPECT_EQ(cut_of(tokens), (Cut{{"ab", 0, 0, 2},
                                 {g + "U", 1, 3, 4},
                                 {".", 1, 4, 5},
                                 {"S", 1, 5, 6},
                                 {".", 1, 6, 7},
                                 {g + "c", 2, 8, 9},
                                 {"'s", 2, 9, 11},
                                 {g, 3, 12, 12},
                                 {g + "ab", 4, 13, 15}}));
}

TEST(EntityAggregation, UnknownStrategyIsAConfigError) {
  EXPECT_EQ(parse_aggregation("average", "x"), Aggregation::kAverage);
  const auto message = testing::error_message([] { parse_aggregation("mean", "--aggregation"); });
  EXPECT_NE(message.find("--aggregation: 'mean' is not an aggregation"), std::string::npos)
      << message;
}

}  // namespace
}  // namespace bert::tasks
