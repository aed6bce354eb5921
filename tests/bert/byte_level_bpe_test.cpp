// Byte-level BPE without the npm reference: GPT-2's word split, merges by rank, trimmed
// offsets, RoBERTa's layout, and the files a RoBERTa directory holds (read back through the
// tokenizer factory, errors naming file and line). tokenizer_reference_test.cpp compares it with
// HF's own tokenizer on thousands of texts.
#include "bert/tokenizer/byte_level_bpe.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "bert/checkpoint/pretrained_dir.h"
#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/tokenizer/factory.h"
#include "tests/support/test_support.h"

namespace bert::tok {
namespace {

std::vector<std::string> words(std::string_view text) {
  std::vector<std::string> out;
  for (const auto& [b, e] : byte_level_words(text)) out.emplace_back(text.substr(b, e - b));
  return out;
}

TEST(ByteLevelBpeTest, SplitsWordsAsGpt2sPattern) {
  EXPECT_EQ(words("Hello world's  end!!\n"),
            (std::vector<std::string>{"Hello", " world", "'s", " ", " end", "!!", "\n"}));
  EXPECT_EQ(words("it'll 42x"), (std::vector<std::string>{"it", "'ll", " 42", "x"}));
  EXPECT_EQ(words("a   b"), (std::vector<std::string>{"a", "  ", " b"}));
  EXPECT_EQ(words("a \n"), (std::vector<std::string>{"a", " \n"}));
  EXPECT_EQ(words("\xc3\xa9t\xc3\xa9 \xe2\x82\xac"
                  "5"),  // "été €5"
            (std::vector<std::string>{"\xc3\xa9t\xc3\xa9", " \xe2\x82\xac", "5"}));
  EXPECT_TRUE(words("").empty());
  EXPECT_THROW(byte_level_words("bad \xff"), TokenizerError);
  EXPECT_EQ(byte_symbol(' '), "\xc4\xa0");  // "Ġ"
  EXPECT_EQ(byte_symbol('a'), "a");
}

/// <s> <pad> </s> <unk>, the 256 byte symbols, then the given merges' tokens, <mask>.
std::unique_ptr<ByteLevelBpeTokenizer> tiny(
    const std::vector<std::pair<std::string, std::string>>& merges) {
  std::vector<std::string> vocab = {"<s>", "<pad>", "</s>", "<unk>"};
  for (int b = 0; b < 256; ++b) vocab.push_back(byte_symbol(static_cast<unsigned char>(b)));
  for (const auto& [a, b] : merges) vocab.push_back(a + b);
  vocab.push_back("<mask>");
  return std::make_unique<ByteLevelBpeTokenizer>(vocab, merges, ByteLevelBpeTokenizer::Options{});
}

TEST(ByteLevelBpeTest, MergesByRankWithTrimmedOffsets) {
  const std::string g = byte_symbol(' ');
  const auto t = tiny({{"l", "o"}, {g, "lo"}, {"h", "e"}, {"he", "lo"}, {"e", "l"}});
  const auto e = t->encode("helo lo", std::string_view("x"));
  // "he" + "lo" (rank 3) wins over "e" + "l" (rank 4, but "lo" was merged first).
  EXPECT_EQ(e.tokens,
            (std::vector<std::string>{"<s>", "helo", g + "lo", "</s>", "</s>", "x", "</s>"}));
  EXPECT_EQ(e.offsets[2], (std::pair<int64_t, int64_t>{5, 7}));  // the space is trimmed off
  EXPECT_EQ(e.type_ids, std::vector<int64_t>(e.size(), 0));
  EXPECT_EQ(t->num_special_tokens(true), 4);
  // A character cut between pieces: each piece spans the whole character.
  const auto snow = t->encode("\xe2\x98\x83", std::nullopt);  // U+2603, three byte pieces
  ASSERT_EQ(snow.size(), 5u);
  for (size_t i = 1; i < 4; ++i) EXPECT_EQ(snow.offsets[i], (std::pair<int64_t, int64_t>{0, 1}));
  // <mask> takes the whitespace before it.
  const auto masked = t->encode("a \t<mask>", std::nullopt);
  EXPECT_EQ(masked.tokens[2], " \t<mask>");
  EXPECT_EQ(masked.offsets[2], (std::pair<int64_t, int64_t>{3, 9}));
  EXPECT_EQ(masked.ids[2], t->special_tokens().mask_id);
  // A pre-split word (NER) gets HF's add_prefix_space: "Ġlo", spanning the word itself.
  const auto word = t->tokenize_word("lo");
  ASSERT_EQ(word.size(), 1u);
  EXPECT_EQ(word[0].token, g + "lo");
  EXPECT_EQ(word[0].begin, 0u);
  EXPECT_EQ(word[0].end, 2u);
}

/// A RoBERTa model directory around tiny()'s tokenizer (empty weights: only the tokenizer is
/// loaded from it); returns that tokenizer.
std::unique_ptr<ByteLevelBpeTokenizer> tiny_roberta_dir(const std::filesystem::path& dir) {
  auto t = tiny({{"l", "o"}, {byte_symbol(' '), "lo"}});
  t->save(dir);
  write_file_atomic(dir / "config.json", R"({"model_type": "roberta"})");
  write_file_atomic(dir / "model.safetensors", "");
  return t;
}

// HF keeps an added token whole wherever it appears; bertft's byte-level BPE keeps only the
// special tokens whole, so a directory with any other added token is refused with its file and
// tokens named, rather than tokenized differently (WordPiece supports them: added_tokens_test).
// Added entries that are the special tokens load as before.
TEST(AddedTokensTest, ByteLevelBpeAcceptsOnlyTheSpecialTokens) {
  testing::TempDir dir;
  const auto t = tiny_roberta_dir(dir.path());
  const auto refused = [&](const std::string& file, const std::string& token) {
    try {
      load_tokenizer(PretrainedDir::find(dir.path()), 0);
      ADD_FAILURE() << token << " in " << file << " was accepted";
    } catch (const TokenizerError& e) {
      const std::string what = e.what();
      EXPECT_NE(
          what.find(
              (dir.path() / file).string() +
              ": added tokens are not supported for this vocabulary kind (only for WordPiece): " +
              token),
          std::string::npos)
          << what;
    }
  };
  EXPECT_NO_THROW(load_tokenizer(PretrainedDir::find(dir.path()), 0));
  write_file_atomic(dir.path() / "added_tokens.json", R"({"<mask>": 4})");
  EXPECT_NO_THROW(load_tokenizer(PretrainedDir::find(dir.path()), 0));
  write_file_atomic(dir.path() / "added_tokens.json", R"({"<ent>": 9, "<mask>": 4})");
  refused("added_tokens.json", "'<ent>' (id 9)");
  write_file_atomic(dir.path() / "added_tokens.json", R"(["<ent>"])");
  EXPECT_THROW(load_tokenizer(PretrainedDir::find(dir.path()), 0), TokenizerError);
  std::filesystem::remove(dir.path() / "added_tokens.json");
  nlohmann::json file = {{"added_tokens",
                          {{{"id", 0}, {"content", "<s>"}, {"special", true}},
                           {{"id", 4}, {"content", "<mask>"}, {"special", true}}}}};
  write_file_atomic(dir.path() / "tokenizer.json", file.dump());
  EXPECT_NO_THROW(load_tokenizer(PretrainedDir::find(dir.path()), 0));
  file["added_tokens"].push_back({{"id", 9}, {"content", "covid"}, {"special", false}});
  write_file_atomic(dir.path() / "tokenizer.json", file.dump());
  refused("tokenizer.json", "'covid' (id 9)");
}

TEST(ByteLevelBpeTest, RobertaDirectoryThroughTheFactory) {
  testing::TempDir dir;
  const auto t = tiny_roberta_dir(dir.path());
  const auto loaded = load_tokenizer(PretrainedDir::find(dir.path()), 0);
  EXPECT_TRUE(loaded->roberta_template());
  const auto a = t->encode("lo lo"), b = loaded->encode("lo lo");
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.offsets, b.offsets);
  EXPECT_EQ(loaded->special_tokens().mask, "<mask>");

  // Bad files: errors name the file and line.
  write_file_atomic(dir.path() / "merges.txt", "#version: 0.2\nl o\nlo\n");
  try {
    load_tokenizer(PretrainedDir::find(dir.path()), 0);
    FAIL() << "a one-token merge line was accepted";
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("merges.txt:3:"), std::string::npos) << e.what();
  }
  write_file_atomic(dir.path() / "merges.txt", "q z\n");
  EXPECT_THROW(load_tokenizer(PretrainedDir::find(dir.path()), 0), TokenizerError);  // "qz"?
  write_file_atomic(dir.path() / "merges.txt", "");
  write_file_atomic(dir.path() / "vocab.json", R"({"<s>": 0, "a": 2})");
  try {
    load_tokenizer(PretrainedDir::find(dir.path()), 0);
    FAIL() << "an id gap was accepted";
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("vocab.json: token 'a': id 2"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace bert::tok
