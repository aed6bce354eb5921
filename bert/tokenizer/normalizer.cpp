#include "bert/tokenizer/normalizer.h"

#include "bert/tokenizer/unicode.h"

namespace bert::tok {

void BertNormalizer::normalize(std::string_view text, uint32_t base, NormalizedText& out) const {
  thread_local std::vector<char32_t> cps, decomposed, lowered;
  thread_local std::vector<uint32_t> offsets;
  unicode::decode_utf8(text, cps, offsets);
  for (size_t i = 0; i < cps.size(); ++i) {
    char32_t c = cps[i];
    const uint32_t b = base + offsets[i], e = base + offsets[i + 1];
    if (options_.clean_text) {
      if (c == 0 || c == 0xFFFD || unicode::is_control(c)) continue;
      if (unicode::is_whitespace(c)) c = U' ';
    }
    if (c < 0x80) {  // ASCII fast path: no CJK, nothing to decompose
      if (options_.lowercase && c >= 'A' && c <= 'Z') c += 32;
      out.push(c, b, e);
      continue;
    }
    // HF surrounds CJK ideographs with spaces first; NFD may then map a compatibility
    // ideograph (U+F900..) to its unified form.
    const bool cjk = options_.handle_chinese_chars && unicode::is_chinese_char(c);
    if (cjk) out.push(U' ', b, e);
    decomposed.clear();
    if (options_.strip_accents) {
      unicode::append_nfd(c, decomposed);
    } else {
      decomposed.push_back(c);
    }
    for (const char32_t d : decomposed) {
      if (options_.strip_accents && unicode::is_mark_nonspacing(d)) continue;
      if (options_.lowercase) {
        lowered.clear();
        unicode::append_lowercase(d, lowered);
        for (const char32_t l : lowered) out.push(l, b, e);
      } else {
        out.push(d, b, e);
      }
    }
    if (cjk) out.push(U' ', b, e);
  }
}

void bert_pre_tokenize(const NormalizedText& text, std::vector<WordSpan>& words) {
  words.clear();
  uint32_t start = 0;
  const auto n = static_cast<uint32_t>(text.chars.size());
  for (uint32_t i = 0; i < n; ++i) {
    const char32_t c = text.chars[i];
    if (unicode::is_whitespace(c)) {
      if (i > start) words.push_back({start, i});
      start = i + 1;
    } else if (unicode::is_punctuation(c)) {
      if (i > start) words.push_back({start, i});
      words.push_back({i, i + 1});
      start = i + 1;
    }
  }
  if (n > start) words.push_back({start, n});
}

}  // namespace bert::tok
