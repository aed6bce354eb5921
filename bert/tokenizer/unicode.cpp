#include "bert/tokenizer/unicode.h"

#include <fmt/format.h>
#include <utf8proc.h>

#include <algorithm>
#include <iterator>

#include "bert/common/error.h"

namespace bert::tok::unicode {

void decode_utf8(std::string_view text, std::vector<char32_t>& cps, std::vector<uint32_t>& offs) {
  cps.clear();
  offs.clear();
  cps.reserve(text.size());
  offs.reserve(text.size() + 1);
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t b = p[i];
    if (b < 0x80) {
      offs.push_back(static_cast<uint32_t>(i));
      cps.push_back(b);
      ++i;
      continue;
    }
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t len = utf8proc_iterate(p + i, static_cast<utf8proc_ssize_t>(n - i), &cp);
    if (len <= 0) throw TokenizerError(fmt::format("invalid UTF-8 at byte {} (0x{:02x})", i, b));
    offs.push_back(static_cast<uint32_t>(i));
    cps.push_back(static_cast<char32_t>(cp));
    i += static_cast<size_t>(len);
  }
  offs.push_back(static_cast<uint32_t>(n));
}

void append_utf8(char32_t c, std::string& out) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string replace_invalid_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(bytes[i]); };
  for (size_t i = 0; i < bytes.size();) {
    const unsigned char lead = byte(i);
    if (lead < 0x80) {
      out.push_back(static_cast<char>(lead));
      ++i;
      continue;
    }
    // The sequence's length and the range its second byte must fall in (no overlong forms,
    // surrogates or code points past U+10FFFF).
    size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;
    }
    size_t valid = 1;  // bytes of the maximal subpart
    while (length > 0 && valid < length && i + valid < bytes.size()) {
      const unsigned char b = byte(i + valid);
      if (valid == 1 ? (b < low || b > high) : (b < 0x80 || b > 0xBF)) break;
      ++valid;
    }
    if (length > 0 && valid == length)
      out.append(bytes.substr(i, length));
    else
      out.append("\xEF\xBF\xBD");  // U+FFFD
    i += valid;
  }
  return out;
}

namespace {

struct CodePointRange {
  char32_t first, last;
};
#include "bert/tokenizer/unicode_v8.inc"

/// The general category as Unicode 8.0 had it, which is what HF tokenizers' tables hold
/// (found by comparing every code point with HF): characters assigned later count as
/// unassigned, and the few whose category changed since keep their 8.0 category.
utf8proc_category_t category(char32_t c) {
  switch (c) {
    case 0x166D:
      return UTF8PROC_CATEGORY_PO;  // So since Unicode 12
    case 0x1734:
      return UTF8PROC_CATEGORY_MN;  // Mc since Unicode 14
    case 0x1885:
    case 0x1886:
      return UTF8PROC_CATEGORY_LO;  // Mn since Unicode 9
    case 0xA9BD:
      return UTF8PROC_CATEGORY_MC;  // Mn since Unicode 12
    case 0x111C9:
      return UTF8PROC_CATEGORY_PO;  // Mn since Unicode 13
    default:
      break;
  }
  const auto* end = std::end(kAssignedAfterUnicode8);
  const auto* it =
      std::upper_bound(std::begin(kAssignedAfterUnicode8), end, c,
                       [](char32_t x, const CodePointRange& r) { return x < r.first; });
  if (it != std::begin(kAssignedAfterUnicode8) && c <= (it - 1)->last) return UTF8PROC_CATEGORY_CN;
  return static_cast<utf8proc_category_t>(utf8proc_category(static_cast<utf8proc_int32_t>(c)));
}

}  // namespace

bool is_whitespace(char32_t c) {
  switch (c) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

bool is_control(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  if (c < 0x20 || c == 0x7F) return true;
  if (c < 0x80) return false;
  const auto cat = category(c);
  return cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF || cat == UTF8PROC_CATEGORY_CO;
}

bool is_punctuation(char32_t c) {
  if (c < 0x80) {
    return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
           (c >= 123 && c <= 126);
  }
  switch (category(c)) {
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
      return true;
    default:
      return false;
  }
}

bool is_chinese_char(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool is_mark_nonspacing(char32_t c) {
  return c >= 0x300 && category(c) == UTF8PROC_CATEGORY_MN;
}

bool is_upper(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z';
  const auto cat = category(c);
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LT;
}

bool is_word_char(char32_t c) {
  if (c < 0x80)
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  if (c == 0x200C || c == 0x200D) return true;  // Join_Control
  // So characters with Other_Alphabetic: circled Latin letters, squared and negative ones.
  if ((c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) ||
      (c >= 0x1F150 && c <= 0x1F169) || (c >= 0x1F170 && c <= 0x1F189))
    return true;
  switch (category(c)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

void append_lowercase(char32_t c, std::vector<char32_t>& out) {
  if (c < 0x80) {
    out.push_back((c >= 'A' && c <= 'Z') ? c + 32 : c);
    return;
  }
  if (c == 0x130) {  // the one unconditional multi-character lower-case mapping
    out.push_back(U'i');
    out.push_back(0x307);
    return;
  }
  out.push_back(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
}

void append_nfd(char32_t c, std::vector<char32_t>& out) {
  if (c < 0xC0) {
    out.push_back(c);
    return;
  }
  utf8proc_int32_t buffer[32];
  int last_boundclass = 0;
  const utf8proc_ssize_t n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c), buffer, 32,
                                                     UTF8PROC_DECOMPOSE, &last_boundclass);
  if (n <= 0 || n > 32) {
    out.push_back(c);
    return;
  }
  for (utf8proc_ssize_t k = 0; k < n; ++k) out.push_back(static_cast<char32_t>(buffer[k]));
}

}  // namespace bert::tok::unicode
