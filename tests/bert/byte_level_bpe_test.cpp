// Byte-level BPE without the npm reference: GPT-2's word split, merges by rank, trimmed
// offsets, RoBERTa's layout, and the files a RoBERTa directory holds (read back through the
// tokenizer factory, errors naming file and line). tokenizer_reference_test.cpp compares it with
// HF's own tokenizer on thousands of texts.
#include "bert/tokenizer/byte_level_bpe.h"

#include <gtest/gtest.h>
#include <utf8proc.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "bert/checkpoint/pretrained_dir.h"
#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/tokenizer/factory.h"
#include "bert/tokenizer/unicode.h"
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
  // Every contraction of the pattern, lower case only ("'S" is punctuation, then a word).
  EXPECT_EQ(words("I'm we're they've he'd don't she's IT'S"),
            (std::vector<std::string>{"I", "'m", " we", "'re", " they", "'ve", " he", "'d", " don",
                                      "'t", " she", "'s", " IT", "'", "S"}));
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

TEST(ByteLevelBpeTest, DecodesBytesBackToText) {
  const std::string g = byte_symbol(' ');
  const auto t = tiny({{"l", "o"}, {g, "lo"}, {"h", "e"}, {"he", "lo"}, {"e", "l"}});
  const auto e = t->encode("helo lo", std::string_view("x \xe2\x98\x83"));  // U+2603: 3 pieces
  EXPECT_EQ(t->decode(e.ids), "<s>helo lo</s></s>x \xe2\x98\x83</s>");
  EXPECT_EQ(t->decode(e.ids, /*skip_special_tokens=*/true), "helo lox \xe2\x98\x83");
  // Part of a character: U+FFFD for the bytes that do not make one, as HF (from_utf8_lossy).
  EXPECT_EQ(t->decode({t->token_to_id(byte_symbol(0xe2)), t->token_to_id("h")}), "\xef\xbf\xbdh");
}

// Unicode's White_Space property, derived here from the general categories (every space,
// line and paragraph separator) plus the controls it names (\t to \r and U+0085, NEL): the
// byte-level BPE's \s, the added tokens' lstrip/rstrip and SentencePiece's splits take it.
TEST(Utf8Test, WhitespaceIsUnicodesWhiteSpaceProperty) {
  for (char32_t c = 0; c < 0x30000; ++c) {
    const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(c));
    const bool white_space = category == UTF8PROC_CATEGORY_ZS || category == UTF8PROC_CATEGORY_ZL ||
                             category == UTF8PROC_CATEGORY_ZP || (c >= 0x09 && c <= 0x0D) ||
                             c == 0x85;
    EXPECT_EQ(unicode::is_whitespace(c), white_space) << std::hex << static_cast<uint32_t>(c);
  }
}

// Full lower-case mappings, as Rust's char::to_lowercase and Python's str.lower give them (HF's
// normalizer without accent stripping, SQuAD's answer normalisation): U+0130 is two code points.
TEST(Utf8Test, LowerCaseIsTheFullMapping) {
  const auto lower = [](char32_t c) {
    std::vector<char32_t> out;
    unicode::append_lowercase(c, out);
    return out;
  };
  EXPECT_EQ(lower(0x130), (std::vector<char32_t>{U'i', 0x307}));
  EXPECT_EQ(lower(U'A'), std::vector<char32_t>{U'a'});
  EXPECT_EQ(lower(0xC9), std::vector<char32_t>{0xE9});      // É
  EXPECT_EQ(lower(0x3A3), std::vector<char32_t>{0x3C3});    // Σ, without context: σ
  EXPECT_EQ(lower(0x1E9E), std::vector<char32_t>{0xDF});    // ẞ
  EXPECT_EQ(lower(0x4E2D), std::vector<char32_t>{0x4E2D});  // no case
}

// Rust regex's \w, which HF's single_word added tokens test around a match, includes the
// joiners (Join_Control): ZWNJ and ZWJ, as inside emoji sequences and Indic words.
TEST(Utf8Test, WordCharactersIncludeTheJoiners) {
  EXPECT_TRUE(unicode::is_word_char(0x200C));
  EXPECT_TRUE(unicode::is_word_char(0x200D));
  EXPECT_TRUE(unicode::is_word_char(U'_'));
  EXPECT_TRUE(unicode::is_word_char(0x24B6));   // Ⓐ, Alphabetic
  EXPECT_FALSE(unicode::is_word_char(0x200B));  // zero-width space: not a joiner
  EXPECT_FALSE(unicode::is_word_char(U'-'));
}

TEST(Utf8Test, InvalidSequencesBecomeOneReplacementEachMaximalSubpart) {
  // Python's bytes.decode("utf-8", "replace") on the same bytes.
  const std::string r = "\xef\xbf\xbd";
  EXPECT_EQ(unicode::replace_invalid_utf8("a\xe2\x82"), "a" + r);
  EXPECT_EQ(unicode::replace_invalid_utf8("\xed\xa0\x80"), r + r + r);  // a surrogate
  EXPECT_EQ(unicode::replace_invalid_utf8("\xc0\x80"), r + r);          // overlong
  EXPECT_EQ(unicode::replace_invalid_utf8("\xe0\x80\xaf"), r + r + r);
  EXPECT_EQ(unicode::replace_invalid_utf8("\xf4\x90\x80\x80"), r + r + r + r);  // > U+10FFFF
  EXPECT_EQ(unicode::replace_invalid_utf8("\xf0\x9f\x98x"), r + "x");
  EXPECT_EQ(unicode::replace_invalid_utf8("\xff"), r);
  EXPECT_EQ(unicode::replace_invalid_utf8("\xe2\x82\xac\xe2"), "\xe2\x82\xac" + r);
  EXPECT_EQ(unicode::replace_invalid_utf8("\xf0\x9f\x98\x80 ok"), "\xf0\x9f\x98\x80 ok");
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

// HF's rules (its Rust tokenizers and the Python GPT-2 tokenizer alike) where a vocabulary or
// merge list is unusual: a merge listed twice takes its later rank (a map built in order); a
// merges.txt with CRLF line ends reads as with LF; a byte without its symbol in the vocabulary
// is the unknown token.
TEST(ByteLevelBpeTest, DuplicateMergesCrlfMergesAndBytesOutsideTheVocabularyAsHfs) {
  std::vector<std::string> vocab = {"<s>", "<pad>", "</s>", "<unk>"};
  for (int b = 0; b < 256; ++b)
    if (byte_symbol(static_cast<unsigned char>(b)) != "z")
      vocab.push_back(byte_symbol(static_cast<unsigned char>(b)));
  for (const auto* token : {"el", "he", "<mask>"}) vocab.push_back(token);
  // "e l" ranks 2 (its second line), after "h e": "hel" is "he" + "l", not "h" + "el".
  const ByteLevelBpeTokenizer t(vocab, {{"e", "l"}, {"h", "e"}, {"e", "l"}},
                                ByteLevelBpeTokenizer::Options{});
  EXPECT_EQ(t.encode("hel", std::nullopt).tokens,
            (std::vector<std::string>{"<s>", "he", "l", "</s>"}));
  const auto z = t.encode("hz", std::nullopt);
  ASSERT_EQ(z.size(), 4u);
  EXPECT_EQ(z.ids[2], t.special_tokens().unk_id);

  testing::TempDir dir;
  nlohmann::json vocab_json = nlohmann::json::object();
  for (size_t i = 0; i < vocab.size(); ++i) vocab_json[vocab[i]] = i;
  write_file_atomic(dir.path() / "vocab.json", vocab_json.dump());
  write_file_atomic(dir.path() / "merges.txt", "#version: 0.2\r\nh e\r\ne l\r\n");
  const auto crlf =
      ByteLevelBpeTokenizer::from_files(dir.path() / "vocab.json", dir.path() / "merges.txt", {});
  EXPECT_EQ(crlf->encode("hel", std::nullopt).tokens,
            (std::vector<std::string>{"<s>", "he", "l", "</s>"}));
  write_file_atomic(dir.path() / "merges.txt", "#version: 0.2\nh e l\n");
  const auto three = testing::error_message([&] {
    ByteLevelBpeTokenizer::from_files(dir.path() / "vocab.json", dir.path() / "merges.txt", {});
  });
  EXPECT_NE(three.find("merges.txt:2: expected two tokens separated by one space, got 'h e l'"),
            std::string::npos)
      << three;
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

// Added tokens in a RoBERTa directory (vocab.json has 263 entries): numbered after it, kept whole
// with their options, saved back; a SentencePiece directory with added tokens is refused, naming
// them (the matching rules are compared with HF in tokenizer_reference_test).
TEST(AddedTokensTest, ByteLevelBpeAndXlmRobertaKeepThemWholeOtherSentencePieceRefuses) {
  testing::TempDir dir;
  const auto t = tiny_roberta_dir(dir.path());
  const auto load = [&](const std::filesystem::path& d) {
    return load_tokenizer(PretrainedDir::find(d), 0);
  };
  const auto error = [&] {
    try {
      load(dir.path());
    } catch (const TokenizerError& e) {
      return std::string(e.what());
    }
    return std::string("(loaded)");
  };
  write_file_atomic(dir.path() / "added_tokens.json", R"({"<ent>": 263, "<mask>": 262})");
  auto loaded = load(dir.path());
  EXPECT_EQ(loaded->vocab_size(), 264);
  auto e = loaded->encode("lo<ent>lo", std::nullopt, {false});
  EXPECT_EQ(e.ids, (std::vector<int64_t>{t->token_to_id("lo"), 263, t->token_to_id("lo")}));
  write_file_atomic(dir.path() / "added_tokens.json", R"({"<ent>": 270})");
  EXPECT_NE(error().find("added_tokens.json: added token '<ent>' has id 270, but Hugging Face "
                         "numbers it 263 (its vocabulary id, else the next id after "
                         "vocab.json's 263 entries"),
            std::string::npos)
      << error();
  std::filesystem::remove(dir.path() / "added_tokens.json");
  nlohmann::json file = {{"added_tokens",
                          {{{"id", 0}, {"content", "<s>"}, {"special", true}},
                           {{"id", 263},
                            {"content", "covid"},
                            {"special", false},
                            {"lstrip", true},
                            {"rstrip", true}}}}};
  write_file_atomic(dir.path() / "tokenizer.json", file.dump());
  loaded = load(dir.path());
  e = loaded->encode("lo  covid lo", std::nullopt, {false});
  ASSERT_EQ(e.ids.size(), 3u);
  EXPECT_EQ(e.tokens[1], "  covid ");  // the text it took; offsets trimmed as RoBERTa's
  EXPECT_EQ(e.offsets[1], (std::pair<int64_t, int64_t>{4, 9}));
  testing::TempDir out;
  loaded->save(out.path());
  write_file_atomic(out.path() / "config.json", R"({"model_type": "roberta"})");
  write_file_atomic(out.path() / "model.safetensors", "");
  EXPECT_EQ(nlohmann::json::parse(read_file(out.path() / "added_tokens.json")),
            nlohmann::json::parse(R"({"covid": 263})"));
  EXPECT_EQ(load(out.path())->encode("lo  covid lo").ids, loaded->encode("lo  covid lo").ids);

  const auto spm =
      testing::shared_dir() / "data" / "sentencepiece" / "sentencepiece_test_model.model";
  BERTFT_REQUIRE_PATH(spm);
  testing::TempDir xlmr;
  std::filesystem::copy_file(spm, xlmr.path() / "spiece.model");
  write_file_atomic(xlmr.path() / "config.json", R"({"model_type": "bert"})");
  write_file_atomic(xlmr.path() / "model.safetensors", "");
  EXPECT_NO_THROW(load(xlmr.path()));
  write_file_atomic(xlmr.path() / "added_tokens.json", R"({"<ent>": 1000})");
  try {
    load(xlmr.path());
    ADD_FAILURE() << "added tokens were accepted";
  } catch (const TokenizerError& err) {
    EXPECT_NE(std::string(err.what())
                  .find((xlmr.path() / "added_tokens.json").string() +
                        ": added tokens are not supported for SentencePiece models numbered by "
                        "their own ids (only for WordPiece, byte-level BPE and XLM-R's fairseq "
                        "ids): '<ent>' (id 1000)"),
              std::string::npos)
        << err.what();
  }
  // An added_tokens.json that lists the model's own special tokens alone (as HF may write one)
  // adds nothing, so it is no reason to refuse.
  std::filesystem::remove(xlmr.path() / "added_tokens.json");
  const auto plain = load(xlmr.path());
  const auto& specials = plain->special_tokens();
  ASSERT_GE(specials.cls_id, 0);
  write_file_atomic(
      xlmr.path() / "added_tokens.json",
      nlohmann::json{{specials.cls, specials.cls_id}, {specials.sep, specials.sep_id}}.dump());
  EXPECT_EQ(load(xlmr.path())->vocab_size(), plain->vocab_size());
  // With XLM-R's fairseq ids they are HF's added tokens: numbered after the vocabulary (the
  // declared id must agree), kept whole, saved again as added_tokens.json.
  write_file_atomic(xlmr.path() / "config.json", R"({"model_type": "xlm-roberta"})");
  std::filesystem::remove(xlmr.path() / "added_tokens.json");
  const int64_t base = load(xlmr.path())->vocab_size();
  write_file_atomic(xlmr.path() / "added_tokens.json", nlohmann::json{{"<ent>", base}}.dump());
  const auto with_added = load(xlmr.path());
  EXPECT_EQ(with_added->vocab_size(), base + 1);
  const auto e2 = with_added->encode("an<ent> entity", std::nullopt, {false});
  EXPECT_NE(std::find(e2.ids.begin(), e2.ids.end(), base), e2.ids.end());
  testing::TempDir saved;
  with_added->save(saved.path());
  EXPECT_EQ(nlohmann::json::parse(read_file(saved.path() / "added_tokens.json")),
            (nlohmann::json{{"<ent>", base}}));
  write_file_atomic(xlmr.path() / "added_tokens.json", nlohmann::json{{"<ent>", base + 5}}.dump());
  EXPECT_NE(testing::error_message([&] { load(xlmr.path()); })
                .find("added token '<ent>' has id " + std::to_string(base + 5) +
                      ", but Hugging Face numbers it " + std::to_string(base)),
            std::string::npos);
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

// A RoBERTa directory with tokenizer.json and no vocab.json / merges.txt loads the same
// tokenizer (merges written "a b" or as pairs); settings bertft would not follow are refused,
// naming the file and key.
TEST(ByteLevelBpeTest, TokenizerJsonAloneLoadsAsTheVocabularyFiles) {
  using json = nlohmann::json;
  testing::TempDir with_files, alone;
  const auto t = tiny_roberta_dir(with_files.path());
  tiny_roberta_dir(alone.path());
  std::filesystem::remove(alone.path() / "vocab.json");
  std::filesystem::remove(alone.path() / "merges.txt");
  std::filesystem::remove(alone.path() / "tokenizer_config.json");
  const auto load = [](const std::filesystem::path& d) {
    return load_tokenizer(PretrainedDir::find(d), 0);
  };
  const auto tokenizer_json = alone.path() / "tokenizer.json";
  const auto expect_same = [&] {
    const auto loaded = load(alone.path());
    EXPECT_TRUE(loaded->roberta_template());
    EXPECT_EQ(loaded->vocab_size(), t->vocab_size());
    const auto a = t->encode("lo lol <mask>o", std::string_view(" ol lo")),
               b = loaded->encode("lo lol <mask>o", std::string_view(" ol lo"));
    EXPECT_EQ(b.ids, a.ids);
    EXPECT_EQ(b.offsets, a.offsets);
    EXPECT_EQ(loaded->decode(b.ids), t->decode(a.ids));
  };
  expect_same();
  EXPECT_EQ(tokenizer_file(PretrainedDir::find(alone.path())), tokenizer_json);
  EXPECT_EQ(tokenizer_kind(*load(alone.path())), "byte-level BPE");
  auto file = json::parse(read_file(tokenizer_json));
  const auto original = file;
  for (auto& m : file["model"]["merges"]) {  // as HF's tokenizers 0.20 and later write them
    const auto text = m.get<std::string>();
    m = json::array({text.substr(0, text.find(' ')), text.substr(text.find(' ') + 1)});
  }
  file["model"]["continuing_subword_prefix"] = nullptr;
  write_file_atomic(tokenizer_json, file.dump());
  expect_same();

  const auto refused = [&](const std::function<void(json&)>& change, const std::string& message) {
    auto changed = original;
    change(changed);
    write_file_atomic(tokenizer_json, changed.dump());
    const auto error = testing::error_message([&] { load(alone.path()); });
    EXPECT_NE(error.find(tokenizer_json.string() + ": " + message), std::string::npos) << error;
  };
  refused([](json& f) { f["model"]["dropout"] = 0.1; },
          "\"model.dropout\": 0.1 (not null); bertft's byte-level BPE is RoBERTa's");
  refused([](json& f) { f["model"]["merges"][1] = json::array({"lo"}); },
          "\"model.merges\": merge 2: [\"lo\"]: expected \"a b\" or [\"a\", \"b\"]");
  // A merge written as one string has one space, with a symbol on each side of it.
  for (const std::string merge : {" lo", "lo ", "l o x", "lo"})
    refused([&](json& f) { f["model"]["merges"][1] = merge; },
            "\"model.merges\": merge 2: \"" + merge + "\": expected \"a b\"");
  refused([](json& f) { f["model"]["vocab"]["lo"] = 999; },
          "\"model.vocab\": \"lo\": id 999: the ids must be 0 to");
  refused([](json& f) { f["pre_tokenizer"]["add_prefix_space"] = true; },
          "\"pre_tokenizer.add_prefix_space\": true (not false)");
  refused(
      [](json& f) {
        f["normalizer"] = {{"type", "NFC"}};
      },
      "\"normalizer.type\": 'NFC' (RoBERTa's has none)");
  refused(
      [](json& f) {
        f["post_processor"] = {{"type", "BertProcessing"}};
      },
      "\"post_processor.type\": 'BertProcessing' (bertft adds <s> A </s></s> B </s>)");
  refused([](json& f) { f["decoder"] = nullptr; }, "\"decoder.type\": none");
  refused([](json& f) { f["model"]["type"] = "WordLevel"; },
          "\"model.type\": a 'WordLevel' model; bertft reads a tokenizer.json without its "
          "vocabulary files only for WordPiece, byte-level BPE and XLM-R's Unigram");
}

}  // namespace
}  // namespace bert::tok
