// Added tokens (HF's add_tokens) in a WordPiece directory: read from tokenizer.json (with their
// options) and added_tokens.json, numbered as HF numbers them, checked against the model's
// embeddings, kept whole in the text, and written back by save(). The match rules themselves
// are compared with HF's tokenizers in tokenizer_reference_test.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "bert/checkpoint/pretrained_dir.h"
#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/tokenizer/factory.h"
#include "bert/tokenizer/wordpiece.h"
#include "tests/support/test_support.h"

namespace bert::tok {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

/// An uncased WordPiece directory of 6 tokens (ids 0-5).
void write_bert_dir(const fs::path& dir) {
  write_file_atomic(dir / "vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nlo\n");
  write_file_atomic(dir / "config.json", R"({"model_type": "bert"})");
  write_file_atomic(dir / "tokenizer_config.json", R"({"do_lower_case": true})");
  write_file_atomic(dir / "model.safetensors", "");
}

std::unique_ptr<Tokenizer> load(const fs::path& dir, int64_t model_vocab_size = 0) {
  return load_tokenizer(PretrainedDir::find(dir), model_vocab_size);
}

std::string error_of(const fs::path& dir, int64_t model_vocab_size = 0) {
  try {
    load(dir, model_vocab_size);
  } catch (const TokenizerError& e) {
    return e.what();
  }
  return "(loaded)";
}

TEST(AddedTokensTest, AddedTokensJsonNumbersAfterTheVocabularyAndKeepsEachWhole) {
  testing::TempDir dir;
  write_bert_dir(dir.path());
  write_file_atomic(dir.path() / "added_tokens.json", R"({"[E2]": 7, "[ENT]": 6, "[MASK]": 4})");
  auto t = load(dir.path());
  EXPECT_EQ(t->vocab_size(), 8);
  EXPECT_EQ(t->token_to_id("[ENT]"), 6);
  EXPECT_EQ(t->id_to_token(7), "[E2]");
  // Not special: normalized (lower-cased) before matching, so "[ent]" and "[ENT]" both match.
  auto e = t->encode("lo[ENT]lo [ent] [E2]");
  EXPECT_EQ(e.ids, (std::vector<int64_t>{2, 5, 6, 5, 6, 7, 3}));
  EXPECT_EQ(e.tokens[2], "[ent]");  // HF's piece: the normalized text it matched
  EXPECT_EQ(e.offsets[2], (std::pair<int64_t, int64_t>{2, 7}));

  // Listed as additional special tokens: special, matched in the raw text only.
  write_file_atomic(dir.path() / "special_tokens_map.json",
                    R"({"additional_special_tokens": ["[E2]"]})");
  t = load(dir.path());
  e = t->encode("[E2] [e2]", std::nullopt, {/*add_special_tokens=*/false});
  EXPECT_EQ(e.ids.front(), 7);
  EXPECT_NE(e.ids.back(), 7);
  // The same listed as newer transformers write it: an object with its "content".
  write_file_atomic(dir.path() / "special_tokens_map.json",
                    R"({"additional_special_tokens": [{"content": "[E2]", "lstrip": false, )"
                    R"("normalized": false, "rstrip": false, "single_word": false}]})");
  t = load(dir.path());
  e = t->encode("[E2] [e2]", std::nullopt, {/*add_special_tokens=*/false});
  EXPECT_EQ(e.ids.front(), 7);
  EXPECT_NE(e.ids.back(), 7);
  // Special added tokens go with the others when decoding without special tokens (HF).
  e = t->encode("lo [E2] lo", std::nullopt, {/*add_special_tokens=*/false});
  EXPECT_EQ(e.ids, (std::vector<int64_t>{5, 7, 5}));
  EXPECT_EQ(t->decode(e.ids), "lo [E2] lo");
  EXPECT_EQ(t->decode(e.ids, /*skip_special_tokens=*/true), "lo lo");

  // Ids that HF would not give are an error naming the file and the token.
  write_file_atomic(dir.path() / "added_tokens.json", R"({"[ENT]": 7})");
  const auto wrong = error_of(dir.path());
  EXPECT_NE(wrong.find("added_tokens.json: added token '[ENT]' has id 7, but Hugging Face "
                       "numbers it 6"),
            std::string::npos)
      << wrong;
  write_file_atomic(dir.path() / "added_tokens.json", R"({"[ENT]": "6"})");
  EXPECT_NE(error_of(dir.path()).find("\"[ENT]\": expected an integer id"), std::string::npos);

  // A model whose embeddings were not resized for them.
  write_file_atomic(dir.path() / "added_tokens.json", R"({"[ENT]": 6, "[E2]": 7})");
  const auto small = error_of(dir.path(), 7);
  EXPECT_NE(small.find("added token '[E2]' has id 7 but the model embeds only 7 tokens"),
            std::string::npos)
      << small;
  EXPECT_NO_THROW(load(dir.path(), 8));
}

TEST(AddedTokensTest, TokenizerJsonOptionsAreKeptAndSavedBack) {
  testing::TempDir dir;
  write_bert_dir(dir.path());
  const json file = {{"added_tokens",
                      {{{"id", 0}, {"content", "[PAD]"}, {"special", true}, {"normalized", false}},
                       {{"id", 6},
                        {"content", "<ent>"},
                        {"special", false},
                        {"normalized", false},
                        {"lstrip", true},
                        {"rstrip", true}},
                       {{"id", 5}, {"content", "lo"}, {"single_word", true}},
                       {{"id", 7}, {"content", "Zed"}}}}};
  write_file_atomic(dir.path() / "tokenizer.json", file.dump());
  write_file_atomic(dir.path() / "added_tokens.json", R"({"<ent>": 6, "Zed": 7, "[X]": 8})");
  const auto t = load(dir.path());
  const auto& wordpiece = dynamic_cast<const WordPieceTokenizer&>(*t);
  ASSERT_EQ(wordpiece.added_tokens().size(), 4u);  // [X] only in added_tokens.json: after
  EXPECT_TRUE(wordpiece.added_tokens()[0].lstrip && wordpiece.added_tokens()[0].rstrip);
  EXPECT_FALSE(wordpiece.added_tokens()[0].normalized);
  EXPECT_TRUE(wordpiece.added_tokens()[1].single_word);
  EXPECT_TRUE(wordpiece.added_tokens()[2].normalized);
  EXPECT_EQ(wordpiece.added_tokens()[3].content, "[X]");
  EXPECT_EQ(wordpiece.added_tokens()[3].id, 8);

  const auto e = t->encode("a <ent> lolo lo zed", std::nullopt, {false});
  // "<ent>" takes the spaces on both sides; "lo" is single_word, so "lolo" goes to WordPiece
  // (which has no "##lo": [UNK]).
  ASSERT_EQ(e.ids, (std::vector<int64_t>{1, 6, 1, 5, 7}));
  EXPECT_EQ(e.tokens[1], " <ent> ");
  EXPECT_EQ(e.offsets[1], (std::pair<int64_t, int64_t>{1, 8}));

  // save() writes vocab.txt without them, added_tokens.json and tokenizer.json with them; a
  // reload tokenizes alike.
  testing::TempDir out;
  write_bert_dir(out.path());
  t->save(out.path());
  EXPECT_EQ(read_file(out.path() / "vocab.txt"), "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nlo\n");
  EXPECT_EQ(json::parse(read_file(out.path() / "added_tokens.json")),
            json::parse(R"({"<ent>": 6, "Zed": 7, "[X]": 8})"));
  const auto saved = json::parse(read_file(out.path() / "tokenizer.json"));
  EXPECT_EQ(saved["model"]["vocab"].size(), 6u);
  const auto again = load(out.path());
  for (const auto* text : {"a <ent> lolo lo zed", "[X]lo<ent>ZED [x]"})
    EXPECT_EQ(again->encode(text).ids, t->encode(text).ids) << text;
  const auto& reloaded = dynamic_cast<const WordPieceTokenizer&>(*again);
  ASSERT_EQ(reloaded.added_tokens().size(), 4u);  // now by id, as HF writes them: lo first
  EXPECT_EQ(reloaded.added_tokens()[0].content, "lo");
  EXPECT_TRUE(reloaded.added_tokens()[0].single_word);
  EXPECT_TRUE(reloaded.added_tokens()[1].lstrip && reloaded.added_tokens()[1].rstrip);

  // Bad entries name the file and the entry.
  write_file_atomic(dir.path() / "tokenizer.json",
                    R"({"added_tokens": [{"id": 6, "content": "<ent>", "lstrip": "yes"}]})");
  EXPECT_NE(error_of(dir.path())
                .find("tokenizer.json: \"added_tokens\"[0]: \"lstrip\": expected "
                      "true or false"),
            std::string::npos)
      << error_of(dir.path());
  write_file_atomic(dir.path() / "tokenizer.json", R"({"added_tokens": [{"id": 6}]})");
  EXPECT_NE(error_of(dir.path()).find("\"added_tokens\"[0]: expected an object with a string"),
            std::string::npos);
}

}  // namespace
}  // namespace bert::tok
