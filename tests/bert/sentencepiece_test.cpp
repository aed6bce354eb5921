#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "bert/checkpoint/pretrained_dir.h"
#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/tokenizer/factory.h"
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

// A model trained without sentencepiece's dummy prefix gives a first piece without "▁"; it
// still starts word 0, not -1, which reads as a special token (NER would leave the word
// unlabelled).
TEST(SentencePieceTest, AFirstPieceWithoutTheWordMarkerStartsTheFirstWord) {
  testing::TempDir dir;
  std::string corpus;
  const char* words[] = {"alpha", "beta", "gamma", "delta", "epsilon"};
  for (int i = 0; i < 500; ++i)
    corpus += std::string(words[i % 5]) + " " + words[(i * 3 + 1) % 5] + ".\n";
  testing::write_bytes(dir.path() / "corpus.txt", corpus);
  const auto prefix = (dir.path() / "plain").string();
  train_sentencepiece_with_args({"--input=" + (dir.path() / "corpus.txt").string(),
                                 "--model_prefix=" + prefix, "--vocab_size=40",
                                 "--add_dummy_prefix=false", "--hard_vocab_limit=false",
                                 "--minloglevel=1"});
  const SentencePieceTokenizer spm(prefix + ".model");
  const auto pieces = spm.tokenize("gamma delta.");
  ASSERT_GE(pieces.size(), 2u);
  EXPECT_NE(pieces.front().token.rfind("\xe2\x96\x81", 0), 0u) << pieces.front().token;
  EXPECT_EQ(pieces.front().word, 0);
  EXPECT_EQ(pieces.back().word, 1);  // "▁delta" "." (or one piece) is the second word
  const auto e = spm.encode("gamma delta.");
  EXPECT_EQ(e.word_ids.at(1), 0);  // after <s>
  EXPECT_EQ(e.word_ids.at(e.size() - 2), 1);
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
  // Decoding (HF's Metaspace decoder): "▁" as spaces, the first piece's dropped.
  const auto ids = xlmr.encode("This is a test").ids;
  EXPECT_EQ(xlmr.decode(ids), "<s> This is a test</s>");
  EXPECT_EQ(xlmr.decode(ids, /*skip_special_tokens=*/true), "This is a test");

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

// A directory of a SentencePiece model numbered by its own ids names HF's AlbertTokenizer, which
// lower-cases and strips accents unless tokenizer_config.json says not to (its defaults:
// do_lower_case true, keep_accents false). bertft tokenizes as libsentencepiece does, so a
// directory asking HF for either is refused by key, and bertft's own export says neither.
TEST(SentencePieceTest, OwnIdsDirectoryRefusesAlbertsLowerCasingAndSavesWithoutIt) {
  const auto model =
      testing::shared_dir() / "data" / "sentencepiece" / "sentencepiece_test_model.model";
  BERTFT_REQUIRE_PATH(model);
  testing::TempDir dir;
  std::filesystem::copy_file(model, dir.path() / "spiece.model");
  const auto model_files = [](const std::filesystem::path& d) {
    write_file_atomic(d / "config.json", R"({"model_type": "bert"})");
    write_file_atomic(d / "model.safetensors", "");
  };
  model_files(dir.path());
  const auto load = [](const std::filesystem::path& d) {
    return load_tokenizer(PretrainedDir::find(d), 0);
  };
  const auto config = dir.path() / "tokenizer_config.json";
  const auto refused = [&](const std::string& tokenizer_config, const std::string& expected) {
    write_file_atomic(config, tokenizer_config);
    try {
      load(dir.path());
      ADD_FAILURE() << tokenizer_config << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(config.string() + ": " + expected), std::string::npos)
          << e.what();
    }
  };
  EXPECT_NO_THROW(load(dir.path()));  // no tokenizer_config.json: no HF class to follow
  refused(R"({"tokenizer_class": "AlbertTokenizer"})",
          "no \"do_lower_case\" (AlbertTokenizer's default: true), no \"keep_accents\" "
          "(AlbertTokenizer's default: false): Hugging Face's AlbertTokenizer would lower-case");
  refused(R"({"tokenizer_class": "AlbertTokenizer", "do_lower_case": false})",
          "no \"keep_accents\" (AlbertTokenizer's default: false): ");
  refused(R"({"tokenizer_class": "AlbertTokenizer", "do_lower_case": true, "keep_accents": true})",
          "\"do_lower_case\": true: ");
  refused(R"({"tokenizer_class": "AlbertTokenizer", "do_lower_case": false, "keep_accents": 1})",
          "key 'keep_accents': expected true, false or null");
  refused(R"({"tokenizer_class": ["AlbertTokenizer"]})",
          "key 'tokenizer_class': expected a string, got [\"AlbertTokenizer\"]");

  write_file_atomic(config, R"({"tokenizer_class": "AlbertTokenizer", "do_lower_case": false,
                                "keep_accents": true})");
  const auto loaded = load(dir.path());
  const std::string text = "Hello World, naïve café";
  const auto ids = SentencePieceTokenizer(model).encode(text).ids;
  EXPECT_EQ(loaded->encode(text).ids, ids);
  testing::TempDir out;
  loaded->save(out.path());
  model_files(out.path());
  const auto saved = nlohmann::json::parse(read_file(out.path() / "tokenizer_config.json"));
  EXPECT_EQ(saved.value("tokenizer_class", ""), "AlbertTokenizer");
  EXPECT_EQ(saved.value("do_lower_case", true), false);
  EXPECT_EQ(saved.value("keep_accents", false), true);
  EXPECT_EQ(load(out.path())->encode(text).ids, ids);
}

// tokenizer_config.json's model_max_length (the checkpoint's longest input, which HF's
// tokenizer truncates to) is written back as read by each kind of tokenizer; 512 where the
// directory had none, as bertft's exports always say one.
TEST(SentencePieceTest, EachTokenizerKindWritesBackItsModelMaxLength) {
  const auto spm =
      testing::shared_dir() / "data" / "sentencepiece" / "transformers_test_sentencepiece.model";
  BERTFT_REQUIRE_PATH(spm);
  namespace fs = std::filesystem;
  const auto roberta = fs::path(BERTFT_SOURCE_DIR) / "tests" / "fixtures" / "hf_families" /
                       "roberta" / "models" / "base";
  const std::vector<std::pair<std::string, std::function<void(const fs::path&)>>> kinds = {
      {"BertTokenizer",
       [](const fs::path& d) {
         write_file_atomic(d / "vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n");
       }},
      {"RobertaTokenizer",
       [&](const fs::path& d) {
         fs::copy_file(roberta / "vocab.json", d / "vocab.json");
         fs::copy_file(roberta / "merges.txt", d / "merges.txt");
       }},
      {"XLMRobertaTokenizer",
       [&](const fs::path& d) { fs::copy_file(spm, d / "sentencepiece.bpe.model"); }},
  };
  for (const auto& [tokenizer_class, write_files] : kinds)
    for (const int64_t max_length : {0, 38}) {
      testing::TempDir in, out;
      write_file_atomic(in.path() / "config.json", R"({"model_type": "bert"})");
      write_file_atomic(in.path() / "model.safetensors", "");
      write_files(in.path());
      nlohmann::json config = {{"tokenizer_class", tokenizer_class}};
      if (max_length > 0) config["model_max_length"] = max_length;
      write_file_atomic(in.path() / "tokenizer_config.json", config.dump());
      const auto tokenizer = load_tokenizer(PretrainedDir::find(in.path()), 0);
      EXPECT_EQ(tokenizer->model_max_length(), max_length) << tokenizer_class;
      tokenizer->save(out.path());
      const auto saved = nlohmann::json::parse(read_file(out.path() / "tokenizer_config.json"));
      EXPECT_EQ(saved.value("model_max_length", int64_t{0}), max_length > 0 ? max_length : 512)
          << tokenizer_class;
    }
}

// XLM-R's tokenizer.json alone (no .model, as some HF directories come): bertft builds the same
// tokenizer from its Unigram, precompiled map and Metaspace as from the .model, saves it back
// without a .model, and refuses by key what it would tokenize unlike HF.
TEST(SentencePieceTest, XlmRobertaTokenizerJsonAloneLoadsAsTheModel) {
  const auto model =
      testing::shared_dir() / "data" / "sentencepiece" / "transformers_test_sentencepiece.model";
  BERTFT_REQUIRE_PATH(model);
  AddedToken joined, raw;
  joined.content = "new york";
  raw.content = "<ent>";
  raw.normalized = false;
  raw.lstrip = true;
  const SentencePieceTokenizer xlmr(model, SentencePieceIds::kFairseq, {joined, raw});
  testing::TempDir dir;
  xlmr.save(dir.path());
  std::filesystem::remove(dir.path() / "sentencepiece.bpe.model");
  write_file_atomic(dir.path() / "config.json", R"({"model_type": "xlm-roberta"})");
  write_file_atomic(dir.path() / "model.safetensors", "");
  const auto load = [](const std::filesystem::path& d) {
    return load_tokenizer(PretrainedDir::find(d), 0);
  };
  const auto loaded = load(dir.path());
  EXPECT_EQ(tokenizer_kind(*loaded), "SentencePiece");
  try {  // more pieces than the model embeds
    load_tokenizer(PretrainedDir::find(dir.path()), 100);
    ADD_FAILURE() << "a model of 100 embeddings took the whole vocabulary";
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("pieces but the model embeds only 100"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(loaded->vocab_size(), xlmr.vocab_size());
  EXPECT_TRUE(loaded->roberta_template());
  for (const std::string text : {"This is a test of 92000 falsé ☃ words.", "  two  spaces ",
                                 "ﬁnance in New York<ent>x", "fill <mask> here"}) {
    const auto a = xlmr.encode(text, std::string_view("and a pair")),
               b = loaded->encode(text, std::string_view("and a pair"));
    EXPECT_EQ(b.ids, a.ids) << text;
    EXPECT_EQ(b.offsets, a.offsets) << text;
    EXPECT_EQ(loaded->decode(b.ids), xlmr.decode(a.ids)) << text;
  }
  // Saved again: tokenizer.json as it was, and no .model (there is none to write).
  testing::TempDir again;
  loaded->save(again.path());
  EXPECT_FALSE(std::filesystem::exists(again.path() / "sentencepiece.bpe.model"));
  const auto file = dir.path() / "tokenizer.json";
  const auto original = nlohmann::json::parse(read_file(file));
  EXPECT_EQ(nlohmann::json::parse(read_file(again.path() / "tokenizer.json")), original);

  // transformers 4.0's converter: the map alone, WhitespaceSplit before Metaspace; saved so.
  auto old_form = original;
  old_form["normalizer"] = original["normalizer"]["normalizers"][0];
  old_form["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       nlohmann::json::array({{{"type", "WhitespaceSplit"}}, original["pre_tokenizer"]})}};
  write_file_atomic(file, old_form.dump());
  const auto old_loaded = load(dir.path());
  // Whitespace is dropped: no lone "▁" for the trailing spaces, unlike the converter's form.
  EXPECT_EQ(old_loaded->encode("a b").ids, xlmr.encode("a b").ids);
  EXPECT_LT(old_loaded->encode("a b  ").ids.size(), xlmr.encode("a b  ").ids.size());
  const auto old_json =
      dynamic_cast<const SentencePieceTokenizer&>(*old_loaded).hf_tokenizer_json();
  EXPECT_EQ(old_json["pre_tokenizer"], old_form["pre_tokenizer"]);
  EXPECT_EQ(old_json["normalizer"]["normalizers"], nlohmann::json::array({old_form["normalizer"]}));

  // Newer tokenizers write Metaspace's prefix as prepend_scheme; the same tokenizer.
  auto edited = original;
  for (const char* key : {"pre_tokenizer", "decoder"}) {
    edited[key].erase("add_prefix_space");
    edited[key]["prepend_scheme"] = "always";
    edited[key]["split"] = true;
  }
  write_file_atomic(file, edited.dump());
  EXPECT_EQ(load(dir.path())->encode("a  b ﬁ").ids, xlmr.encode("a  b ﬁ").ids);

  const auto refused = [&](const std::function<void(nlohmann::json&)>& edit,
                           const std::string& expected) {
    auto changed = original;
    edit(changed);
    write_file_atomic(file, changed.dump());
    try {
      load(dir.path());
      ADD_FAILURE() << expected << ": accepted";
    } catch (const TokenizerError& e) {
      EXPECT_NE(std::string(e.what()).find(file.string() + ": " + expected), std::string::npos)
          << e.what();
    }
  };
  using J = nlohmann::json;
  refused([](J& j) { j["model"]["byte_fallback"] = true; }, "\"model.byte_fallback\": true");
  refused([](J& j) { j["model"]["unk_id"] = 0; }, "the unknown piece (id 0) is not \"<unk>\"");
  refused([](J& j) { j["model"]["vocab"][0][0] = "<S>"; }, "no piece \"<s>\"");
  refused([](J& j) { j["model"]["vocab"][5] = J::array({"x"}); },
          "\"model.vocab\": entry 5: [\"x\"]: expected [piece, score]");
  refused(
      [](J& j) {
        j["normalizer"] = {{"type", "Lowercase"}};
      },
      "\"normalizer\": {\"type\":\"Lowercase\"} (HF's XLM-R normalizer");
  refused([](J& j) { j["normalizer"]["normalizers"][0]["type"] = "NFKC"; },
          "\"normalizer.normalizers[0]\"");
  refused([](J& j) { j["normalizer"]["normalizers"][0]["precompiled_charsmap"] = "%%"; },
          "\"normalizer.normalizers[0].precompiled_charsmap\": not a base64 string");
  refused(
      [](J& j) {
        j["pre_tokenizer"] = {
            {"type", "Sequence"},
            {"pretokenizers", J::array({j["pre_tokenizer"], j["pre_tokenizer"]})}};
      },
      "\"pre_tokenizer.pretokenizers\": [{");
  refused(
      [](J& j) {
        j["pre_tokenizer"] = {{"type", "WhitespaceSplit"}};
      },
      "\"pre_tokenizer.type\": WhitespaceSplit");
  refused([](J& j) { j["pre_tokenizer"]["add_prefix_space"] = false; },
          "\"pre_tokenizer.add_prefix_space\": false (not true)");
  refused([](J& j) { j["pre_tokenizer"]["split"] = false; },
          "\"pre_tokenizer.split\": false (not true)");
  refused([](J& j) { j["decoder"]["prepend_scheme"] = "first"; },
          "\"decoder.prepend_scheme\": \"first\" (not \"always\")");
  refused([](J& j) { j["pre_tokenizer"]["prepend_scheme"] = "never"; },
          "\"pre_tokenizer.prepend_scheme\": \"never\" (not \"always\")");
  refused([](J& j) { j["pre_tokenizer"]["replacement"] = "_"; },
          "\"pre_tokenizer.replacement\": \"_\" (not \"\u2581\")");
  refused(
      [](J& j) {
        j["post_processor"] = {{"type", "RobertaProcessing"},
                               {"sep", J::array({"<sep>", 2})},
                               {"cls", J::array({"<s>", 0})}};
      },
      "\"post_processor\": not <s> and </s>");
  refused([](J& j) { j["decoder"].erase("replacement"); },
          "\"decoder.replacement\": missing (not \"\u2581\")");
  refused([](J& j) { j["post_processor"]["single"].erase(0); },
          "\"post_processor.single\": $A </s>");
  refused(
      [](J& j) {
        j["post_processor"] = {{"type", "BertProcessing"}};
      },
      "\"post_processor.type\": 'BertProcessing'");
}

}  // namespace
}  // namespace bert::tok
