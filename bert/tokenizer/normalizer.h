#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace bert::tok {

/// Normalized text that remembers, for every normalized code point, the byte span of the
/// original character it came from (so token offsets point into the user's text).
struct NormalizedText {
  std::vector<char32_t> chars;
  std::vector<uint32_t> begin;  ///< original byte span of chars[i]
  std::vector<uint32_t> end;

  void clear() {
    chars.clear();
    begin.clear();
    end.clear();
  }
  void push(char32_t c, uint32_t b, uint32_t e) {
    chars.push_back(c);
    begin.push_back(b);
    end.push_back(e);
  }
};

struct BertNormalizerOptions {
  bool clean_text = true;            ///< drop NUL, U+FFFD and control chars; whitespace -> ' '
  bool handle_chinese_chars = true;  ///< surround CJK ideographs with spaces
  bool lowercase = true;
  /// NFD + drop non-spacing marks; HF's default (unset) follows `lowercase`.
  bool strip_accents = true;
};

/// HF's BertNormalizer: clean text, CJK spacing, accent stripping, lower-casing, in that
/// order, applied per original character so that alignments stay exact.
class BertNormalizer {
 public:
  explicit BertNormalizer(BertNormalizerOptions options) : options_(options) {}

  /// Appends the normalized form of `text` to `out`; byte spans are offset by `base`.
  /// Throws TokenizerError on invalid UTF-8.
  void normalize(std::string_view text, uint32_t base, NormalizedText& out) const;

  const BertNormalizerOptions& options() const { return options_; }

 private:
  BertNormalizerOptions options_;
};

/// One pre-token: normalized code points [begin, end).
struct WordSpan {
  uint32_t begin = 0;
  uint32_t end = 0;
};

/// HF's BertPreTokenizer: split on whitespace (dropped) and on every punctuation character
/// (kept as a word of its own).
void bert_pre_tokenize(const NormalizedText& text, std::vector<WordSpan>& words);

}  // namespace bert::tok
