#include <gtest/gtest.h>

#include "bert/common/error.h"
#include "bert/tokenizer/sentencepiece_model.h"
#include "tests/support/test_support.h"

namespace bert::tok {
namespace {

TEST(SentencePieceTest, EncodesWithOffsetsIntoTheOriginalText) {
  const auto model =
      testing::shared_dir() / "data" / "sentencepiece" / "sentencepiece_test_model.model";
  BERTFT_REQUIRE_PATH(model);
  SentencePieceTokenizer spm(model);
  EXPECT_EQ(spm.vocab_size(), 1000);
  EXPECT_EQ(spm.special_tokens().unk, "<unk>");
  EXPECT_EQ(spm.special_tokens().cls, "<s>");
  EXPECT_EQ(spm.special_tokens().sep, "</s>");

  const std::string text = "I saw a girl with a telescope.";
  const auto e = spm.encode(text, std::string_view("Hello world"));
  EXPECT_EQ(e.tokens.front(), "<s>");
  EXPECT_EQ(e.ids.front(), spm.token_to_id("<s>"));
  // Every piece's span, read from the original text, is the piece without its word marker.
  for (size_t i = 0; i < e.size(); ++i) {
    if (e.sequence_ids[i] != 0) continue;
    std::string piece = e.tokens[i];
    if (piece.rfind("\xe2\x96\x81", 0) == 0) piece = piece.substr(3);
    const auto [b, end] = e.byte_offsets[i];
    std::string span = text.substr(b, end - b);
    if (!span.empty() && span[0] == ' ') span = span.substr(1);
    EXPECT_EQ(span, piece) << i;
  }
  int second = 0;
  for (auto t : e.type_ids) second += t;
  EXPECT_GT(second, 2);
}

TEST(SentencePieceTest, HfTestModelAndBadFile) {
  const auto model =
      testing::shared_dir() / "data" / "sentencepiece" / "transformers_test_sentencepiece.model";
  BERTFT_REQUIRE_PATH(model);
  SentencePieceTokenizer spm(model);
  EXPECT_EQ(spm.vocab_size(), 1000);
  EXPECT_FALSE(spm.tokenize("This is a test").empty());
  testing::TempDir dir;
  testing::write_bytes(dir.path() / "bad.model", "not a model");
  try {
    SentencePieceTokenizer bad(dir.path() / "bad.model");
    FAIL();
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.model: cannot load sentencepiece model"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace bert::tok
