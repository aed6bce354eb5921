// XLM-R's tokenization path (bert/tokenizer/spm_normalizer.h, unigram.h) on any bytes: a
// precompiled character map (the one built below, or one taken from the input: a 2-byte
// length, then the blob), then the text through the map, space collapsing, Metaspace and the
// Unigram search. Every token must lie inside the text it came from.
#include <memory>
#include <string>
#include <vector>

#include "bert/common/error.h"
#include "bert/tokenizer/spm_normalizer.h"
#include "bert/tokenizer/unigram.h"
#include "fuzz/fuzz_input.h"

namespace {

/// A darts-clone array with three entries, laid out by hand: "A" -> "a", U+0001 -> "" (dropped)
/// and "e" U+0301 -> "é" (one grapheme cluster composed).
std::string small_charsmap() {
  std::vector<uint32_t> units(938, 0);
  const uint32_t leaf = 1U << 8, value = 1U << 31;
  const auto node = [](uint32_t offset, uint32_t label) { return offset << 10 | label; };
  units[0] = node(256, 0);                   // root: children at 256 ^ byte
  units[256 ^ 0x41] = node(1, 0x41) | leaf;  // "A", its value one unit over
  units[(256 ^ 0x41) ^ 1] = value | 0;
  units[256 ^ 0x01] = node(1, 0x01) | leaf;  // U+0001
  units[(256 ^ 0x01) ^ 1] = value | 2;
  units[256 ^ 0x65] = node(0x200, 0x65);  // "e", then 0xCC 0x81
  const uint32_t cc = (256 ^ 0x65) ^ 0x200 ^ 0xCC;
  units[cc] = node(1, 0xCC);
  const uint32_t x81 = cc ^ 1 ^ 0x81;
  units[x81] = node(1, 0x81) | leaf;
  units[x81 ^ 1] = value | 3;
  std::string blob;
  const auto put = [&](uint32_t v) {
    for (int k = 0; k < 4; ++k) blob.push_back(static_cast<char>(v >> (8 * k) & 0xFF));
  };
  put(static_cast<uint32_t>(units.size() * 4));
  for (const uint32_t u : units) put(u);
  blob += std::string("a\0\0\xc3\xa9\0", 6);
  return blob;
}

const bert::tok::UnigramModel& model() {
  static const bert::tok::UnigramModel made(
      {"<unk>", "\xe2\x96\x81", "a", "ab", "b", "-", "--",
       "\xe2\x96\x81"
       "a",
       "\xc3\xa9", "the"},
      {0.0, -1.0, -2.0, -3.0, -2.5, -1.0, -2.0, -2.5, -4.0, -5.0}, /*unk_id=*/0);
  return made;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const bert::tok::PrecompiledCharsmap builtin(small_charsmap(), "builtin");
  const bool own_map = (data[0] & 1) != 0 && size >= 3;
  size_t at = 1;
  try {
    std::unique_ptr<bert::tok::PrecompiledCharsmap> theirs;
    if (own_map) {
      const size_t n = std::min<size_t>(size - 3, data[1] | data[2] << 8);
      theirs = std::make_unique<bert::tok::PrecompiledCharsmap>(
          std::string(bert::fuzz::as_text(data + 3, n)), "input");
      at = 3 + n;
    }
    const auto text = bert::fuzz::as_text(data + at, size - at);
    auto t = bert::tok::AlignedText::from(text);
    (theirs ? *theirs : builtin).normalize(t);
    bert::tok::collapse_spaces(t);
    for (const auto& [wb, we] : bert::tok::metaspace_words(t)) {
      if (wb >= we || we > t.text.size()) __builtin_trap();
      size_t next = wb;
      for (const auto& token : model().encode(std::string_view(t.text).substr(wb, we - wb))) {
        if (wb + token.begin != next || token.begin >= token.end) __builtin_trap();  // contiguous
        next = wb + token.end;
        const auto [b, e] = t.original(wb + token.begin, wb + token.end);
        if (b > e || e > text.size()) __builtin_trap();  // inside the text
      }
      if (next != we) __builtin_trap();
    }
  } catch (const bert::Error&) {
  }
  return 0;
}
