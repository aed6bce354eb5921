#include "bert/tokenizer/spm_normalizer.h"

#include <fmt/format.h>
#include <utf8proc.h>

#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/tokenizer/unicode.h"

namespace bert::tok {

namespace {

constexpr char32_t kWordMark = U'\u2581';  // "▁"

/// Byte length of the UTF-8 character that starts with byte `b`.
size_t utf8_length(unsigned char b) {
  return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}

size_t count_chars(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); i += utf8_length(static_cast<unsigned char>(s[i]))) ++n;
  return n;
}

}  // namespace

AlignedText AlignedText::from(std::string_view original) {
  std::vector<char32_t> cps;
  std::vector<uint32_t> offsets;
  unicode::decode_utf8(original, cps, offsets);  // throws, naming the byte, on invalid UTF-8
  AlignedText t;
  t.text = std::string(original);
  t.align.reserve(original.size());
  for (size_t i = 0; i < cps.size(); ++i)
    t.align.insert(t.align.end(), offsets[i + 1] - offsets[i], {offsets[i], offsets[i + 1]});
  return t;
}

void AlignedText::transform(const std::vector<Change>& changes) {
  // Mirrors HF's NormalizedString::transform_range over the whole text with no initial
  // offset: a replacing character takes the alignment of the old character it replaces, an
  // inserted one that of the byte before; old characters no change consumes are dropped.
  std::string new_text;
  std::vector<std::pair<uint32_t, uint32_t>> new_align;
  new_text.reserve(text.size());
  new_align.reserve(align.size());
  size_t offset = 0;  // byte of the next old character
  const auto consume = [&] {
    if (offset < text.size()) offset += utf8_length(static_cast<unsigned char>(text[offset]));
  };
  for (const auto& [c, change] : changes) {
    std::pair<uint32_t, uint32_t> a{0, 0};
    if (change > 0) {
      if (offset >= 1) a = align[std::min(offset, align.size()) - 1];
    } else if (offset < align.size()) {
      a = align[offset];
    } else if (!align.empty()) {
      a = align.back();
    }
    if (change <= 0) consume();
    for (int k = 0; k < -change; ++k) consume();
    const size_t before = new_text.size();
    unicode::append_utf8(c, new_text);
    new_align.insert(new_align.end(), new_text.size() - before, a);
  }
  text = std::move(new_text);
  align = std::move(new_align);
}

PrecompiledCharsmap::PrecompiledCharsmap(std::string blob, const std::string& origin)
    : blob_(std::move(blob)) {
  if (blob_.size() < 4)
    throw TokenizerError(
        fmt::format("{}: precompiled charsmap too short ({} bytes)", origin, blob_.size()));
  const auto* b = reinterpret_cast<const unsigned char*>(blob_.data());
  const uint32_t trie_bytes =
      uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24;
  if (trie_bytes % 4 != 0 || trie_bytes > blob_.size() - 4 || trie_bytes == 0)
    throw TokenizerError(
        fmt::format("{}: precompiled charsmap: trie of {} bytes does not fit a blob of {} bytes",
                    origin, trie_bytes, blob_.size()));
  units_ = b + 4;
  n_units_ = trie_bytes / 4;
  replacements_ = std::string_view(blob_).substr(4 + trie_bytes);
  std::vector<char32_t> cps;
  std::vector<uint32_t> offsets;
  for (size_t at = 0; at < replacements_.size();) {
    const size_t nul = std::min(replacements_.find('\0', at), replacements_.size());
    try {
      unicode::decode_utf8(replacements_.substr(at, nul - at), cps, offsets);
    } catch (const TokenizerError& e) {
      throw TokenizerError(fmt::format("{}: precompiled charsmap: replacement at byte {}: {}",
                                       origin, at, e.what()));
    }
    at = nul + 1;
  }
}

std::optional<std::string_view> PrecompiledCharsmap::transform(std::string_view chunk) const {
  // darts-clone's unit layout: bit 8 has_leaf, bit 9 scales the offset (bits 10..31), the
  // label in bits 0..7 (bit 31 set on value units), the value in bits 0..30.
  const auto unit = [&](size_t i) {
    const unsigned char* p = units_ + 4 * i;
    return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
  };
  const auto offset = [](uint32_t u) { return (u >> 10) << ((u & (1U << 9)) >> 6); };
  size_t pos = offset(unit(0));
  for (const char ch : chunk) {
    const auto c = static_cast<unsigned char>(ch);
    pos ^= c;
    if (pos >= n_units_) return std::nullopt;
    const uint32_t u = unit(pos);
    if ((u & ((1U << 31) | 0xFFU)) != c) return std::nullopt;
    pos ^= offset(u);
    if (pos >= n_units_) return std::nullopt;
    if (((u >> 8) & 1U) != 0) {
      const size_t value = unit(pos) & ((1U << 31) - 1);
      if (value >= replacements_.size()) return std::nullopt;
      const auto tail = replacements_.substr(value);
      return tail.substr(0, tail.find('\0'));
    }
  }
  return std::nullopt;
}

void PrecompiledCharsmap::normalize(AlignedText& text) const {
  std::vector<AlignedText::Change> changes;
  changes.reserve(text.text.size());
  bool modified = false;
  // HF's bookkeeping for one replacement: the new characters replace old ones one for one;
  // extra new ones are inserted, and fewer ones make the last change (possibly an earlier
  // character's) remove the rest; with nothing before it, a removal is not recorded at all.
  const auto replace = [&](std::string_view old_part, std::string_view new_part) {
    modified = true;
    const auto diff =
        static_cast<long>(count_chars(new_part)) - static_cast<long>(count_chars(old_part));
    std::vector<char32_t> cps;
    std::vector<uint32_t> offsets;
    unicode::decode_utf8(new_part, cps, offsets);
    for (const char32_t c : cps) changes.push_back({c, 0});
    if (diff > 0) {
      for (long k = 0; k < diff; ++k)
        changes[changes.size() - 1 - static_cast<size_t>(k)].change = 1;
    } else if (diff < 0 && !changes.empty()) {
      changes.back().change += static_cast<int>(diff);
    }
  };
  std::vector<char32_t> cps;
  std::vector<uint32_t> offsets;
  unicode::decode_utf8(text.text, cps, offsets);
  utf8proc_int32_t state = 0;
  for (size_t g = 0; g < cps.size();) {
    size_t e = g + 1;  // the grapheme cluster cps[g, e)
    while (e < cps.size() &&
           !utf8proc_grapheme_break_stateful(static_cast<utf8proc_int32_t>(cps[e - 1]),
                                             static_cast<utf8proc_int32_t>(cps[e]), &state))
      ++e;
    const std::string_view grapheme(text.text.data() + offsets[g], offsets[e] - offsets[g]);
    std::optional<std::string_view> whole;
    if (grapheme.size() < 6) whole = transform(grapheme);
    if (whole) {
      replace(grapheme, *whole);
    } else {
      for (size_t k = g; k < e; ++k) {
        const std::string_view part(text.text.data() + offsets[k], offsets[k + 1] - offsets[k]);
        if (const auto r = transform(part))
          replace(part, *r);
        else
          changes.push_back({cps[k], 0});
      }
    }
    g = e;
  }
  if (modified) text.transform(changes);
}

std::string read_spm_charsmap(const std::filesystem::path& model_file) {
  const std::string bytes = read_file(model_file);
  const auto fail = [&](size_t at) {
    return TokenizerError(fmt::format(
        "{}: not a SentencePiece model (malformed protobuf at byte {})", model_file.string(), at));
  };
  // Walks the fields of the message bytes[begin, end), calling f(field, payload) for the
  // length-delimited ones.
  const auto walk = [&](size_t begin, size_t end, auto&& f) {
    const auto varint = [&](size_t& k) {
      uint64_t v = 0;
      for (int shift = 0;; shift += 7) {
        if (k >= end || shift > 63) throw fail(k);
        const auto c = static_cast<unsigned char>(bytes[k++]);
        v |= uint64_t{c & 0x7FU} << shift;
        if (c < 0x80) return v;
      }
    };
    for (size_t k = begin; k < end;) {
      const uint64_t key = varint(k);
      switch (key & 7) {
        case 0:
          varint(k);
          break;
        case 1:
          k += 8;
          break;
        case 5:
          k += 4;
          break;
        case 2: {
          const uint64_t n = varint(k);
          if (n > end - k) throw fail(k);
          f(static_cast<int>(key >> 3), k, static_cast<size_t>(n));
          k += static_cast<size_t>(n);
          break;
        }
        default:
          throw fail(k);
      }
      if (k > end) throw fail(end);
    }
  };
  std::string charsmap;
  // ModelProto field 3 is the NormalizerSpec; its field 2 the precompiled charsmap.
  walk(0, bytes.size(), [&](int field, size_t at, size_t n) {
    if (field != 3) return;
    walk(at, at + n, [&](int inner, size_t at2, size_t n2) {
      if (inner == 2) charsmap = bytes.substr(at2, n2);
    });
  });
  return charsmap;
}

void collapse_spaces(AlignedText& text) {
  std::string out;
  std::vector<std::pair<uint32_t, uint32_t>> align;
  out.reserve(text.text.size());
  align.reserve(text.align.size());
  for (size_t i = 0; i < text.text.size();) {
    size_t e = i;
    while (e < text.text.size() && text.text[e] == ' ') ++e;
    if (e - i >= 2) {
      out.push_back(' ');
      align.push_back(text.align[e - 1]);
      i = e;
    } else {
      out.push_back(text.text[i]);
      align.push_back(text.align[i]);
      ++i;
    }
  }
  text.text = std::move(out);
  text.align = std::move(align);
}

std::vector<std::pair<size_t, size_t>> metaspace_words(AlignedText& text) {
  std::string mark;
  unicode::append_utf8(kWordMark, mark);
  // Spaces become "▁", each aligned to its space.
  std::string out;
  std::vector<std::pair<uint32_t, uint32_t>> align;
  out.reserve(text.text.size() + 8);
  align.reserve(text.align.size() + 8);
  for (size_t i = 0; i < text.text.size(); ++i) {
    if (text.text[i] == ' ') {
      out += mark;
      align.insert(align.end(), mark.size(), text.align[i]);
    } else {
      out.push_back(text.text[i]);
      align.push_back(text.align[i]);
    }
  }
  // The prefix "▁" shares the first character's alignment.
  if (!out.empty() && out.compare(0, mark.size(), mark) != 0) {
    out.insert(0, mark);
    align.insert(align.begin(), mark.size(), align.front());
  }
  text.text = std::move(out);
  text.align = std::move(align);
  std::vector<std::pair<size_t, size_t>> words;
  size_t start = 0;
  for (size_t i = 0; i < text.text.size();) {
    if (i > start && text.text.compare(i, mark.size(), mark) == 0) {
      words.emplace_back(start, i);
      start = i;
    }
    i += utf8_length(static_cast<unsigned char>(text.text[i]));
  }
  if (start < text.text.size()) words.emplace_back(start, text.text.size());
  return words;
}

}  // namespace bert::tok
