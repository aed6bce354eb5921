// The WordPiece tokenizer on any bytes: a text, or a pair split at the first NUL byte,
// encoded with truncation and padding; cased and uncased, with and without added tokens.
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

/// Added tokens of every kind: normalized or raw, lstrip/rstrip, single_word, whitespace or CJK
/// inside, one that is a vocabulary line.
std::vector<bert::tok::AddedToken> added_tokens() {
  const auto token = [](const char* content, bool normalized, bool single_word, bool lstrip,
                        bool rstrip) {
    bert::tok::AddedToken t;
    t.content = content;
    t.normalized = normalized;
    t.single_word = single_word;
    t.lstrip = lstrip;
    t.rstrip = rstrip;
    return t;
  };
  return {token("Tok", true, true, false, false),  token("<e>", false, false, true, true),
          token("  ", true, false, false, true),   token("中文", true, false, true, false),
          token("ß", false, true, false, false),   token(" x", true, false, true, true),
          token("the", true, false, false, false), token("É", true, false, false, false)};
}

const bert::tok::WordPieceTokenizer& tokenizer(bool lowercase, bool added) {
  static const auto make = [](bool lower, bool with_added) {
    bert::tok::WordPieceOptions o;
    o.normalizer.lowercase = lower;
    o.check_casing = bert::tok::CasingCheck::kOff;
    if (with_added) o.added_tokens = added_tokens();
    return std::make_unique<bert::tok::WordPieceTokenizer>(vocabulary(lower), o);
  };
  static const auto cased = make(false, false), uncased = make(true, false),
                    cased_added = make(false, true), uncased_added = make(true, true);
  if (added) return lowercase ? *uncased_added : *cased_added;
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
  const auto& t = tokenizer(lowercase, data[0] & 4);
  const auto first = text.substr(0, nul);
  try {
    for (const auto& piece : t.tokenize(first))
      if (piece.begin > piece.end || piece.end > first.size()) __builtin_trap();  // in the text
    const auto encoding = t.encode(text.substr(0, nul), pair, options);
    (void)t.decode(encoding.ids, data[0] & 16);
  } catch (const bert::Error&) {
  }
  return 0;
}
