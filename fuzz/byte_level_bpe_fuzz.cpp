// The byte-level BPE tokenizer (RoBERTa) on any bytes: a text, or a pair split at the first NUL
// byte, encoded with truncation and padding; `<mask>` and the other specials inside the text;
// with and without added tokens.
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "bert/common/error.h"
#include "bert/tokenizer/byte_level_bpe.h"
#include "bert/tokenizer/unicode.h"
#include "fuzz/fuzz_input.h"

namespace {

/// RoBERTa's specials, the 256 byte symbols, merges the target chains itself ("Ġ" + letters,
/// letter pairs, a two-byte character), <mask>.
const bert::tok::ByteLevelBpeTokenizer& tokenizer(bool added) {
  static const auto make = [](bool with_added) {
    using bert::tok::byte_symbol;
    std::vector<std::string> vocab = {"<s>", "<pad>", "</s>", "<unk>"};
    for (int b = 0; b < 256; ++b) vocab.push_back(byte_symbol(static_cast<unsigned char>(b)));
    const std::string space = byte_symbol(' ');
    std::vector<std::pair<std::string, std::string>> merges = {
        {"t", "h"},    {"th", "e"}, {space, "the"}, {"e", "r"},
        {space, "a"},  {"i", "n"},  {"in", "g"},    {byte_symbol(0xC3), byte_symbol(0xA9)},
        {space, space}};
    for (const auto& [a, b] : merges) vocab.push_back(a + b);
    vocab.push_back("<mask>");
    bert::tok::ByteLevelBpeTokenizer::Options options;
    // Added tokens: raw and normalized, lstrip/rstrip, single_word, one a vocabulary entry.
    for (const auto& [content, normalized, single_word, strip] :
         std::vector<std::tuple<const char*, bool, bool, bool>>{{"<e>", false, false, true},
                                                                {"the", true, true, false},
                                                                {"  ", true, false, true},
                                                                {" é", true, false, true}}) {
      if (!with_added) break;
      bert::tok::AddedToken t;
      t.content = content;
      t.normalized = normalized;
      t.single_word = single_word;
      t.lstrip = t.rstrip = strip;
      options.added_tokens.push_back(t);
    }
    return std::make_unique<bert::tok::ByteLevelBpeTokenizer>(vocab, merges, options);
  };
  static const auto plain = make(false), added_tokens = make(true);
  return added ? *added_tokens : *plain;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto text = bert::fuzz::as_text(data + 1, size - 1);
  const auto nul = text.find('\0');
  std::optional<std::string_view> pair;
  if (nul != std::string_view::npos) pair = text.substr(nul + 1);
  bert::tok::EncodeOptions options;
  options.max_length = 1 + data[0] / 2;
  options.truncation = static_cast<bert::tok::Truncation>((data[0] >> 1) % 3);
  options.padding = data[0] & 1 ? bert::tok::Padding::kMaxLength : bert::tok::Padding::kNone;
  const auto& t = tokenizer(data[0] & 2);  // outside the try: a refused vocabulary must fail
  const auto first = text.substr(0, nul);
  try {
    for (const auto& piece : t.tokenize(first))
      if (piece.begin > piece.end || piece.end > first.size()) __builtin_trap();  // in the text
    const auto encoding = t.encode(first, pair, options);
    // decode(): whatever the ids, valid UTF-8 (invalid byte runs become U+FFFD).
    const auto text_back = t.decode(encoding.ids, data[0] & 8);
    std::vector<char32_t> cps;
    std::vector<uint32_t> offsets;
    try {
      bert::tok::unicode::decode_utf8(text_back, cps, offsets);
    } catch (const bert::Error&) {
      __builtin_trap();
    }
  } catch (const bert::Error&) {
  }
  return 0;
}
