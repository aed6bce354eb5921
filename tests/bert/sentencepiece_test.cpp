#include <gtest/gtest.h>

#include "bert/common/error.h"
#include "bert/common/file_util.h"
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

TEST(SentencePieceTest, FairseqIdsAsHfXlmRobertaTokenizer) {
  // The model HF's own XLM-R tokenizer tests use. fairseq's dictionary puts <s> <pad> </s> <unk>
  // first, then the model's pieces from id 3 on (one higher than the model's ids), <mask> last;
  // the model's unknown piece becomes <unk> (3).
  const auto model =
      testing::shared_dir() / "data" / "sentencepiece" / "transformers_test_sentencepiece.model";
  BERTFT_REQUIRE_PATH(model);
  const SentencePieceTokenizer plain(model);
  const SentencePieceTokenizer xlmr(model, SentencePieceIds::kFairseq);
  EXPECT_EQ(xlmr.vocab_size(), plain.vocab_size() + 2);
  const auto& s = xlmr.special_tokens();
  EXPECT_EQ(std::vector<int64_t>({s.cls_id, s.pad_id, s.sep_id, s.unk_id, s.mask_id}),
            std::vector<int64_t>({0, 1, 2, 3, xlmr.vocab_size() - 1}));
  EXPECT_EQ(xlmr.id_to_token(xlmr.vocab_size() - 1), "<mask>");
  EXPECT_TRUE(xlmr.roberta_template());

  const std::string text = "This is a test of 92000 falsé ☃ words.";
  const auto ours = xlmr.tokenize(text), theirs = plain.tokenize(text);
  ASSERT_EQ(ours.size(), theirs.size());
  bool unknown = false;
  for (size_t i = 0; i < ours.size(); ++i) {
    const bool unk = theirs[i].id == plain.special_tokens().unk_id;
    unknown = unknown || unk;
    EXPECT_EQ(ours[i].id, unk ? 3 : theirs[i].id + 1) << theirs[i].token;
    EXPECT_EQ(xlmr.id_to_token(ours[i].id), unk ? "<unk>" : theirs[i].token);
    EXPECT_EQ(ours[i].begin, theirs[i].begin);
  }
  EXPECT_TRUE(unknown) << "the text should hold a character the model does not know";

  // <s> A </s></s> B </s>, type ids all 0.
  const auto e = xlmr.encode("a b", std::string_view("c"));
  const auto a = xlmr.tokenize("a b").size(), b = xlmr.tokenize("c").size();
  ASSERT_EQ(e.size(), a + b + 4);
  EXPECT_EQ(e.ids[0], 0);
  EXPECT_EQ(e.ids[a + 1], 2);
  EXPECT_EQ(e.ids[a + 2], 2);
  EXPECT_EQ(e.ids.back(), 2);
  EXPECT_EQ(e.type_ids, std::vector<int64_t>(e.size(), 0));
  EXPECT_EQ(e.sequence_ids[a + 3], 1);

  testing::TempDir dir;
  xlmr.save(dir.path());
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "sentencepiece.bpe.model"));
  EXPECT_NE(read_file(dir.path() / "tokenizer_config.json").find("XLMRobertaTokenizer"),
            std::string::npos);
}

}  // namespace
}  // namespace bert::tok
