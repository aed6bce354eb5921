#include "bert/tokenizer/wordpiece.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "bert/checkpoint/pretrained_dir.h"
#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/tokenizer/factory.h"
#include "tests/support/test_support.h"

namespace bert::tok {
namespace {

namespace fs = std::filesystem;
using Tokens = std::vector<std::string>;
using Offsets = std::vector<std::pair<int64_t, int64_t>>;

fs::path vocab_path(bool uncased) {
  return testing::shared_dir() / "data" / "bert-vocab" /
         (uncased ? "bert-base-uncased-vocab.txt" : "bert-base-cased-vocab.txt");
}

std::unique_ptr<WordPieceTokenizer> real(bool uncased) {
  WordPieceOptions o;
  o.normalizer.lowercase = uncased;
  o.normalizer.strip_accents = uncased;
  return WordPieceTokenizer::from_file(vocab_path(uncased), o);
}

Tokens pieces(const Tokenizer& t, std::string_view text) {
  Tokens out;
  for (const auto& p : t.tokenize(text)) out.push_back(p.token);
  return out;
}

class RealVocabTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BERTFT_REQUIRE_PATH(vocab_path(false));
    cased_ = real(false);
    uncased_ = real(true);
  }
  std::unique_ptr<WordPieceTokenizer> cased_, uncased_;
};

TEST_F(RealVocabTest, SpecialIdsOfBertBase) {
  const auto& s = cased_->special_tokens();
  EXPECT_EQ(s.pad_id, 0);
  EXPECT_EQ(s.unk_id, 100);
  EXPECT_EQ(s.cls_id, 101);
  EXPECT_EQ(s.sep_id, 102);
  EXPECT_EQ(s.mask_id, 103);
  EXPECT_EQ(cased_->vocab_size(), 28996);
  EXPECT_EQ(uncased_->vocab_size(), 30522);
}

TEST_F(RealVocabTest, DecodesAsHf) {
  // HF's outputs (transformers 4.31, tokenizer.decode) for these texts' ids.
  const auto decode = [&](std::string_view text, bool skip) {
    return cased_->decode(cased_->encode(text).ids, skip);
  };
  EXPECT_EQ(decode("Hello, world! It isn't fine.", false),
            "[CLS] Hello, world! It isn't fine. [SEP]");
  EXPECT_EQ(decode("Hello, world! It isn't fine.", true), "Hello, world! It isn't fine.");
  EXPECT_EQ(decode("The playing [MASK] of Z\u00fcrich's co-op ?", false),
            "[CLS] The playing [MASK] of Z\u00fcrich's co - op? [SEP]");
  EXPECT_EQ(decode("The playing [MASK] of Z\u00fcrich's co-op ?", true),
            "The playing of Z\u00fcrich's co - op?");
  EXPECT_EQ(decode("na\u00efve \u4e2d\u6587 text", false),
            "[CLS] na\u00efve \u4e2d \u6587 text [SEP]");
  EXPECT_EQ(cased_->decode({cased_->token_to_id("##ing")}), "##ing");  // a lone continuation
  EXPECT_EQ(cased_->decode({}), "");
  EXPECT_THROW(cased_->decode({cased_->vocab_size()}), TokenizerError);
  // clean_up_tokenization_spaces false: the spaces stay.
  cased_->set_clean_up_spaces(false);
  EXPECT_EQ(decode("Hello, world! It isn't fine.", false),
            "[CLS] Hello , world ! It isn ' t fine . [SEP]");
}

TEST_F(RealVocabTest, EncodesWithIdsOffsetsAndSpecials) {
  const auto e = cased_->encode("The cat sat.");
  EXPECT_EQ(e.tokens, (Tokens{"[CLS]", "The", "cat", "sat", ".", "[SEP]"}));
  EXPECT_EQ(e.ids[1], 1109);
  EXPECT_EQ(e.offsets, (Offsets{{0, 0}, {0, 3}, {4, 7}, {8, 11}, {11, 12}, {0, 0}}));
  EXPECT_EQ(e.special_tokens_mask, (std::vector<int64_t>{1, 0, 0, 0, 0, 1}));
  EXPECT_EQ(uncased_->encode("The").ids[1], 1996);
}

TEST_F(RealVocabTest, GreedyLongestMatchWithContinuations) {
  EXPECT_EQ(pieces(*cased_, "tokenization"), (Tokens{"token", "##ization"}));
  const auto e = cased_->encode("unaffable");
  EXPECT_EQ(e.tokens, (Tokens{"[CLS]", "un", "##af", "##fa", "##ble", "[SEP]"}));
  EXPECT_EQ(e.offsets, (Offsets{{0, 0}, {0, 2}, {2, 4}, {4, 6}, {6, 9}, {0, 0}}));
}

TEST_F(RealVocabTest, PunctuationIsSplitIncludingUnicode) {
  EXPECT_EQ(pieces(*cased_, "don't!"), (Tokens{"don", "'", "t", "!"}));
  EXPECT_EQ(pieces(*cased_, "a$b"), (Tokens{"a", "$", "b"}));  // ASCII symbols count as punctuation
  EXPECT_EQ(pieces(*cased_, "x\u2014y"), (Tokens{"x", "\u2014", "y"}));  // em dash (Pd)
}

TEST_F(RealVocabTest, ControlCharactersAreRemovedAndWhitespaceSplits) {
  EXPECT_EQ(pieces(*cased_,
                   "hel\x01\x7f"
                   "lo"),
            (Tokens{"hello"}));
  EXPECT_EQ(pieces(*cased_, "zero\u200bwidth"), pieces(*cased_, "zerowidth"));  // Cf removed
  EXPECT_EQ(pieces(*cased_, "a\u00a0b\u3000c\td"), (Tokens{"a", "b", "c", "d"}));
  const auto e = cased_->encode("hel\u200blo");
  EXPECT_EQ(e.tokens[1], "hello");
  EXPECT_EQ(e.offsets[1], (std::pair<int64_t, int64_t>{0, 6}));  // spans the removed char
}

TEST_F(RealVocabTest, ChineseCharactersAreSplit) {
  const auto e = cased_->encode("中文x");
  EXPECT_EQ(e.tokens, (Tokens{"[CLS]", "中", "文", "x", "[SEP]"}));
  EXPECT_EQ(e.offsets, (Offsets{{0, 0}, {0, 1}, {1, 2}, {2, 3}, {0, 0}}));
}

// tokenize_chinese_chars false (HF's BertTokenizerFast option): the ideographs stay one word
// with what follows them, as any letters would.
TEST_F(RealVocabTest, ChineseCharactersStayInTheirWordWhereTheOptionIsOff) {
  WordPieceOptions o;
  o.normalizer.lowercase = o.normalizer.strip_accents = false;
  o.normalizer.handle_chinese_chars = false;
  const auto whole = WordPieceTokenizer::from_file(vocab_path(false), o);
  const auto e = whole->encode("中文x y");
  EXPECT_EQ(e.tokens, (Tokens{"[CLS]", "中", "##文", "##x", "y", "[SEP]"}));
  EXPECT_EQ(e.word_ids, (std::vector<int64_t>{-1, 0, 0, 0, 1, -1}));
}

TEST_F(RealVocabTest, AccentsStrippedOnlyWhenLowercasing) {
  const auto u = uncased_->encode("Café");
  EXPECT_EQ(u.tokens, (Tokens{"[CLS]", "cafe", "[SEP]"}));
  EXPECT_EQ(u.offsets[1], (std::pair<int64_t, int64_t>{0, 4}));
  EXPECT_EQ(pieces(*uncased_, "cafe\u0301"), (Tokens{"cafe"}));  // decomposed accent, too
  EXPECT_EQ(pieces(*cased_, "Café"), (Tokens{"Café"}));
}

TEST_F(RealVocabTest, SpecialTokensAreNeverSplit) {
  EXPECT_EQ(pieces(*cased_, "a [SEP] b[MASK]c"), (Tokens{"a", "[SEP]", "b", "[MASK]", "c"}));
  EXPECT_EQ(pieces(*cased_, "[sep]"), (Tokens{"[", "se", "##p", "]"}));  // case-sensitive match
  EXPECT_EQ(pieces(*uncased_, "[SEP]"), (Tokens{"[SEP]"}));
}

TEST_F(RealVocabTest, OverlongWordsBecomeOneUnknown) {
  const std::string word(101, 'a');
  const auto e = cased_->encode("x " + word + " y");
  EXPECT_EQ(e.tokens, (Tokens{"[CLS]", "x", "[UNK]", "y", "[SEP]"}));
  EXPECT_EQ(e.offsets[2], (std::pair<int64_t, int64_t>{2, 103}));
  EXPECT_NE(pieces(*cased_, std::string(100, 'a')), (Tokens{"[UNK]"}));
}

TEST_F(RealVocabTest, OffsetsCountCodePointsNotBytes) {
  const auto e = cased_->encode("😀 Zürich");
  EXPECT_EQ(e.tokens[1], "[UNK]");
  EXPECT_EQ(e.offsets[1], (std::pair<int64_t, int64_t>{0, 1}));
  EXPECT_EQ(e.byte_offsets[1], (std::pair<int64_t, int64_t>{0, 4}));
  EXPECT_EQ(e.offsets[2].first, 2);
  EXPECT_EQ(e.offsets.back(), (std::pair<int64_t, int64_t>{0, 0}));
}

TEST_F(RealVocabTest, PairsGetSegmentIds) {
  const auto e = cased_->encode("Hi there", std::string_view("Bye"));
  EXPECT_EQ(e.tokens, (Tokens{"[CLS]", "Hi", "there", "[SEP]", "Bye", "[SEP]"}));
  EXPECT_EQ(e.type_ids, (std::vector<int64_t>{0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(e.sequence_ids, (std::vector<int64_t>{-1, 0, 0, -1, 1, -1}));
  EXPECT_EQ(e.offsets[4], (std::pair<int64_t, int64_t>{0, 3}));  // offsets are per text
}

TEST_F(RealVocabTest, TruncationStrategiesMatchHf) {
  // Lengths as in HF tokenizers' own truncation table (max_length 7 without specials).
  const std::string four = "a b c d", eight = "e f g h i j k l", two = "m n";
  EncodeOptions o;
  o.max_length = 7 + 3;
  auto lengths = [&](const std::string& a, const std::string& b) {
    const auto e = cased_->encode(a, std::string_view(b), o);
    int64_t na = 0, nb = 0;
    for (auto s : e.sequence_ids) (s == 0 ? na : s == 1 ? nb : na) += s >= 0;
    return std::pair{na, nb};
  };
  EXPECT_EQ(lengths(two, eight), (std::pair<int64_t, int64_t>{2, 5}));
  EXPECT_EQ(lengths(four, four), (std::pair<int64_t, int64_t>{3, 4}));
  EXPECT_EQ(lengths(eight, four), (std::pair<int64_t, int64_t>{4, 3}));
  EXPECT_EQ(lengths(eight, eight), (std::pair<int64_t, int64_t>{3, 4}));
  o.truncation = Truncation::kOnlySecond;
  EXPECT_EQ(lengths(two, eight), (std::pair<int64_t, int64_t>{2, 5}));
  EXPECT_THROW(cased_->encode(eight, std::string_view(two), o), TokenizerError);
  // Exactly as long as what must go: HF refuses to leave the text empty (SequenceTooShort).
  EXPECT_THROW(cased_->encode("e f g h i j k", std::string_view(two), o), TokenizerError);
  o.truncation = Truncation::kOnlyFirst;
  EXPECT_EQ(lengths(eight, two), (std::pair<int64_t, int64_t>{5, 2}));
  const auto single = cased_->encode(eight, std::nullopt, {true, 5});
  EXPECT_EQ(single.tokens, (Tokens{"[CLS]", "e", "f", "g", "[SEP]"}));
  EXPECT_EQ(single.num_truncated, 5);
}

TEST_F(RealVocabTest, PaddingAndAttentionMask) {
  EncodeOptions o;
  o.max_length = 6;
  o.padding = Padding::kMaxLength;
  const auto e = cased_->encode("Hi", std::nullopt, o);
  EXPECT_EQ(e.ids, (std::vector<int64_t>{101, 8790, 102, 0, 0, 0}));
  EXPECT_EQ(e.attention_mask, (std::vector<int64_t>{1, 1, 1, 0, 0, 0}));
  // HF's padding: special tokens, segment 0, no offsets, no word, no sequence.
  EXPECT_EQ(e.special_tokens_mask, (std::vector<int64_t>{1, 0, 1, 1, 1, 1}));
  EXPECT_EQ(e.type_ids, (std::vector<int64_t>(6, 0)));
  EXPECT_EQ(e.offsets.back(), (std::pair<int64_t, int64_t>{0, 0}));
  EXPECT_EQ(e.word_ids, (std::vector<int64_t>{-1, 0, -1, -1, -1, -1}));
  EXPECT_EQ(e.sequence_ids, (std::vector<int64_t>{-1, 0, -1, -1, -1, -1}));
  o.padding = Padding::kLongest;
  const auto batch =
      cased_->encode_batch({{"Hi", std::nullopt}, {"Hi there you", std::nullopt}}, o);
  EXPECT_EQ(batch[0].size(), batch[1].size());
  EXPECT_EQ(batch[0].attention_mask, (std::vector<int64_t>{1, 1, 1, 0, 0}));
}

// decode()'s clean-up is transformers' clean_up_tokenization: its ten replacements in order
// (the reference test applies this function to HF's decoded text, so it is checked here).
TEST(CleanUpTokenization, IsTransformersReplacementsInOrder) {
  EXPECT_EQ(clean_up_tokenization("i do n't know , he 's here . you 're sure ? we 've seen ! "
                                  "i 'm ' ok ' yes"),
            "i don't know, he's here. you're sure? we've seen! i'm'ok'yes");
  EXPECT_EQ(clean_up_tokenization("it ' s"), "it's");
}

TEST_F(RealVocabTest, BatchEqualsSequentialOnManyThreads) {
  std::vector<std::pair<std::string, std::optional<std::string>>> inputs;
  for (int i = 0; i < 500; ++i)
    inputs.emplace_back(
        "Sentence number " + std::to_string(i) + " – naïve 中文!",
        i % 2 ? std::optional<std::string>("pair " + std::to_string(i)) : std::nullopt);
  const auto batch = cased_->encode_batch(inputs, {}, 4);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto e = inputs[i].second
                       ? cased_->encode(inputs[i].first, std::string_view(*inputs[i].second))
                       : cased_->encode(inputs[i].first);
    ASSERT_EQ(batch[i].ids, e.ids) << i;
    ASSERT_EQ(batch[i].offsets, e.offsets) << i;
  }
}

TEST_F(RealVocabTest, InvalidUtf8IsReported) {
  try {
    cased_->encode("ok \xff\xfe bad");
    FAIL();
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("invalid UTF-8 at byte 3"), std::string::npos) << e.what();
  }
}

TEST(WordPieceCasingTest, CasingMismatchIsCaughtBothWays) {
  BERTFT_REQUIRE_PATH(vocab_path(false));
  WordPieceOptions lower;
  lower.normalizer.lowercase = true;
  try {
    WordPieceTokenizer::from_file(vocab_path(false), lower);
    FAIL();
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("the vocabulary is cased"), std::string::npos);
  }
  WordPieceOptions keep;
  keep.normalizer.lowercase = false;
  keep.normalizer.strip_accents = false;
  try {
    WordPieceTokenizer::from_file(vocab_path(true), keep);
    FAIL();
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("the vocabulary is uncased"), std::string::npos);
  }
  keep.check_casing = CasingCheck::kOff;
  EXPECT_NO_THROW(WordPieceTokenizer::from_file(vocab_path(true), keep));
}

TEST(WordPieceVocabTest, SplitsIntoLongestKnownPieces) {
  WordPieceOptions o;
  o.check_casing = CasingCheck::kOff;
  WordPieceTokenizer wp({"[UNK]", "un", "##aff", "##able", "##a"}, o);
  EXPECT_EQ(pieces(wp, "unaffable"), (Tokens{"un", "##aff", "##able"}));
  EXPECT_EQ(pieces(wp, "unx"), (Tokens{"[UNK]"}));  // any unmatched rest -> the whole word is [UNK]
}

TEST(WordPieceVocabTest, DuplicateTokenNamesBothLines) {
  testing::TempDir dir;
  testing::write_bytes(dir.path() / "vocab.txt", "[UNK]\nab\ncd\nab\n");
  WordPieceOptions o;
  o.check_casing = CasingCheck::kOff;
  try {
    WordPieceTokenizer::from_file(dir.path() / "vocab.txt", o);
    FAIL();
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("vocab.txt:4: duplicate token 'ab' (first on line 2)"),
              std::string::npos);
  }
  EXPECT_THROW(WordPieceTokenizer::from_file(dir.path() / "missing.txt", o), TokenizerError);
}

// As HF, which reads vocab.txt as UTF-8 text: a line that is not is refused, naming it.
TEST(WordPieceVocabTest, LineThatIsNotUtf8IsNamed) {
  testing::TempDir dir;
  testing::write_bytes(dir.path() / "vocab.txt",
                       "[UNK]\nab\r\nc\xFF\xFE"
                       "d\n");
  try {
    read_vocab_file(dir.path() / "vocab.txt");
    FAIL();
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("vocab.txt:3: invalid UTF-8 at byte 1 (0xff)"),
              std::string::npos)
        << e.what();
  }
  testing::write_bytes(dir.path() / "vocab.txt",
                       "[UNK]\nab\r\nc\xC3\xA9"
                       "d\n");
  EXPECT_EQ(read_vocab_file(dir.path() / "vocab.txt"), (std::vector<std::string>{"[UNK]", "ab",
                                                                                 "c\xC3\xA9"
                                                                                 "d"}));
}

/// Cased WordPiece without the casing check, for vocabularies of a few words.
WordPieceOptions few_words_cased() {
  WordPieceOptions o;
  o.check_casing = CasingCheck::kOff;
  o.normalizer.lowercase = false;
  o.normalizer.strip_accents = false;
  return o;
}

/// `dir` as a model directory whose tokenizer is WordPiece over `vocab`: the tokenizer's files,
/// a BERT config.json and empty weights.
void write_model_dir(const fs::path& dir,
                     const std::vector<std::string>& vocab,
                     const WordPieceOptions& o) {
  WordPieceTokenizer(vocab, o).save(dir);
  write_file_atomic(dir / "config.json", R"({"model_type": "bert"})");
  write_file_atomic(dir / "model.safetensors", "");
}

// A model directory whose WordPiece tokenizer is a tokenizer.json alone (no vocab.txt, as some
// directories saved by HF's `tokenizers` have it) loads as the same tokenizer with vocab.txt:
// the vocabulary by id, the normalizer's casing, the added tokens; tokenizer_config.json's
// do_lower_case wins over the normalizer, as in HF's fast tokenizer. What bertft cannot
// tokenize as HF would is refused, naming the key.
TEST(WordPieceTokenizerJson, ADirectoryWithItAloneLoadsAsWithVocabTxt) {
  using json = nlohmann::json;
  auto o = few_words_cased();
  o.added_tokens.push_back({"qz-word", -1});
  const std::vector<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                                          "Hello", "hello", "world", "##s",   "caf",
                                          "##é",   "##e",   ",",     "!"};
  testing::TempDir with_txt, alone;
  write_model_dir(with_txt.path(), vocab, o);
  write_model_dir(alone.path(), vocab, o);
  fs::remove(alone.path() / "vocab.txt");
  const auto load = [](const fs::path& dir) { return load_tokenizer(PretrainedDir::find(dir), 0); };
  const std::string text = "Hello worlds, café! qz-word HELLO";
  const auto want = load(with_txt.path())->encode(text, std::string_view("hello cafe"));
  const auto json_only = load(alone.path());
  const auto got = json_only->encode(text, std::string_view("hello cafe"));
  EXPECT_EQ(got.ids, want.ids);
  EXPECT_EQ(got.offsets, want.offsets);
  EXPECT_EQ(got.type_ids, want.type_ids);
  EXPECT_EQ(json_only->token_to_id("qz-word"), 14);
  EXPECT_EQ(json_only->decode(got.ids, true), load(with_txt.path())->decode(want.ids, true));

  // The casing: without tokenizer_config.json the normalizer's (here lower-casing); with it,
  // its do_lower_case, or HF's BertTokenizerFast default (true) where it has none, unless it
  // names PreTrainedTokenizerFast, which keeps the normalizer's.
  const auto tokenizer_json = alone.path() / "tokenizer.json";
  auto file = json::parse(read_file(tokenizer_json));
  file["normalizer"]["lowercase"] = true;
  write_file_atomic(tokenizer_json, file.dump());
  const auto config = read_file(alone.path() / "tokenizer_config.json");
  fs::remove(alone.path() / "tokenizer_config.json");
  EXPECT_EQ(load(alone.path())->encode("HELLO Cafe").ids, (std::vector<int64_t>{2, 6, 9, 11, 3}));
  write_file_atomic(alone.path() / "tokenizer_config.json", config);  // do_lower_case: false
  EXPECT_EQ(load(alone.path())->encode("Hello").ids, (std::vector<int64_t>{2, 5, 3}));
  file["normalizer"]["lowercase"] = false;
  write_file_atomic(tokenizer_json, file.dump());
  write_file_atomic(alone.path() / "tokenizer_config.json",
                    R"({"tokenizer_class": "BertTokenizer"})");
  EXPECT_EQ(load(alone.path())->encode("Hello").ids, (std::vector<int64_t>{2, 6, 3}));
  write_file_atomic(alone.path() / "tokenizer_config.json",
                    R"({"tokenizer_class": "PreTrainedTokenizerFast"})");
  EXPECT_EQ(load(alone.path())->encode("Hello").ids, (std::vector<int64_t>{2, 5, 3}));
  write_file_atomic(alone.path() / "tokenizer_config.json", config);

  // The model's max_input_chars_per_word: a longer word is [UNK]; 0, a string or a negative
  // number is refused.
  {
    auto limited = file;
    limited["model"]["max_input_chars_per_word"] = 5;
    write_file_atomic(tokenizer_json, limited.dump());
    EXPECT_EQ(load(alone.path())->encode("Hello worlds").ids, (std::vector<int64_t>{2, 5, 1, 3}));
    for (const json& bad : {json(0), json("5"), json(-1)}) {
      limited["model"]["max_input_chars_per_word"] = bad;
      write_file_atomic(tokenizer_json, limited.dump());
      EXPECT_THROW(load(alone.path()), TokenizerError) << bad;
    }
    // The vocabulary's ids run from 0 to its size - 1: one past the end is refused by name.
    auto past = file;
    past["model"]["vocab"]["!"] = past["model"]["vocab"].size();
    write_file_atomic(tokenizer_json, past.dump());
    const auto message = testing::error_message([&] { load(alone.path()); });
    EXPECT_NE(message.find("\"!\": id 14: the ids must be 0 to 13, each once"), std::string::npos)
        << message;
    write_file_atomic(tokenizer_json, file.dump());
  }

  // The special tokens the post-processor names (TemplateProcessing: "<cls> $A <sep>"), where the
  // vocabulary has no [CLS] or [SEP].
  {
    auto renamed = json::parse(read_file(tokenizer_json));
    auto& v = renamed["model"]["vocab"];
    v["<cls>"] = v["[CLS]"], v["<sep>"] = v["[SEP]"];
    v.erase("[CLS]"), v.erase("[SEP]");
    for (auto& added : renamed["added_tokens"])
      if (added["content"] == "[CLS]" || added["content"] == "[SEP]")
        added["content"] = added["content"] == "[CLS]" ? "<cls>" : "<sep>";
    const auto special = [](const char* id) {
      return json{{"SpecialToken", {{"id", id}, {"type_id", 0}}}};
    };
    const json a = {{"Sequence", {{"id", "A"}, {"type_id", 0}}}};
    const json b = {{"Sequence", {{"id", "B"}, {"type_id", 1}}}};
    renamed["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single", json::array({special("<cls>"), a, special("<sep>")})},
        {"pair", json::array({special("<cls>"), a, special("<sep>"), b, special("<sep>")})},
        {"special_tokens", json::object()}};
    testing::TempDir dir;
    for (const auto& entry : fs::directory_iterator(alone.path()))
      if (entry.path().filename() != "tokenizer_config.json")
        fs::copy(entry.path(), dir.path() / entry.path().filename());
    write_file_atomic(dir.path() / "tokenizer.json", renamed.dump());
    const auto e = load(dir.path())->encode("Hello");
    EXPECT_EQ(e.tokens, (std::vector<std::string>{"<cls>", "Hello", "<sep>"}));
    EXPECT_EQ(e.ids, (std::vector<int64_t>{2, 5, 3}));
  }

  const auto refused = [&](const std::function<void(json&)>& change, const std::string& message) {
    auto changed = json::parse(read_file(tokenizer_json));
    change(changed);
    testing::TempDir dir;
    for (const auto& entry : fs::directory_iterator(alone.path()))
      fs::copy(entry.path(), dir.path() / entry.path().filename());
    write_file_atomic(dir.path() / "tokenizer.json", changed.dump());
    try {
      load(dir.path());
      ADD_FAILURE() << "accepted: " << message;
    } catch (const TokenizerError& e) {
      EXPECT_NE(
          std::string(e.what()).find((dir.path() / "tokenizer.json").string() + ": " + message),
          std::string::npos)
          << e.what();
    }
  };
  refused([](json& f) { f["model"]["type"] = "WordLevel"; },
          "\"model.type\": a 'WordLevel' model; bertft reads a tokenizer.json without its "
          "vocabulary files only for WordPiece, byte-level BPE and XLM-R's Unigram");
  refused([](json& f) { f["model"]["vocab"]["world"] = 40; },
          "\"model.vocab\": \"world\": id 40: the ids must be 0 to 13, each once");
  refused(
      [](json& f) {
        f["normalizer"] = {{"type", "Sequence"}};
      },
      "\"normalizer.type\": 'Sequence'; bertft's WordPiece normalizes as HF's BertNormalizer");
  refused(
      [](json& f) {
        f["pre_tokenizer"] = {{"type", "Whitespace"}};
      },
      "\"pre_tokenizer.type\": 'Whitespace'; bertft's WordPiece splits words as HF's "
      "BertPreTokenizer");
  fs::remove(tokenizer_json);
  try {
    load(alone.path());
    ADD_FAILURE() << "a directory without tokenizer files was accepted";
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("no tokenizer files"), std::string::npos) << e.what();
  }
}

// decode() cleans up spaces before punctuation unless tokenizer_config.json says
// "clean_up_tokenization_spaces": false; without the key it does, as transformers 4.31 does.
TEST(WordPieceTokenizerConfig, CleanUpSpacesUnlessTheConfigSaysNot) {
  testing::TempDir dir;
  write_model_dir(dir.path(),
                  {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "Hello", "world", ",", "!"},
                  few_words_cased());
  const auto decoded = [&](const std::string& config) {
    write_file_atomic(dir.path() / "tokenizer_config.json", config);
    const auto tokenizer = load_tokenizer(PretrainedDir::find(dir.path()), 0);
    return tokenizer->decode(tokenizer->encode("Hello, world!").ids, true);
  };
  EXPECT_EQ(decoded(R"({"do_lower_case": false})"), "Hello, world!");
  EXPECT_EQ(decoded(R"({"do_lower_case": false, "clean_up_tokenization_spaces": true})"),
            "Hello, world!");
  EXPECT_EQ(decoded(R"({"do_lower_case": false, "clean_up_tokenization_spaces": false})"),
            "Hello , world !");
}

}  // namespace
}  // namespace bert::tok
