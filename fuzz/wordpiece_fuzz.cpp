// The WordPiece tokenizer on any bytes: a text, or a pair split at the first NUL byte,
// encoded with truncation and padding; cased and uncased.
#include <memory>
#include <string>
#include <vector>

#include "bert/common/error.h"
#include "bert/tokenizer/wordpiece.h"
#include "fuzz/fuzz_input.h"

namespace {

/// A small vocabulary the target builds itself: specials, ASCII letters and digits, a few
/// words and their ## continuations, some non-ASCII characters.
std::vector<std::string> vocabulary(bool lowercase) {
  std::vector<std::string> v = {"[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (char c = 33; c < 127; ++c) {
    if (lowercase && c >= 'A' && c <= 'Z') continue;
    v.emplace_back(1, c);
    v.push_back("##" + std::string(1, c));
  }
  // Words beyond the single characters above (a duplicate would make the vocabulary invalid
  // and every input a refusal).
  for (const char* w : {"the", "token", "##izer", "fuzz", "##ing", "un", "##able", "é", "ß", "中",
                        "文", "##é", "α", "β", "naïve"})
    v.emplace_back(w);
  return v;
}

const bert::tok::WordPieceTokenizer& tokenizer(bool lowercase) {
  static const auto make = [](bool lower) {
    bert::tok::WordPieceOptions o;
    o.normalizer.lowercase = lower;
    o.check_casing = bert::tok::CasingCheck::kOff;
    return std::make_unique<bert::tok::WordPieceTokenizer>(vocabulary(lower), o);
  };
  static const auto cased = make(false), uncased = make(true);
  return lowercase ? *uncased : *cased;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool lowercase = data[0] & 1;
  const auto text = bert::fuzz::as_text(data + 1, size - 1);
  const auto nul = text.find('\0');
  std::optional<std::string_view> pair;
  if (nul != std::string_view::npos) pair = text.substr(nul + 1);
  bert::tok::EncodeOptions options;
  options.max_length = 1 + data[0] / 2;
  options.truncation = static_cast<bert::tok::Truncation>((data[0] >> 1) % 3);
  options.padding = data[0] & 2 ? bert::tok::Padding::kMaxLength : bert::tok::Padding::kNone;
  // Outside the try: a vocabulary the tokenizer refused would turn every input into a quiet
  // refusal and fuzz nothing; it must fail loudly instead.
  const auto& t = tokenizer(lowercase);
  try {
    (void)t.tokenize(text.substr(0, nul));
    const auto encoding = t.encode(text.substr(0, nul), pair, options);
    (void)encoding;
  } catch (const bert::Error&) {
  }
  return 0;
}
