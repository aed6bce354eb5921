#include "bert/tokenizer/byte_level_bpe.h"

#include <fmt/format.h>
#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <limits>
#include <sstream>

#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/json_util.h"
#include "bert/tokenizer/hf_added_tokens.h"
#include "bert/tokenizer/unicode.h"

namespace bert::tok {
namespace {

using json = nlohmann::json;

bool is_letter(char32_t c) {
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
      return true;
    default:
      return false;
  }
}

bool is_number(char32_t c) {
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

enum class CharClass { kSpace, kLetter, kNumber, kOther };

CharClass classify(char32_t c) {
  if (unicode::is_whitespace(c)) return CharClass::kSpace;  // the regex's \s: White_Space
  if (is_letter(c)) return CharClass::kLetter;
  if (is_number(c)) return CharClass::kNumber;
  return CharClass::kOther;
}

const std::array<std::string, 256>& byte_symbols() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      unicode::append_utf8(static_cast<char32_t>(printable ? b : next++), t[b]);
    }
    return t;
  }();
  return table;
}

}  // namespace

const std::string& byte_symbol(unsigned char byte) {
  return byte_symbols()[byte];
}

std::vector<std::pair<uint32_t, uint32_t>> byte_level_words(std::string_view text) {
  std::vector<char32_t> cp;
  std::vector<uint32_t> at;
  unicode::decode_utf8(text, cp, at);
  std::vector<CharClass> cls(cp.size());
  for (size_t i = 0; i < cp.size(); ++i) cls[i] = classify(cp[i]);
  std::vector<std::pair<uint32_t, uint32_t>> words;
  const size_t n = cp.size();
  size_t i = 0;
  while (i < n) {
    size_t end = i + 1;
    // 's|'t|'re|'ve|'m|'ll|'d
    const auto next_is = [&](size_t k, char32_t c) { return k < n && cp[k] == c; };
    if (cp[i] == U'\'' && (next_is(i + 1, U's') || next_is(i + 1, U't') || next_is(i + 1, U'm') ||
                           next_is(i + 1, U'd'))) {
      end = i + 2;
    } else if (cp[i] == U'\'' && ((next_is(i + 1, U'r') && next_is(i + 2, U'e')) ||
                                  (next_is(i + 1, U'v') && next_is(i + 2, U'e')) ||
                                  (next_is(i + 1, U'l') && next_is(i + 2, U'l')))) {
      end = i + 3;
    } else {
      // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: one class run, after an optional space.
      const size_t start =
          cp[i] == U' ' && i + 1 < n && cls[i + 1] != CharClass::kSpace ? i + 1 : i;
      if (cls[start] != CharClass::kSpace) {
        end = start + 1;
        while (end < n && cls[end] == cls[start]) ++end;
      } else {
        // `\s+(?!\S)` leaves the last space of a run before a non-space to the next word;
        // `\s+` takes a lone space.
        size_t run = i;
        while (run < n && cls[run] == CharClass::kSpace) ++run;
        end = run == n || run - i == 1 ? run : run - 1;
      }
    }
    words.emplace_back(at[i], at[end]);
    i = end;
  }
  return words;
}

std::unique_ptr<ByteLevelBpeTokenizer> ByteLevelBpeTokenizer::from_files(
    const std::filesystem::path& vocab_json,
    const std::filesystem::path& merges_txt,
    Options options) {
  json vocab_map;
  try {
    vocab_map = parse_json_limited(read_file(vocab_json));
  } catch (const json::parse_error& e) {
    throw TokenizerError(fmt::format("{}: invalid JSON: {}", vocab_json.string(), e.what()));
  } catch (const Error& e) {
    throw TokenizerError(e.what());
  }
  if (!vocab_map.is_object() || vocab_map.empty())
    throw TokenizerError(
        fmt::format("{}: expected a non-empty object {{token: id}}", vocab_json.string()));
  std::vector<std::string> vocab(vocab_map.size());
  std::vector<bool> seen(vocab_map.size(), false);
  for (const auto& [token, id] : vocab_map.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() >= static_cast<int64_t>(vocab.size()))
      throw TokenizerError(
          fmt::format("{}: token '{}': id {} is not in [0, {}) (ids must number "
                      "the tokens without gaps)",
                      vocab_json.string(), token, clip(id.dump()), vocab.size()));
    const auto k = static_cast<size_t>(id.get<int64_t>());
    if (seen[k])
      throw TokenizerError(fmt::format("{}: id {} is given to '{}' and to '{}'",
                                       vocab_json.string(), k, vocab[k], token));
    seen[k] = true;
    vocab[k] = token;
  }
  std::vector<std::pair<std::string, std::string>> merges;
  std::istringstream in(read_file(merges_txt));
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if ((number == 1 && line.rfind("#version", 0) == 0) || line.empty()) continue;
    const auto space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string::npos)
      throw TokenizerError(
          fmt::format("{}:{}: expected two tokens separated by one space, got '{}'",
                      merges_txt.string(), number, clip(line)));
    merges.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  return std::make_unique<ByteLevelBpeTokenizer>(std::move(vocab), std::move(merges),
                                                 std::move(options), merges_txt.string());
}

ByteLevelBpeTokenizer::ByteLevelBpeTokenizer(
    std::vector<std::string> vocab,
    std::vector<std::pair<std::string, std::string>> merges,
    Options options,
    const std::string& source)
    : options_(std::move(options)), merges_(std::move(merges)) {
  if (options_.model_vocab_size > 0 &&
      static_cast<int64_t>(vocab.size()) > options_.model_vocab_size)
    throw TokenizerError(fmt::format(
        "{}: the vocabulary has {} tokens but the model embeds only {} (config.json vocab_size)",
        source, vocab.size(), options_.model_vocab_size));
  base_vocab_size_ = vocab.size();
  number_added_tokens(options_.added_tokens, vocab, options_.model_vocab_size, source);
  set_vocab(std::move(vocab), options_.special);
  if (!options_.added_tokens.empty()) {
    // RoBERTa has no normalizer: normalized tokens match as they are.
    auto matchers =
        added_token_matchers(special_strings_, special_.mask_id, options_.added_tokens, {});
    raw_added_ = std::move(matchers.raw);
    normalized_added_ = std::move(matchers.normalized);
  }
  roberta_template_ = true;
  for (int b = 0; b < 256; ++b)
    if (token_to_id(byte_symbol(static_cast<unsigned char>(b))) < 0 && special_.unk_id < 0)
      throw TokenizerError(fmt::format(
          "{}: the vocabulary lacks the byte symbol '{}' (byte {}) and has no unknown token",
          source, byte_symbol(static_cast<unsigned char>(b)), b));
  merge_rank_.reserve(merges_.size());
  for (size_t r = 0; r < merges_.size(); ++r) {
    const auto& [a, b] = merges_[r];
    if (token_to_id(a + b) < 0)
      throw TokenizerError(
          fmt::format("{}: merge {} ('{} {}') makes '{}', which is not in the "
                      "vocabulary",
                      source, r + 1, a, b, a + b));
    // A merge listed twice takes its later rank, as in HF (its map is built in order).
    merge_rank_[a + " " + b] = static_cast<int>(r);
  }
}

void ByteLevelBpeTokenizer::merge_word(
    const std::vector<std::string>& symbols,
    std::vector<std::tuple<int64_t, size_t, size_t>>& out) const {
  struct Part {
    std::string text;
    size_t first, count;
  };
  std::vector<Part> parts;
  parts.reserve(symbols.size());
  for (size_t k = 0; k < symbols.size(); ++k) parts.push_back({symbols[k], k, 1});
  // The lowest-ranked adjacent pair, leftmost among equals, until no pair is a merge.
  std::string key;
  while (parts.size() > 1) {
    int best = std::numeric_limits<int>::max();
    size_t where = 0;
    for (size_t k = 0; k + 1 < parts.size(); ++k) {
      key.assign(parts[k].text).append(" ").append(parts[k + 1].text);
      const auto it = merge_rank_.find(key);
      if (it != merge_rank_.end() && it->second < best) {
        best = it->second;
        where = k;
      }
    }
    if (best == std::numeric_limits<int>::max()) break;
    parts[where].text += parts[where + 1].text;
    parts[where].count += parts[where + 1].count;
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(where) + 1);
  }
  for (const auto& p : parts) {
    int64_t id = token_to_id(p.text);
    if (id < 0) id = special_.unk_id;
    out.emplace_back(id, p.first, p.count);
  }
}

std::string ByteLevelBpeTokenizer::detokenize(const std::vector<std::string>& tokens) const {
  static const std::unordered_map<char32_t, char> kByteOf = [] {
    std::unordered_map<char32_t, char> m;
    std::vector<char32_t> cps;
    std::vector<uint32_t> offsets;
    for (int b = 0; b < 256; ++b) {
      unicode::decode_utf8(byte_symbols()[static_cast<size_t>(b)], cps, offsets);
      m.emplace(cps.at(0), static_cast<char>(b));
    }
    return m;
  }();
  std::string bytes, token_bytes;
  std::vector<char32_t> cps;
  std::vector<uint32_t> offsets;
  for (const auto& token : tokens) {
    unicode::decode_utf8(token, cps, offsets);
    token_bytes.clear();
    bool symbols = true;
    for (const char32_t c : cps) {
      const auto it = kByteOf.find(c);
      if (it == kByteOf.end()) {
        symbols = false;
        break;
      }
      token_bytes.push_back(it->second);
    }
    bytes += symbols ? token_bytes : token;  // an added token's own text stays as it is
  }
  return unicode::replace_invalid_utf8(bytes);
}

std::vector<Piece> ByteLevelBpeTokenizer::tokenize(std::string_view text) const {
  if (!options_.added_tokens.empty()) return tokenize_with_added(text);
  // <mask> takes the whitespace before it into its token text (HF's lstrip); its offsets stay
  // those of "<mask>" (RoBERTa's post-processor trims the whitespace off).
  const auto segments = special_segments(text, /*mask_lstrip=*/true);
  std::vector<Piece> out;
  int32_t word = -1;
  for (const auto& s : segments) {
    if (s.id >= 0) {
      out.push_back({s.id, std::string(text.substr(s.text_begin, s.end - s.text_begin)),
                     static_cast<uint32_t>(s.begin), static_cast<uint32_t>(s.end), ++word});
      continue;
    }
    stretch_pieces(text, s.begin, s.end, word, out);
  }
  return out;
}

std::vector<Piece> ByteLevelBpeTokenizer::tokenize_with_added(std::string_view text) const {
  std::vector<Piece> out;
  thread_local std::vector<char32_t> cps;
  thread_local std::vector<uint32_t> at;
  thread_local std::vector<AddedTokenMatcher::Match> raw, normalized;
  unicode::decode_utf8(text, cps, at);
  raw_added_.find(cps.data(), cps.size(), raw);
  int32_t word = -1;
  // As HF: an added token's piece is the text it matched (whitespace taken by lstrip/rstrip
  // included); RoBERTa's post-processor trims that whitespace off its offsets.
  const auto added = [&](size_t begin, size_t end, int64_t id) {
    size_t b = begin, e = end;
    while (b < e && unicode::is_whitespace(cps[b])) ++b;
    while (e > b && unicode::is_whitespace(cps[e - 1])) --e;
    out.push_back(
        {id, std::string(text.substr(at[begin], at[end] - at[begin])), at[b], at[e], ++word});
  };
  const auto ordinary = [&](size_t from, size_t to) {  // code points of `text`
    normalized_added_.find(cps.data() + from, to - from, normalized);
    split_at_matches(
        normalized, to - from,
        [&](size_t b, size_t e) { stretch_pieces(text, at[from + b], at[from + e], word, out); },
        [&](const AddedTokenMatcher::Match& m) { added(from + m.begin, from + m.end, m.id); });
  };
  split_at_matches(raw, cps.size(), ordinary,
                   [&](const AddedTokenMatcher::Match& m) { added(m.begin, m.end, m.id); });
  return out;
}

void ByteLevelBpeTokenizer::stretch_pieces(std::string_view text,
                                           size_t stretch_begin,
                                           size_t stretch_end,
                                           int32_t& word,
                                           std::vector<Piece>& out) const {
  thread_local std::vector<std::string> symbols;
  thread_local std::vector<std::tuple<int64_t, size_t, size_t>> merged;
  const std::string_view stretch = text.substr(stretch_begin, stretch_end - stretch_begin);
  // A piece holding part of a character's bytes spans the whole character.
  const auto continuation = [&](size_t b) {
    return b < text.size() && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80;
  };
  for (const auto& [wb, we] : byte_level_words(stretch)) {
    ++word;
    symbols.clear();
    for (uint32_t b = wb; b < we; ++b)
      symbols.push_back(byte_symbol(static_cast<unsigned char>(stretch[b])));
    merged.clear();
    merge_word(symbols, merged);
    for (const auto& [id, first, count] : merged) {
      size_t begin = stretch_begin + wb + first, end = begin + count;
      while (begin > 0 && continuation(begin)) --begin;
      while (continuation(end)) ++end;
      // Trimmed offsets: leading and trailing spaces ("Ġ") are not part of the span.
      size_t lead = 0, trail = 0;
      while (lead < count && stretch[wb + first + lead] == ' ') ++lead;
      while (trail < count && stretch[wb + first + count - 1 - trail] == ' ') ++trail;
      begin = std::min(begin + lead, end);
      end = std::max(end - std::min(trail, end), begin);
      std::string token;
      for (size_t k = first; k < first + count; ++k) token += symbols[k];
      out.push_back(
          {id, std::move(token), static_cast<uint32_t>(begin), static_cast<uint32_t>(end), word});
    }
  }
}

std::vector<Piece> ByteLevelBpeTokenizer::tokenize_word(std::string_view word) const {
  std::vector<Piece> pieces = tokenize(" " + std::string(word));
  for (auto& p : pieces) {  // back to spans of `word`
    p.begin = p.begin > 0 ? p.begin - 1 : 0;
    p.end = p.end > 0 ? p.end - 1 : 0;
  }
  return pieces;
}

json ByteLevelBpeTokenizer::hf_tokenizer_json() const {
  const json added = hf_added_tokens(special_strings_, special_.mask_id, options_.added_tokens);
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  for (size_t i = 0; i < base_vocab_size_; ++i) vocab[id_to_token_[i]] = i;
  json merges = json::array();
  for (const auto& [a, b] : merges_) merges.push_back(a + " " + b);
  const json byte_level = {{"type", "ByteLevel"},
                           {"add_prefix_space", false},
                           {"trim_offsets", true},
                           {"use_regex", true}};
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", byte_level},
          {"post_processor",
           {{"type", "RobertaProcessing"},
            {"sep", {special_.sep, special_.sep_id}},
            {"cls", {special_.cls, special_.cls_id}},
            {"trim_offsets", true},
            {"add_prefix_space", false}}},
          {"decoder", byte_level},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", special_.unk_id >= 0 ? json(special_.unk) : json(nullptr)},
            {"continuing_subword_prefix", ""},
            {"end_of_word_suffix", ""},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"vocab", vocab},
            {"merges", merges}}}};
}

void ByteLevelBpeTokenizer::save(const std::filesystem::path& dir) const {
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  for (size_t i = 0; i < base_vocab_size_; ++i) vocab[id_to_token_[i]] = i;
  write_file_atomic(dir / "vocab.json", vocab.dump() + "\n");
  // HF's added_tokens.json (the added tokens past the vocabulary), and tokenizer.json, which
  // keeps their options.
  nlohmann::ordered_json added = nlohmann::ordered_json::object();
  for (const auto& t : options_.added_tokens)
    if (t.id >= static_cast<int64_t>(base_vocab_size_)) added[t.content] = t.id;
  if (!added.empty()) write_file_atomic(dir / "added_tokens.json", added.dump(2) + "\n");
  write_file_atomic(dir / "tokenizer.json", hf_tokenizer_json().dump() + "\n");
  std::string merges = "#version: 0.2\n";
  for (const auto& [a, b] : merges_) merges += a + " " + b + "\n";
  write_file_atomic(dir / "merges.txt", merges);
  const nlohmann::ordered_json config = {
      {"tokenizer_class", "RobertaTokenizer"},
      {"bos_token", special_.cls},
      {"eos_token", special_.sep},
      {"cls_token", special_.cls},
      {"sep_token", special_.sep},
      {"unk_token", special_.unk},
      {"pad_token", special_.pad},
      {"mask_token", special_.mask},
      {"add_prefix_space", false},
      {"trim_offsets", true},
      {"errors", "replace"},
      {"model_max_length", model_max_length_ > 0 ? model_max_length_ : 512},
      {"clean_up_tokenization_spaces", clean_up_spaces_}};
  write_file_atomic(dir / "tokenizer_config.json", config.dump(2) + "\n");
  nlohmann::ordered_json special = {{"bos_token", special_.cls},  {"eos_token", special_.sep},
                                    {"unk_token", special_.unk},  {"sep_token", special_.sep},
                                    {"pad_token", special_.pad},  {"cls_token", special_.cls},
                                    {"mask_token", special_.mask}};
  for (const auto& t : options_.added_tokens)
    if (t.special) special["additional_special_tokens"].push_back(t.content);
  write_file_atomic(dir / "special_tokens_map.json", special.dump(2) + "\n");
}

}  // namespace bert::tok
