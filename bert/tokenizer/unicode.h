#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

/// Unicode character classes as Hugging Face's BERT normalizer and pre-tokenizer define them.
/// Categories come from utf8proc; the definitions (which categories, which extra ASCII
/// characters) follow HF `tokenizers`.
namespace bert::tok::unicode {

/// Decodes UTF-8 into code points; `byte_offsets[i]` is the byte where code point i starts and
/// `byte_offsets.back() == text.size()` (one entry more than code points). Throws
/// TokenizerError naming the byte position of invalid UTF-8.
void decode_utf8(std::string_view text,
                 std::vector<char32_t>& code_points,
                 std::vector<uint32_t>& byte_offsets);
void append_utf8(char32_t c, std::string& out);
/// Number of code points in UTF-8 `text` (its bytes that do not continue a sequence): the unit
/// of HF's character offsets.
inline int64_t code_point_count(std::string_view text) {
  int64_t n = 0;
  for (const char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}
/// `bytes` with each invalid UTF-8 sequence replaced by U+FFFD, one for each maximal subpart
/// of an ill-formed sequence (Unicode's recommended practice, which Rust's
/// String::from_utf8_lossy and Python's errors="replace" follow).
std::string replace_invalid_utf8(std::string_view bytes);

/// \t \n \r and every character with the Unicode White_Space property.
bool is_whitespace(char32_t c);
/// Control, format and private-use characters (Cc, Cf, Co), except \t \n \r.
bool is_control(char32_t c);
/// ASCII punctuation (!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~) or any Unicode P* category.
bool is_punctuation(char32_t c);
/// The CJK ideograph blocks that BERT splits into single characters.
bool is_chinese_char(char32_t c);
/// Category Mn (removed by accent stripping after NFD).
bool is_mark_nonspacing(char32_t c);
/// Uppercase letter (Lu, Lt).
bool is_upper(char32_t c);
/// A word character as Rust's regex `\w` (which HF's added tokens use for single_word): a letter,
/// mark, decimal digit, letter number, connector punctuation (`_`), ZWNJ/ZWJ, or one of the
/// symbols with the Alphabetic property (circled and squared Latin letters).
bool is_word_char(char32_t c);

/// Full lower-case mapping of one code point (İ U+0130 -> "i̇", two code points).
void append_lowercase(char32_t c, std::vector<char32_t>& out);
/// Canonical decomposition (NFD) of one code point, without reordering.
void append_nfd(char32_t c, std::vector<char32_t>& out);

}  // namespace bert::tok::unicode
