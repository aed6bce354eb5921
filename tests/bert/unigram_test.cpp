#include "bert/tokenizer/unigram.h"

#include <gtest/gtest.h>

#include "bert/common/error.h"
#include "bert/tokenizer/spm_normalizer.h"
#include "tests/support/test_support.h"

namespace bert::tok {
namespace {

using Span = std::pair<uint32_t, uint32_t>;

std::vector<std::string> segment(const UnigramModel& m, std::string_view word) {
  std::vector<std::string> out;
  for (const auto& t : m.encode(word)) out.emplace_back(word.substr(t.begin, t.end - t.begin));
  return out;
}

TEST(UnigramTest, BestScoreAndTiesGoToTheEarliestStartingLastPiece) {
  const UnigramModel m({"<unk>", "-", "--", "a", "ab", "b"}, {0.0, -1.0, -2.0, -2.0, -3.0, -2.5},
                       /*unk_id=*/0);
  EXPECT_EQ(segment(m, "ab"), (std::vector<std::string>{"ab"}));  // -3 beats -4.5
  // Every segmentation of "-----" scores -5; HF keeps the first candidate found for an end,
  // the one starting earliest, so the last pieces are the long ones.
  EXPECT_EQ(segment(m, "-----"), (std::vector<std::string>{"-", "--", "--"}));
}

TEST(UnigramTest, UnknownCharactersAreFusedIntoOneToken) {
  const UnigramModel m({"<unk>", "a", "xy"}, {0.0, -1.0, -50.0}, /*unk_id=*/0);
  // "é" and "☃" have no piece: each costs the lowest score - 10, and the run is one token.
  const std::string word = "a\u00e9\u2603a";
  const auto tokens = m.encode(word);
  ASSERT_EQ(tokens.size(), 3U);
  EXPECT_EQ(tokens[1].id, 0);
  EXPECT_EQ(word.substr(tokens[1].begin, tokens[1].end - tokens[1].begin), "\u00e9\u2603");
  // A known piece is taken however low its score, where it covers the character.
  EXPECT_EQ(segment(m, "xy"), (std::vector<std::string>{"xy"}));
  EXPECT_EQ(m.encode("x")[0].id, 0);
  // The penalty is 10: "cb" then an unknown "a" (-1 + -8 - 10) loses to "c" then "ba" (-16); with
  // a penalty below 7 it would win.
  const UnigramModel n({"<unk>", "c", "ba", "cb"}, {0.0, -8.0, -8.0, -1.0}, /*unk_id=*/0);
  EXPECT_EQ(segment(n, "cba"), (std::vector<std::string>{"c", "ba"}));
}

TEST(SpmNormalizerTest, TransformKeepsHfAlignments) {
  AlignedText t = AlignedText::from("\xef\xac\x81x");  // "ﬁx": U+FB01 is 3 bytes
  // "ﬁ" -> "fi": f replaces it, i is inserted (and shares its span); x replaces x.
  t.transform({{U'f', 0}, {U'i', 1}, {U'x', 0}});
  EXPECT_EQ(t.text, "fix");
  EXPECT_EQ(t.original(0, 2), Span(0, 3));
  EXPECT_EQ(t.original(2, 3), Span(3, 4));
  // A change of -1 replaces the next character and removes one more.
  AlignedText u = AlignedText::from("ab c");
  u.transform({{U'a', -1}, {U' ', 0}, {U'c', 0}});
  EXPECT_EQ(u.text, "a c");
  EXPECT_EQ(u.original(0, 1), Span(0, 1));
  EXPECT_EQ(u.original(1, 3), Span(2, 4));
}

TEST(SpmNormalizerTest, SpacesCollapseAndMetaspaceSplits) {
  AlignedText t = AlignedText::from("a   b ");
  collapse_spaces(t);
  EXPECT_EQ(t.text, "a b ");
  EXPECT_EQ(t.original(1, 2), Span(3, 4));  // the run's last space
  const auto words = metaspace_words(t);
  EXPECT_EQ(t.text, "\u2581a\u2581b\u2581");
  ASSERT_EQ(words.size(), 3U);
  EXPECT_EQ(t.original(words[0].first, words[0].second), Span(0, 1));  // "▁" shares a's span
  EXPECT_EQ(t.original(words[1].first, words[1].second), Span(3, 5));
  EXPECT_EQ(t.original(words[2].first, words[2].second), Span(5, 6));
}

TEST(SpmNormalizerTest, PrecompiledMapLikeHf) {
  const auto model =
      testing::shared_dir() / "data" / "sentencepiece" / "transformers_test_sentencepiece.model";
  BERTFT_REQUIRE_PATH(model);
  const PrecompiledCharsmap map(read_spm_charsmap(model), model.string());
  EXPECT_EQ(map.transform("\xef\xac\x81"), std::optional<std::string_view>("fi"));
  EXPECT_FALSE(map.transform("a"));

  const auto normalized = [&](std::string_view text) {
    AlignedText t = AlignedText::from(text);
    map.normalize(t);
    return t;
  };
  // "e" + U+0301 is one grapheme cluster, composed to "é" and aligned to the "e" alone.
  const auto cafe = normalized("cafe\xcc\x81!");
  EXPECT_EQ(cafe.text, "caf\u00e9!");
  EXPECT_EQ(cafe.original(3, 5), Span(3, 4));
  EXPECT_EQ(cafe.original(5, 6), Span(6, 7));
  // A dropped control character takes nothing with it after a character...
  const auto after = normalized(std::string("a\x01") + "b");
  EXPECT_EQ(after.text, "ab");
  EXPECT_EQ(after.original(1, 2), Span(2, 3));
  // ...but at the very start HF records no removal, and what follows shifts onto it.
  const auto start = normalized(std::string("\x01") + "ab");
  EXPECT_EQ(start.text, "ab");
  EXPECT_EQ(start.original(0, 1), Span(0, 1));
  EXPECT_EQ(start.original(1, 2), Span(1, 2));
}

TEST(SpmNormalizerTest, MalformedInputIsNamed) {
  testing::TempDir dir;
  testing::write_bytes(dir.path() / "bad.model", "not a model");
  EXPECT_THROW(
      {
        try {
          read_spm_charsmap(dir.path() / "bad.model");
        } catch (const TokenizerError& e) {
          EXPECT_NE(std::string(e.what()).find("bad.model: not a SentencePiece model"),
                    std::string::npos);
          throw;
        }
      },
      TokenizerError);
  EXPECT_THROW(PrecompiledCharsmap(std::string("\x40\x00\x00\x00", 4), "m.model"), TokenizerError);
  EXPECT_THROW(UnigramModel({"a"}, {0.0, 1.0}, 0), TokenizerError);
}

}  // namespace
}  // namespace bert::tok
