// Differential test against Hugging Face's own tokenizer (the Rust `tokenizers` core through
// its Node binding, installed from npm by scripts/setup.sh). Thousands of real and adversarial
// texts are encoded by both; ids, tokens, offsets and type ids must be identical.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <unordered_map>

#include "bert/checkpoint/pretrained_dir.h"
#include "bert/common/file_util.h"
#include "bert/common/strings.h"
#include "bert/tokenizer/byte_level_bpe.h"
#include "bert/tokenizer/factory.h"
#include "bert/tokenizer/hf_added_tokens.h"
#include "bert/tokenizer/sentencepiece_model.h"
#include "bert/tokenizer/unicode.h"
#include "bert/tokenizer/wordpiece.h"
#include "tests/support/test_support.h"

namespace bert::tok {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path node_modules() {
  if (const char* env = std::getenv("BERTFT_NODE_MODULES")) return env;
  return fs::path(BERTFT_BINARY_DIR) / "npm" / "node_modules";
}

std::string utf8(char32_t c) {
  std::string s;
  unicode::append_utf8(c, s);
  return s;
}

struct Input {
  std::string text;
  std::optional<std::string> pair = std::nullopt;
};

std::vector<Input> adversarial_inputs() {
  std::vector<Input> in = {
      {"Hello, world!"},
      {""},
      {"   "},
      {"\t\n\r"},
      {"a\x01"
       "b\x7f"
       "c"},
      {"zero\u200bwidth\u200djoin"},
      {"soft\u00adhyphen"},
      {"nbsp\u00a0here\u3000ideographic\u2009thin"},
      {"line\u2028sep\u2029para\u0085nel"},
      {"Café naïve résumé Ångström"},
      {"cafe\u0301 decomposed"},
      {"ÉCOLE ÉLÉMENTAIRE"},
      {"İstanbul ılık"},
      {"straße STRASSE ß"},
      {"ﬁnance ﬂow"},
      {"Ωmega ΣΊΣΥΦΟΣ σ ς"},
      {"日本語のテキスト"},
      {"中文字符和English混合"},
      {"한국어 텍스트"},
      {"😀 emoji 👍🏽 family 👨‍👩‍👧 flags 🇩🇪"},
      {"x😀y"},
      {"math 𝒳𝓎 𝟘𝟙"},
      {"CJK ext 𠀀𠀁 𪜀"},
      {"[CLS] [SEP] [MASK] [PAD] [UNK] inside"},
      {"a[SEP]b[MASK]c"},
      {"[sep] [Mask] [CLS"},
      {"[[CLS]]"},
      {"don't stop-believing... (really?) {yes} <no> \"quoted\" `tick`"},
      {"$100 +5% a=b^c|d~e@f#g&h*i"},
      {"«guillemets» „quotes“ ‘single’ — dash – en … ellipsis ¿qué? ¡sí!"},
      {"١٢٣ عربى النص"},
      {"עברית טקסט"},
      {"हिन्दी पाठ"},
      {"ไทย"},
      {"\ufeffBOM at start"},
      {"replacement \ufffd char"},
      {"private \ue000 use"},
      {"combining a\u0300\u0301\u0302 stacked"},
      {"variation \u2764\ufe0f select"},
      {"tab\tsep\tvalues"},
      {std::string(101, 'a')},
      {std::string(100, 'a')},
      {"x" + std::string(150, 'b') + " y"},
      {std::string(60, 'q') + "é" + std::string(60, 'q')},
      {"supercalifragilisticexpialidocious antidisestablishmentarianism"},
      {"The quick brown fox.", std::string("Jumps over the lazy dog!")},
      {"[CLS]", std::string("[SEP]")},
      {"", std::string("only pair")},
      {"Ünïcödé pair", std::string("日本 😀 x")},
  };
  for (int i = 0; i < 40; ++i) {  // random mixtures of tricky characters
    static const char32_t pool[] = {U'a',  U'Z',   U' ',    U'\t',  0x301, 0x308, U'é', U'.',
                                    U'\'', 0x4E2D, 0x1F600, 0x200B, 0x0,   0x7,   0xA0, U'-',
                                    U'[',  U']',   U'#',    0x130,  0xDF,  0x3000};
    std::mt19937 rng(static_cast<uint32_t>(i));
    std::string s;
    for (int k = 0; k < 40; ++k) s += utf8(pool[rng() % std::size(pool)]);
    in.push_back({s});
  }
  return in;
}

/// Every code point of the first three planes, 32 to a text, each between letters.
std::vector<Input> code_point_sweep() {
  std::vector<Input> in;
  std::string text;
  int count = 0;
  for (char32_t c = 0x80; c < 0x30000; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    text += "x" + utf8(c) + "y ";
    if (++count == 32) {
      in.push_back({text});
      text.clear();
      count = 0;
    }
  }
  if (!text.empty()) in.push_back({text});
  return in;
}

std::vector<Input> real_inputs() {
  std::vector<Input> in;
  const auto squad = testing::shared_dir() / "data" / "squad" / "dev-v1.1.json";
  if (fs::exists(squad)) {
    std::ifstream f(squad);
    const auto data = json::parse(f);
    size_t questions = 0;
    for (const auto& article : data["data"])
      for (const auto& paragraph : article["paragraphs"]) {
        const auto context = paragraph["context"].get<std::string>();
        in.push_back({context});
        for (const auto& qa : paragraph["qas"])
          if (questions++ % 10 == 0) in.push_back({qa["question"].get<std::string>(), context});
      }
  }
  const auto conll = testing::shared_dir() / "data" / "conll2003" / "valid.txt";
  if (fs::exists(conll)) {
    std::ifstream f(conll);
    std::string line, sentence;
    while (std::getline(f, line)) {
      if (line.empty() || line.rfind("-DOCSTART-", 0) == 0) {
        if (!sentence.empty()) in.push_back({sentence});
        sentence.clear();
        continue;
      }
      if (!sentence.empty()) sentence += ' ';
      sentence += line.substr(0, line.find(' '));
    }
  }
  return in;
}

/// Skips the calling test when HF's tokenizers (npm) or node are not installed.
#define BERTFT_REQUIRE_HF_TOKENIZERS()                                                         \
  do {                                                                                         \
    if (!fs::exists(node_modules() / "tokenizers"))                                            \
      GTEST_SKIP() << "HF tokenizers not installed at " << node_modules()                      \
                   << " (scripts/setup.sh installs it)";                                       \
    if (std::system("node --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "node not found"; \
  } while (0)

/// Encodes `inputs` with HF's tokenizers from `tokenizer_json` and with `tokenizer`; fails when
/// any input differs in ids, tokens, offsets (or type ids, with `types`), or in its ids decoded
/// back to text (with and without special tokens), showing the first ten.
void expect_identical_to_hf(const Tokenizer& tokenizer,
                            const json& tokenizer_json,
                            const std::vector<Input>& inputs,
                            bool types) {
  testing::TempDir dir;
  {
    std::ofstream f(dir.path() / "tokenizer.json");
    f << tokenizer_json.dump();
    std::ofstream in(dir.path() / "in.jsonl");
    for (const auto& i : inputs) {
      json j = {{"text", i.text}};
      if (i.pair) j["text_pair"] = *i.pair;
      in << j.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
    }
  }
  const std::string command =
      "BERTFT_NODE_MODULES='" + node_modules().string() + "' node '" + BERTFT_SOURCE_DIR +
      "/tools/hf_tokenizer_ref/encode.js' '" + (dir.path() / "tokenizer.json").string() + "' '" +
      (dir.path() / "in.jsonl").string() + "' '" + (dir.path() / "out.jsonl").string() + "'";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;

  std::ifstream out(dir.path() / "out.jsonl");
  std::string line;
  size_t i = 0, mismatches = 0, decode_mismatches = 0, tokens = 0;
  while (std::getline(out, line)) {
    ASSERT_LT(i, inputs.size());
    const auto ref = json::parse(line);
    const auto& input = inputs[i++];
    ASSERT_FALSE(ref.contains("error")) << ref["error"] << " for " << input.text;
    const Encoding e = input.pair ? tokenizer.encode(input.text, std::string_view(*input.pair))
                                  : tokenizer.encode(input.text);
    json offsets = json::array();
    for (const auto& [b, end] : e.offsets) offsets.push_back({b, end});
    tokens += e.size();
    const bool same = ref["ids"] == json(e.ids) && ref["tokens"] == json(e.tokens) &&
                      ref["offsets"] == offsets &&
                      (!types || ref["token_type_ids"] == json(e.type_ids));
    // decode(): HF's fast tokenizer gives the Rust decode, then (clean_up_tokenization_spaces,
    // true in these tokenizers) Python's clean-up of spaces.
    for (const bool skip : {false, true}) {
      const auto hf_text =
          clean_up_tokenization(ref[skip ? "decoded_skip" : "decoded"].get<std::string>());
      const auto text = tokenizer.decode(e.ids, skip);
      if (text != hf_text && ++decode_mismatches <= 10)
        ADD_FAILURE() << "input " << i - 1 << " decoded" << (skip ? " (no special tokens)" : "")
                      << ": " << json(input.text).dump(-1, ' ', true)
                      << "\n  hf:     " << json(hf_text).dump(-1, ' ', true)
                      << "\n  bertft: " << json(text).dump(-1, ' ', true);
    }
    if (!same && ++mismatches <= 10) {
      ADD_FAILURE() << "input " << i - 1 << ": " << json(input.text).dump(-1, ' ', true)
                    << "\n  hf:     " << ref["tokens"].dump(-1, ' ', true) << " "
                    << ref["offsets"].dump() << "\n  bertft: " << json(e.tokens).dump(-1, ' ', true)
                    << " " << offsets.dump();
    }
  }
  EXPECT_EQ(i, inputs.size());
  EXPECT_EQ(mismatches, 0U) << "of " << inputs.size() << " inputs";
  EXPECT_EQ(decode_mismatches, 0U) << "decoded, of " << inputs.size() << " inputs";
  ::testing::Test::RecordProperty("inputs", static_cast<int>(inputs.size()));
  ::testing::Test::RecordProperty("tokens", static_cast<int>(tokens));
}

/// Every input the comparisons use: adversarial, real (SQuAD, CoNLL) and a code-point sweep.
std::vector<Input> all_inputs() {
  std::vector<Input> inputs = adversarial_inputs();
  for (auto& i : real_inputs()) inputs.push_back(std::move(i));
  for (auto& i : code_point_sweep()) inputs.push_back(std::move(i));
  return inputs;
}

/// Parameter: lower-casing (bert-base-uncased's vocabulary) or not (bert-base-cased's).
class TokenizerReferenceTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    vocab_ = testing::shared_dir() / "data" / "bert-vocab" /
             (GetParam() ? "bert-base-uncased-vocab.txt" : "bert-base-cased-vocab.txt");
    BERTFT_REQUIRE_PATH(vocab_);
    BERTFT_REQUIRE_HF_TOKENIZERS();
  }
  /// The real vocabulary's tokenizer with `added` tokens.
  std::unique_ptr<WordPieceTokenizer> tokenizer(std::vector<AddedToken> added = {}) const {
    WordPieceOptions options;
    options.normalizer.lowercase = GetParam();
    options.normalizer.strip_accents = GetParam();
    options.added_tokens = std::move(added);
    return WordPieceTokenizer::from_file(vocab_, options);
  }
  fs::path vocab_;
};

TEST_P(TokenizerReferenceTest, IdenticalToHuggingFaceTokenizers) {
  const auto tokenizer = this->tokenizer();
  const auto inputs = all_inputs();
  ASSERT_GT(inputs.size(), 2000u);
  expect_identical_to_hf(*tokenizer, tokenizer->hf_tokenizer_json(), inputs, /*types=*/true);
}

// A directory holding only a tokenizer.json that HF's tokenizers wrote for this vocabulary (its
// own serialisation: BertNormalizer with strip_accents null, TemplateProcessing for the cased
// one, BertProcessing for the uncased), no vocab.txt and no tokenizer_config.json: bertft
// builds the WordPiece tokenizer from it alone and encodes every input as HF does from it.
TEST_P(TokenizerReferenceTest, LoadsHfsOwnTokenizerJsonWithoutVocabTxt) {
  testing::TempDir dir;
  const auto file = dir.path() / "tokenizer.json";
  const std::string command = "BERTFT_NODE_MODULES='" + node_modules().string() + "' node '" +
                              BERTFT_SOURCE_DIR + "/tools/hf_tokenizer_ref/make_wordpiece.js' '" +
                              vocab_.string() + "' " + (GetParam() ? "1 bert '" : "0 template '") +
                              file.string() + "'";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  write_file_atomic(dir.path() / "config.json", R"({"model_type": "bert"})");
  write_file_atomic(dir.path() / "model.safetensors", "");
  const auto tokenizer = load_tokenizer(PretrainedDir::find(dir.path()), 0);
  EXPECT_EQ(tokenizer->vocab_size(), GetParam() ? 30522 : 28996);
  expect_identical_to_hf(*tokenizer, json::parse(read_file(file)), all_inputs(), /*types=*/true);
}

/// Added tokens of every kind HF has: normalized (matched after lower-casing and accent
/// stripping), raw with lstrip/rstrip, single_word, one that is a vocabulary line, a special
/// one, ones with spaces, CJK, punctuation or accents inside.
std::vector<AddedToken> every_kind_of_added_token() {
  const auto token = [](std::string content, bool normalized, bool single_word = false,
                        bool lstrip = false, bool rstrip = false, bool special = false) {
    AddedToken t;
    t.content = std::move(content);
    t.normalized = normalized;
    t.single_word = single_word;
    t.lstrip = lstrip;
    t.rstrip = rstrip;
    t.special = special;
    return t;
  };
  return {token("COVID-19", true),
          token("<ent>", false, false, true, true),
          token("ony", true, true),
          token("hello", true),
          token("[E1]", false, false, false, false, true),
          token("New York", true, false, true),
          token("Café", true),
          token("\u4e2d\u6587", true),
          token("x", false, true),
          token("\u00e9", false),
          token("tion", true, false, false, true),
          token("<ent>s", false, true),
          token("  ", true)};
}

/// Texts where the added tokens meet each other, words, whitespace and punctuation.
std::vector<Input> added_token_inputs() {
  std::vector<Input> in = {
      {"COVID-19 covid-19 Covid-19s xCOVID-19 COVID-19x"},
      {"my <ent> name <ent>x   <ent>\t<ent>\u2000<ent>s"},
      {"Anthony ony, ony-ony _ony ony_ \u00e9ony ony\u0301 1ony"},
      {"hello othello HELLO Hello, hello!"},
      {"[E1][E1] a[E1]b [e1]"},
      {"in New York, new  york, NEW YORK and New\tYork  New York"},
      {"Café cafe CAFÉ café cafe\u0301 Cafe\u0301s"},
      {"\u4e2d\u6587 \u4e2d \u6587 x\u4e2d\u6587y"},
      {"x y xx x-x x_x \u00e9x x\u00e9"},
      {"\u00e9t\u00e9 e\u0301te\u0301 \u00c9t\u00c9"},
      {"nation tion  tion\u3000tion, station"},
      {"tion   x tion \t  y tion\u3000\u3000  z"},  // "  " inside what rstrip took, ending first
      {"a  b   c\t\tc"},
      {"<ent>s <ent>s, x<ent>s"},
      {"COVID-19 [SEP] New York", std::string("<ent> hello [E1]")},
  };
  // Random mixtures of the tokens' pieces, letters, marks, whitespace and punctuation.
  static const char* const pool[] = {
      "COVID", "-19",  "covid", "<ent>", "s",      "ony",     "Ony",    "hello",  "[E1]", "New",
      " ",     "York", "\t",    "Caf",   "é",      "e\u0301", "\u4e2d", "\u6587", "x",    "tion",
      "  ",    "a",    "_",     ",",     "\u3000", "\u2000",  "[SEP]",  "1"};
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    std::string text;
    for (int k = 0; k < 12; ++k) text += pool[rng() % std::size(pool)];
    in.push_back({text});
  }
  for (const auto& i : adversarial_inputs()) in.push_back(i);
  return in;
}

TEST_P(TokenizerReferenceTest, AddedTokensAsHuggingFaceTokenizers) {
  const auto tokenizer = this->tokenizer(every_kind_of_added_token());
  // HF numbers them from its own tokenizer.json, as bertft writes it.
  EXPECT_EQ(tokenizer->added_tokens()[0].id, tokenizer->base_vocab_size());
  EXPECT_EQ(tokenizer->added_tokens()[3].id, tokenizer->token_to_id("hello"));
  EXPECT_LT(tokenizer->added_tokens()[3].id, tokenizer->base_vocab_size());
  expect_identical_to_hf(*tokenizer, tokenizer->hf_tokenizer_json(), added_token_inputs(),
                         /*types=*/true);
}

/// A byte-level BPE learnt here from `texts` (GPT-2's recipe, `merges` merges of the most
/// frequent adjacent pair): RoBERTa's specials first, the 256 byte symbols, merged tokens,
/// <mask> last.
std::unique_ptr<ByteLevelBpeTokenizer> learn_bpe(const std::vector<Input>& texts,
                                                 size_t merges,
                                                 std::vector<AddedToken> added = {}) {
  std::map<std::vector<std::string>, int64_t> words;
  for (const auto& t : texts)
    for (const auto* s : {&t.text, t.pair ? &*t.pair : nullptr}) {
      if (s == nullptr) continue;
      for (const auto& [b, e] : byte_level_words(*s)) {
        std::vector<std::string> symbols;
        for (uint32_t k = b; k < e; ++k) symbols.push_back(byte_symbol((*s)[k]));
        ++words[symbols];
      }
    }
  std::vector<std::string> vocab = {"<s>", "<pad>", "</s>", "<unk>"};
  for (int b = 0; b < 256; ++b) vocab.push_back(byte_symbol(static_cast<unsigned char>(b)));
  std::vector<std::pair<std::string, std::string>> learnt;
  std::vector<std::pair<std::vector<std::string>, int64_t>> list(words.begin(), words.end());
  for (size_t m = 0; m < merges; ++m) {
    std::unordered_map<std::string, int64_t> pairs;  // "a\x01b" -> count
    for (const auto& [w, n] : list)
      for (size_t k = 0; k + 1 < w.size(); ++k) pairs[w[k] + '\x01' + w[k + 1]] += n;
    if (pairs.empty()) break;
    // The most frequent pair; the smallest key among equals, so the merges are reproducible.
    const auto top = std::max_element(pairs.begin(), pairs.end(), [](const auto& a, const auto& b) {
                       return a.second < b.second || (a.second == b.second && a.first > b.first);
                     })->first;
    const auto cut = top.find('\x01');
    const std::pair<std::string, std::string> best{top.substr(0, cut), top.substr(cut + 1)};
    learnt.push_back(best);
    vocab.push_back(best.first + best.second);
    for (auto& [w, n] : list)
      for (size_t k = 0; k + 1 < w.size(); ++k)
        if (w[k] == best.first && w[k + 1] == best.second) {
          w[k] += w[k + 1];
          w.erase(w.begin() + static_cast<std::ptrdiff_t>(k) + 1);
        }
  }
  vocab.push_back("<mask>");
  ByteLevelBpeTokenizer::Options options;
  options.added_tokens = std::move(added);
  return std::make_unique<ByteLevelBpeTokenizer>(std::move(vocab), std::move(learnt),
                                                 std::move(options));
}

/// The reference inputs with RoBERTa's mask and special tokens and GPT-2's word pattern's
/// corner cases.
std::vector<Input> bpe_inputs() {
  auto inputs = all_inputs();
  for (const char* masked : {"fill <mask> here", "two  <mask>", "<mask> first", "x<mask>y",
                             "tab\t<mask>\u3000<mask>", "<s>a</s></s>b</s><pad><unk>"})
    inputs.push_back({masked});
  for (const char* words : {"it's we're they've I'm we'll he'd 'S 'sup ''s", "a  b   c\n\nd \t e",
                            "  leading and trailing  ", "x\u00a0y \u2003z", "123 4.5e6 ½ Ⅻ ٣"})
    inputs.push_back({words});
  return inputs;
}

/// A byte-level BPE learnt from the first 600 of `inputs`: from real text when it is there (many
/// multi-level merges), else from the adversarial inputs.
std::unique_ptr<ByteLevelBpeTokenizer> learn_bpe_from(const std::vector<Input>& inputs) {
  return learn_bpe({inputs.begin(), inputs.begin() + std::min<size_t>(inputs.size(), 600)}, 500);
}

TEST(ByteLevelBpeReferenceTest, IdenticalToHuggingFaceTokenizers) {
  BERTFT_REQUIRE_HF_TOKENIZERS();
  const auto inputs = bpe_inputs();
  const auto tokenizer = learn_bpe_from(inputs);
  expect_identical_to_hf(*tokenizer, tokenizer->hf_tokenizer_json(), inputs, /*types=*/false);
}

// A RoBERTa directory holding only the tokenizer.json that HF's tokenizers wrote for a
// vocab.json + merges.txt (its own serialisation: merges as pairs, null prefix and suffix), no
// vocabulary files and no tokenizer_config.json: bertft builds the byte-level BPE from it alone
// and encodes and decodes every input as HF does from it.
TEST(ByteLevelBpeReferenceTest, LoadsHfsOwnTokenizerJsonWithoutVocabJson) {
  BERTFT_REQUIRE_HF_TOKENIZERS();
  const auto inputs = bpe_inputs();
  testing::TempDir files, dir;
  const auto learnt = learn_bpe_from(inputs);
  learnt->save(files.path());
  const auto file = dir.path() / "tokenizer.json";
  const std::string command = "BERTFT_NODE_MODULES='" + node_modules().string() + "' node '" +
                              BERTFT_SOURCE_DIR + "/tools/hf_tokenizer_ref/make_bpe.js' '" +
                              (files.path() / "vocab.json").string() + "' '" +
                              (files.path() / "merges.txt").string() + "' '" + file.string() + "'";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  write_file_atomic(dir.path() / "config.json", R"({"model_type": "roberta"})");
  write_file_atomic(dir.path() / "model.safetensors", "");
  const auto tokenizer = load_tokenizer(PretrainedDir::find(dir.path()), 0);
  EXPECT_EQ(tokenizer->vocab_size(), learnt->vocab_size());
  EXPECT_TRUE(tokenizer->roberta_template());
  expect_identical_to_hf(*tokenizer, json::parse(read_file(file)), inputs, /*types=*/false);
}

TEST(ByteLevelBpeReferenceTest, AddedTokensAsHuggingFaceTokenizers) {
  BERTFT_REQUIRE_HF_TOKENIZERS();
  auto inputs = added_token_inputs();
  for (const char* masked : {"a <mask> <ent>s <mask>", "<ent>\u3000<mask>\t<ent>", " <ent> "})
    inputs.push_back({masked});
  const auto tokenizer = learn_bpe(inputs, 300, every_kind_of_added_token());
  expect_identical_to_hf(*tokenizer, tokenizer->hf_tokenizer_json(), inputs, /*types=*/false);
}

/// The pieces, scores and precompiled normalizer of a SentencePiece .model (protobuf
/// ModelProto: pieces = 1 {piece = 1, score = 2}, normalizer_spec = 3 {precompiled_charsmap = 2}),
/// read with a few lines of wire-format parsing so that HF's Unigram can be built from them.
struct SpmProto {
  std::vector<std::pair<std::string, float>> pieces;
  std::string charsmap;
};

SpmProto read_spm_proto(const fs::path& file) {
  const std::string b = read_file(file);
  const auto varint = [&](const std::string& s, size_t& k) {
    uint64_t v = 0;
    for (int shift = 0; k < s.size(); shift += 7) {
      const auto c = static_cast<unsigned char>(s[k++]);
      v |= uint64_t{c & 0x7Fu} << shift;
      if (c < 0x80) break;
    }
    return v;
  };
  // Calls f(field, wire type, payload) for each field of message `s`.
  const auto each = [&](const std::string& s, auto&& f) {
    size_t k = 0;
    while (k < s.size()) {
      const uint64_t key = varint(s, k);
      const int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
      std::string payload;
      if (wire == 0) {
        payload = std::to_string(varint(s, k));
      } else if (wire == 1 || wire == 5) {
        payload = s.substr(k, wire == 1 ? 8 : 4);
        k += payload.size();
      } else {
        const auto n = static_cast<size_t>(varint(s, k));
        payload = s.substr(k, n);
        k += n;
      }
      f(field, wire, payload);
    }
  };
  SpmProto out;
  each(b, [&](int field, int wire, const std::string& payload) {
    if (field == 1 && wire == 2) {
      std::pair<std::string, float> piece{"", 0.0F};
      each(payload, [&](int f, int w, const std::string& p) {
        if (f == 1 && w == 2) piece.first = p;
        if (f == 2 && w == 5) std::memcpy(&piece.second, p.data(), 4);
      });
      out.pieces.push_back(piece);
    }
    if (field == 3 && wire == 2)
      each(payload, [&](int f, int w, const std::string& p) {
        if (f == 2 && w == 2) out.charsmap = p;
      });
  });
  return out;
}

/// The SentencePiece model HF's own XLM-R tokenizer tests use (in ../shared).
fs::path xlmr_test_model() {
  return testing::shared_dir() / "data" / "sentencepiece" / "transformers_test_sentencepiece.model";
}

/// HF's fast XLM-R tokenizer for a SentencePiece model, as transformers' converter builds it:
/// fairseq's vocabulary, the model's precompiled normalizer then spaces collapsed, Metaspace,
/// Unigram, `<s> A </s></s> B </s>`.
json xlmr_tokenizer_json(const SpmProto& proto) {
  json vocab = json::array({json::array({"<s>", 0.0}), json::array({"<pad>", 0.0}),
                            json::array({"</s>", 0.0}), json::array({"<unk>", 0.0})});
  for (size_t i = 3; i < proto.pieces.size(); ++i)
    vocab.push_back(json::array({proto.pieces[i].first, proto.pieces[i].second}));
  vocab.push_back(json::array({"<mask>", 0.0}));
  const auto added = [](size_t id, const char* content, bool lstrip) {
    return json{{"id", id},         {"content", content}, {"single_word", false},
                {"lstrip", lstrip}, {"rstrip", false},    {"normalized", false},
                {"special", true}};
  };
  const auto special = [](const char* id) {
    return json{{"SpecialToken", {{"id", id}, {"type_id", 0}}}};
  };
  const auto sequence = [](const char* id) {
    return json{{"Sequence", {{"id", id}, {"type_id", 0}}}};
  };
  const json metaspace = {
      {"type", "Metaspace"}, {"replacement", "\u2581"}, {"add_prefix_space", true}};
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens",
       json::array({added(0, "<s>", false), added(1, "<pad>", false), added(2, "</s>", false),
                    added(3, "<unk>", false), added(vocab.size() - 1, "<mask>", true)})},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         json::array(
             {{{"type", "Precompiled"}, {"precompiled_charsmap", base64_encode(proto.charsmap)}},
              {{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}}})}}},
      {"pre_tokenizer", metaspace},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", json::array({special("<s>"), sequence("A"), special("</s>")})},
        {"pair", json::array({special("<s>"), sequence("A"), special("</s>"), special("</s>"),
                              sequence("B"), special("</s>")})},
        {"special_tokens",
         {{"<s>", {{"id", "<s>"}, {"ids", {0}}, {"tokens", {"<s>"}}}},
          {"</s>", {{"id", "</s>"}, {"ids", {2}}, {"tokens", {"</s>"}}}}}}}},
      {"decoder", metaspace},
      {"model", {{"type", "Unigram"}, {"unk_id", 3}, {"vocab", vocab}, {"byte_fallback", false}}}};
}

TEST(XlmRobertaReferenceTest, IdenticalToHuggingFaceTokenizers) {
  // The SentencePiece model HF's own XLM-R tokenizer tests use, with fairseq's ids.
  const auto model = xlmr_test_model();
  BERTFT_REQUIRE_PATH(model);
  BERTFT_REQUIRE_HF_TOKENIZERS();
  const SentencePieceTokenizer tokenizer(model, SentencePieceIds::kFairseq);
  auto inputs = all_inputs();
  for (const char* text : {"fill <mask> here", "two  <mask>", "<mask> first", "x<mask>y",
                           "  leading and trailing  ", "a  b\t\tc", "   ", "ﬁnance ﬂow"})
    inputs.push_back({text});
  expect_identical_to_hf(tokenizer, xlmr_tokenizer_json(read_spm_proto(model)), inputs,
                         /*types=*/true);
}

// A directory holding only XLM-R's tokenizer.json as HF's tokenizers writes it (its own
// spelling: Metaspace's prepend_scheme), no .model: bertft builds the tokenizer from it alone
// and encodes and decodes every input as HF does from it; as transformers' converter writes it
// now, and as 4.0's did (the map alone, WhitespaceSplit before Metaspace).
TEST(XlmRobertaReferenceTest, LoadsHfsOwnTokenizerJsonWithoutTheModel) {
  const auto model = xlmr_test_model();
  BERTFT_REQUIRE_PATH(model);
  BERTFT_REQUIRE_HF_TOKENIZERS();
  auto inputs = all_inputs();
  for (const char* text : {"fill <mask> here", "  leading and trailing  ", "a  b\t\tc", "ﬁnance",
                           "a\u3000b \u00a0c\n"})
    inputs.push_back({text});
  for (const bool old_converter : {false, true}) {
    SCOPED_TRACE(old_converter ? "transformers 4.0's converter" : "the converter now");
    testing::TempDir files, dir;
    auto converted = xlmr_tokenizer_json(read_spm_proto(model));
    if (old_converter) {
      converted["normalizer"] = converted["normalizer"]["normalizers"][0];
      converted["pre_tokenizer"] = {{"type", "Sequence"},
                                    {"pretokenizers", json::array({{{"type", "WhitespaceSplit"}},
                                                                   converted["pre_tokenizer"]})}};
    }
    write_file_atomic(files.path() / "converter.json", converted.dump());
    const auto file = dir.path() / "tokenizer.json";
    const std::string command = "BERTFT_NODE_MODULES='" + node_modules().string() + "' node '" +
                                BERTFT_SOURCE_DIR + "/tools/hf_tokenizer_ref/resave.js' '" +
                                (files.path() / "converter.json").string() + "' '" + file.string() +
                                "'";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    const auto saved = json::parse(read_file(file));
    const auto& metaspace =
        old_converter ? saved["pre_tokenizer"]["pretokenizers"][1] : saved["pre_tokenizer"];
    EXPECT_EQ(metaspace.value("prepend_scheme", ""), "always") << saved["pre_tokenizer"];
    write_file_atomic(dir.path() / "config.json", R"({"model_type": "xlm-roberta"})");
    write_file_atomic(dir.path() / "model.safetensors", "");
    const auto tokenizer = load_tokenizer(PretrainedDir::find(dir.path()), 0);
    EXPECT_EQ(tokenizer->vocab_size(),
              SentencePieceTokenizer(model, SentencePieceIds::kFairseq).vocab_size());
    expect_identical_to_hf(*tokenizer, saved, inputs, /*types=*/true);
  }
}

// Added tokens (HF's add_tokens, added_tokens.json) of every kind, as for WordPiece and
// byte-level BPE: normalized ones are matched in the normalized text by their normalized
// content (the model's map turns "\uFB01" into "fi"), every split between them pre-tokenized
// on its own.
TEST(XlmRobertaReferenceTest, AddedTokensAsHuggingFaceTokenizers) {
  const auto model = xlmr_test_model();
  BERTFT_REQUIRE_PATH(model);
  BERTFT_REQUIRE_HF_TOKENIZERS();
  auto added = every_kind_of_added_token();
  AddedToken ligature;
  ligature.content = "\uFB01x";
  added.push_back(ligature);
  const SentencePieceTokenizer tokenizer(model, SentencePieceIds::kFairseq, added);
  // Numbered as HF does: one the model has keeps its piece's id, the others follow the
  // vocabulary in order.
  const auto base = tokenizer.base_vocab_size();
  int64_t next = base;
  for (const auto& t : tokenizer.added_tokens()) {
    if (t.id >= base) {
      EXPECT_EQ(t.id, next++) << t.content;
    }
  }
  json reference = xlmr_tokenizer_json(read_spm_proto(model));
  for (const auto& entry : hf_added_tokens({}, -1, tokenizer.added_tokens()))
    reference["added_tokens"].push_back(entry);  // after the converter's five special ones
  EXPECT_EQ(tokenizer.vocab_size(), next);
  EXPECT_LT(next, base + static_cast<int64_t>(added.size()));  // some are pieces of the model
  auto inputs = added_token_inputs();
  for (const char* text : {"a \uFB01x for fixes", "\uFB01xed \uFB01x", "fill <mask> New York"})
    inputs.push_back({text});
  expect_identical_to_hf(tokenizer, reference, inputs, /*types=*/true);

  // Saved (tokenizer.json keeps the options), the directory loads back to the same tokenizer,
  // and HF's tokenizer built from the tokenizer.json bertft wrote gives the same encodings.
  testing::TempDir dir;
  tokenizer.save(dir.path());
  write_file_atomic(dir.path() / "config.json", R"({"model_type": "xlm-roberta"})");
  write_file_atomic(dir.path() / "model.safetensors", "");
  const auto loaded = load_tokenizer(PretrainedDir::find(dir.path()), 0);
  for (const auto& input : inputs)
    EXPECT_EQ(loaded->encode(input.text).ids, tokenizer.encode(input.text).ids) << input.text;
  expect_identical_to_hf(tokenizer, json::parse(read_file(dir.path() / "tokenizer.json")), inputs,
                         /*types=*/true);
}

INSTANTIATE_TEST_SUITE_P(CasedAndUncased,
                         TokenizerReferenceTest,
                         ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "uncased" : "cased"; });

}  // namespace
}  // namespace bert::tok
