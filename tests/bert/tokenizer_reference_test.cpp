// Differential test against Hugging Face's own tokenizer (the Rust `tokenizers` core through
// its Node binding, installed from npm by scripts/setup.sh). Thousands of real and adversarial
// texts are encoded by both; ids, tokens, offsets and type ids must be identical.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

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
  std::optional<std::string> pair;
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

class TokenizerReferenceTest : public ::testing::TestWithParam<bool> {};

TEST_P(TokenizerReferenceTest, IdenticalToHuggingFaceTokenizers) {
  const bool lowercase = GetParam();
  const auto vocab = testing::shared_dir() / "data" / "bert-vocab" /
                     (lowercase ? "bert-base-uncased-vocab.txt" : "bert-base-cased-vocab.txt");
  BERTFT_REQUIRE_PATH(vocab);
  if (!fs::exists(node_modules() / "tokenizers"))
    GTEST_SKIP() << "HF tokenizers not installed at " << node_modules()
                 << " (scripts/setup.sh installs it)";
  if (std::system("node --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "node not found";

  WordPieceOptions options;
  options.normalizer.lowercase = lowercase;
  options.normalizer.strip_accents = lowercase;
  const auto tokenizer = WordPieceTokenizer::from_file(vocab, options);

  std::vector<Input> inputs = adversarial_inputs();
  for (auto& i : real_inputs()) inputs.push_back(std::move(i));
  for (auto& i : code_point_sweep()) inputs.push_back(std::move(i));
  ASSERT_GT(inputs.size(), 2000u);

  testing::TempDir dir;
  {
    std::ofstream f(dir.path() / "tokenizer.json");
    f << tokenizer->hf_tokenizer_json().dump();
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
  size_t i = 0, mismatches = 0, tokens = 0;
  while (std::getline(out, line)) {
    ASSERT_LT(i, inputs.size());
    const auto ref = json::parse(line);
    const auto& input = inputs[i++];
    ASSERT_FALSE(ref.contains("error")) << ref["error"] << " for " << input.text;
    const Encoding e = input.pair ? tokenizer->encode(input.text, std::string_view(*input.pair))
                                  : tokenizer->encode(input.text);
    json offsets = json::array();
    for (const auto& [b, end] : e.offsets) offsets.push_back({b, end});
    tokens += e.size();
    const bool same = ref["ids"] == json(e.ids) && ref["tokens"] == json(e.tokens) &&
                      ref["offsets"] == offsets && ref["token_type_ids"] == json(e.type_ids);
    if (!same && ++mismatches <= 10) {
      ADD_FAILURE() << "input " << i - 1 << ": " << json(input.text).dump(-1, ' ', true)
                    << "\n  hf:     " << ref["tokens"].dump(-1, ' ', true) << " "
                    << ref["offsets"].dump() << "\n  bertft: " << json(e.tokens).dump(-1, ' ', true)
                    << " " << offsets.dump();
    }
  }
  EXPECT_EQ(i, inputs.size());
  EXPECT_EQ(mismatches, 0u) << "of " << inputs.size() << " inputs";
  RecordProperty("inputs", static_cast<int>(inputs.size()));
  RecordProperty("tokens", static_cast<int>(tokens));
}

INSTANTIATE_TEST_SUITE_P(CasedAndUncased,
                         TokenizerReferenceTest,
                         ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "uncased" : "cased"; });

}  // namespace
}  // namespace bert::tok
