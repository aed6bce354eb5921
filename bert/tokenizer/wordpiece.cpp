#include "bert/tokenizer/wordpiece.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>

#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/log.h"
#include "bert/tokenizer/hf_added_tokens.h"
#include "bert/tokenizer/unicode.h"

namespace bert::tok {
namespace {

bool is_bracketed(const std::string& token) {
  return token.size() >= 2 && token.front() == '[' && token.back() == ']';
}

}  // namespace

VocabCasing vocab_casing(const std::vector<std::string>& vocab) {
  VocabCasing casing;
  std::vector<char32_t> cps;
  std::vector<uint32_t> offsets;
  for (const auto& token : vocab) {
    if (is_bracketed(token)) continue;
    try {
      unicode::decode_utf8(token, cps, offsets);
    } catch (const TokenizerError&) {
      continue;
    }
    bool letters = false, capitals = false;
    for (const char32_t c : cps) {
      std::vector<char32_t> lower;
      unicode::append_lowercase(c, lower);
      if (unicode::is_upper(c)) capitals = true;
      if (unicode::is_upper(c) || lower.size() != 1 || lower[0] != c) letters = true;
      if (c >= 'a' && c <= 'z') letters = true;
    }
    if (letters) ++casing.tokens_with_letters;
    if (capitals) {
      ++casing.tokens_with_capitals;
      if (casing.example.empty()) casing.example = token;
    }
  }
  return casing;
}

std::vector<std::string> read_vocab_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TokenizerError(fmt::format("{}: cannot open vocabulary", path.string()));
  std::vector<std::string> vocab;
  std::string line;
  std::vector<char32_t> cps;
  std::vector<uint32_t> offsets;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    try {  // as HF, which reads the file as UTF-8 text
      unicode::decode_utf8(line, cps, offsets);
    } catch (const TokenizerError& e) {
      throw TokenizerError(fmt::format("{}:{}: {}; a vocabulary file must be UTF-8", path.string(),
                                       vocab.size() + 1, e.what()));
    }
    vocab.push_back(line);
  }
  return vocab;
}

std::unique_ptr<WordPieceTokenizer> WordPieceTokenizer::from_file(const std::filesystem::path& path,
                                                                  WordPieceOptions options) {
  return std::make_unique<WordPieceTokenizer>(read_vocab_file(path), std::move(options),
                                              path.string());
}

WordPieceTokenizer::WordPieceTokenizer(std::vector<std::string> vocab,
                                       WordPieceOptions options,
                                       std::string source)
    : options_(std::move(options)), normalizer_(options_.normalizer) {
  if (vocab.empty()) throw TokenizerError(fmt::format("{}: the vocabulary is empty", source));
  {
    std::unordered_map<std::string_view, size_t> first_line;
    for (size_t i = 0; i < vocab.size(); ++i) {
      const auto [it, inserted] = first_line.emplace(vocab[i], i);
      if (!inserted)
        throw TokenizerError(fmt::format("{}:{}: duplicate token '{}' (first on line {})", source,
                                         i + 1, vocab[i], it->second + 1));
    }
  }
  if (options_.check_casing != CasingCheck::kOff) {
    const VocabCasing casing = vocab_casing(vocab);
    std::string problem;
    if (options_.normalizer.lowercase && casing.cased())
      problem = fmt::format(
          "{}: the vocabulary is cased ({} of {} tokens have capitals, e.g. '{}') but lower-casing "
          "is on, so no capitalized token can ever be produced; turn lower-casing off "
          "(do_lower_case: false / no --lowercase)",
          source, casing.tokens_with_capitals, casing.tokens_with_letters, casing.example);
    if (!options_.normalizer.lowercase && casing.tokens_with_letters > 0 && !casing.cased())
      problem = fmt::format(
          "{}: the vocabulary is uncased (only {} of its {} tokens have a capital letter) but "
          "lower-casing is off, so capitalized words fall apart or become [UNK]; turn "
          "lower-casing on (do_lower_case: true / --lowercase)",
          source, casing.tokens_with_capitals, casing.tokens_with_letters);
    if (!problem.empty()) {
      if (options_.check_casing == CasingCheck::kError)
        throw TokenizerError(problem + ", or disable the casing check (--no-casing-check)");
      log::warn("[tokenizer] {} (kept: the checkpoint's tokenizer files say so)", problem);
    }
  }
  base_vocab_size_ = vocab.size();
  number_added_tokens(options_.added_tokens, vocab, options_.model_vocab_size, source);
  set_vocab(std::move(vocab), options_.special);
  if (special_.unk_id < 0)
    throw TokenizerError(fmt::format("{}: the vocabulary has no '{}' token", source, special_.unk));

  const size_t usable = options_.model_vocab_size > 0
                            ? std::min<size_t>(base_vocab_size_, options_.model_vocab_size)
                            : base_vocab_size_;
  if (usable < base_vocab_size_) {
    std::string dropped;
    for (size_t i = usable; i < base_vocab_size_ && i < usable + 5; ++i)
      dropped += fmt::format("{}'{}'", dropped.empty() ? "" : ", ", id_to_token_[i]);
    log::warn(
        "[tokenizer] {}: the vocabulary has {} tokens but the model embeds only {}; "
        "ids {}..{} ({}{}) are never produced",
        source, base_vocab_size_, usable, usable, base_vocab_size_ - 1, dropped,
        base_vocab_size_ - usable > 5 ? ", ..." : "");
  }
  build_added_matchers();
  const std::string& prefix = options_.continuing_subword_prefix;
  for (size_t i = 0; i < usable; ++i) {
    const std::string& token = id_to_token_[i];
    if (token.empty()) continue;
    if (!prefix.empty() && token.size() > prefix.size() &&
        token.compare(0, prefix.size(), prefix) == 0) {
      continuation_.emplace(std::string_view(token).substr(prefix.size()), static_cast<int64_t>(i));
    }
    word_start_.emplace(std::string_view(token), static_cast<int64_t>(i));
    max_piece_bytes_ = std::max(max_piece_bytes_, token.size());
  }
}

void WordPieceTokenizer::build_added_matchers() {
  if (options_.added_tokens.empty()) return;
  auto matchers = added_token_matchers(
      special_strings_, -1, options_.added_tokens, [&](const std::string& content) {
        NormalizedText form;
        normalizer_.normalize(content, 0, form);
        return std::u32string(form.chars.begin(), form.chars.end());
      });
  raw_added_ = std::move(matchers.raw);
  normalized_added_ = std::move(matchers.normalized);
}

void WordPieceTokenizer::word_pieces(const NormalizedText& text,
                                     uint32_t begin,
                                     uint32_t end,
                                     int32_t word,
                                     std::vector<Piece>& out) const {
  thread_local std::string bytes;
  thread_local std::vector<uint32_t> char_at;  // byte position -> code point index (for starts)
  bytes.clear();
  char_at.clear();
  for (uint32_t i = begin; i < end; ++i) {
    const size_t before = bytes.size();
    unicode::append_utf8(text.chars[i], bytes);
    for (size_t k = before; k < bytes.size(); ++k) char_at.push_back(i);
  }
  char_at.push_back(end);
  const auto unknown = [&] {
    out.push_back({special_.unk_id, special_.unk, text.begin[begin], text.end[end - 1], word});
  };
  if (end - begin > options_.max_input_chars_per_word) {
    unknown();
    return;
  }
  const size_t first_out = out.size();
  size_t start = 0;
  const std::string_view all(bytes);
  while (start < bytes.size()) {
    size_t stop = std::min(bytes.size(), start + max_piece_bytes_);
    int64_t id = -1;
    const auto& table = start == 0 ? word_start_ : continuation_;
    while (stop > start) {
      // only cut at code point boundaries
      if (stop == bytes.size() || (static_cast<unsigned char>(bytes[stop]) & 0xC0) != 0x80) {
        const auto it = table.find(all.substr(start, stop - start));
        if (it != table.end()) {
          id = it->second;
          break;
        }
      }
      --stop;
    }
    if (id < 0) {
      out.resize(first_out);
      unknown();
      return;
    }
    const uint32_t first_char = char_at[start];
    const uint32_t last_char = char_at[stop - 1];
    out.push_back({id, id_to_token_[static_cast<size_t>(id)], text.begin[first_char],
                   text.end[last_char], word});
    start = stop;
  }
}

void WordPieceTokenizer::normalized_pieces(const NormalizedText& text,
                                           int32_t& word,
                                           std::vector<Piece>& out) const {
  thread_local std::vector<WordSpan> words;
  bert_pre_tokenize(text, words);
  for (const auto& w : words) word_pieces(text, w.begin, w.end, word++, out);
}

std::string WordPieceTokenizer::detokenize(const std::vector<std::string>& tokens) const {
  const auto& prefix = options_.continuing_subword_prefix;
  std::string text, piece;
  for (size_t i = 0; i < tokens.size(); ++i) {
    piece = tokens[i];
    // HF's fast tokenizer gives an added token matched in the normalized text as normalized.
    const auto added =
        std::find_if(options_.added_tokens.begin(), options_.added_tokens.end(),
                     [&](const AddedToken& t) { return t.normalized && t.content == piece; });
    if (added != options_.added_tokens.end()) {
      NormalizedText form;
      normalizer_.normalize(added->content, 0, form);
      piece.clear();
      for (const char32_t c : form.chars) unicode::append_utf8(c, piece);
    }
    if (i > 0) {
      if (!prefix.empty() && piece.rfind(prefix, 0) == 0)
        piece.erase(0, prefix.size());
      else
        piece.insert(0, " ");
    }
    // The decoder's clean-up, token by token (HF's WordPiece decoder with cleanup).
    text += clean_up_spaces_ ? clean_up_tokenization(piece) : piece;
  }
  return text;
}

std::vector<Piece> WordPieceTokenizer::tokenize(std::string_view text) const {
  if (!options_.added_tokens.empty()) return tokenize_with_added(text);
  std::vector<Piece> out;
  thread_local NormalizedText normalized;
  int32_t word = 0;
  split_on_special_tokens(
      text,
      [&](size_t begin, size_t end) {
        normalized.clear();
        normalizer_.normalize(text.substr(begin, end - begin), static_cast<uint32_t>(begin),
                              normalized);
        normalized_pieces(normalized, word, out);
      },
      [&](size_t begin, size_t end, int64_t id) {
        out.push_back({id, id_to_token_[static_cast<size_t>(id)], static_cast<uint32_t>(begin),
                       static_cast<uint32_t>(end), word++});
      });
  return out;
}

std::vector<Piece> WordPieceTokenizer::tokenize_with_added(std::string_view text) const {
  std::vector<Piece> out;
  thread_local std::vector<char32_t> cps;
  thread_local std::vector<uint32_t> at;
  thread_local std::vector<AddedTokenMatcher::Match> raw, normalized_matches;
  thread_local NormalizedText normalized, stretch;
  unicode::decode_utf8(text, cps, at);
  raw_added_.find(cps.data(), cps.size(), raw);
  int32_t word = 0;
  // As HF: an added token's piece is the text it matched (whitespace taken by lstrip/rstrip
  // included), normalized for a normalized token, with that text's offsets.
  const auto ordinary = [&](size_t from, size_t to) {  // code points of `text`
    normalized.clear();
    normalizer_.normalize(text.substr(at[from], at[to] - at[from]), at[from], normalized);
    normalized_added_.find(normalized.chars.data(), normalized.chars.size(), normalized_matches);
    if (normalized_matches.empty()) {
      normalized_pieces(normalized, word, out);
      return;
    }
    const auto plain = [&](size_t b, size_t e) {
      stretch.clear();
      for (size_t k = b; k < e; ++k)
        stretch.push(normalized.chars[k], normalized.begin[k], normalized.end[k]);
      normalized_pieces(stretch, word, out);
    };
    split_at_matches(normalized_matches, normalized.chars.size(), plain,
                     [&](const AddedTokenMatcher::Match& m) {
                       std::string piece;
                       for (size_t k = m.begin; k < m.end; ++k)
                         unicode::append_utf8(normalized.chars[k], piece);
                       out.push_back({m.id, std::move(piece), normalized.begin[m.begin],
                                      normalized.end[m.end - 1], word++});
                     });
  };
  split_at_matches(raw, cps.size(), ordinary, [&](const AddedTokenMatcher::Match& m) {
    out.push_back({m.id, std::string(text.substr(at[m.begin], at[m.end] - at[m.begin])),
                   at[m.begin], at[m.end], word++});
  });
  return out;
}

nlohmann::json WordPieceTokenizer::hf_tokenizer_json() const {
  using json = nlohmann::json;
  const json added = hf_added_tokens(special_strings_, -1, options_.added_tokens);
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  for (size_t i = 0; i < base_vocab_size_; ++i) vocab[id_to_token_[i]] = i;
  const auto& n = options_.normalizer;
  nlohmann::ordered_json out = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer",
       {{"type", "BertNormalizer"},
        {"clean_text", n.clean_text},
        {"handle_chinese_chars", n.handle_chinese_chars},
        {"strip_accents", n.strip_accents},
        {"lowercase", n.lowercase}}},
      {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
      {"post_processor",
       {{"type", "BertProcessing"},
        {"sep", {special_.sep, special_.sep_id}},
        {"cls", {special_.cls, special_.cls_id}}}},
      {"decoder",
       {{"type", "WordPiece"},
        {"prefix", options_.continuing_subword_prefix},
        {"cleanup", clean_up_spaces_}}},
      {"model",
       {{"type", "WordPiece"},
        {"unk_token", special_.unk},
        {"continuing_subword_prefix", options_.continuing_subword_prefix},
        {"max_input_chars_per_word", options_.max_input_chars_per_word},
        {"vocab", vocab}}},
  };
  return out;
}

void WordPieceTokenizer::save(const std::filesystem::path& dir) const {
  std::string vocab;
  for (size_t i = 0; i < base_vocab_size_; ++i) vocab += id_to_token_[i] + "\n";
  write_file_atomic(dir / "vocab.txt", vocab);
  // HF's added_tokens.json: the added tokens past the vocabulary, content -> id.
  nlohmann::ordered_json added = nlohmann::ordered_json::object();
  for (const auto& t : options_.added_tokens)
    if (t.id >= static_cast<int64_t>(base_vocab_size_)) added[t.content] = t.id;
  if (!added.empty()) write_file_atomic(dir / "added_tokens.json", added.dump(2) + "\n");
  const auto& n = options_.normalizer;
  nlohmann::ordered_json config = {
      {"tokenizer_class", options_.hf_class},
      {"do_lower_case", n.lowercase},
      {"strip_accents",
       n.strip_accents == n.lowercase ? nlohmann::json(nullptr) : nlohmann::json(n.strip_accents)},
      {"tokenize_chinese_chars", n.handle_chinese_chars},
      {"unk_token", special_.unk},
      {"sep_token", special_.sep},
      {"pad_token", special_.pad},
      {"cls_token", special_.cls},
      {"mask_token", special_.mask},
      {"model_max_length", model_max_length_ > 0 ? model_max_length_ : 512},
      {"clean_up_tokenization_spaces", clean_up_spaces_},
  };
  write_file_atomic(dir / "tokenizer_config.json", config.dump(2) + "\n");
  nlohmann::ordered_json special_map = {{"unk_token", special_.unk},
                                        {"sep_token", special_.sep},
                                        {"pad_token", special_.pad},
                                        {"cls_token", special_.cls},
                                        {"mask_token", special_.mask}};
  for (const auto& t : options_.added_tokens)
    if (t.special) special_map["additional_special_tokens"].push_back(t.content);
  write_file_atomic(dir / "special_tokens_map.json", special_map.dump(2) + "\n");
  write_file_atomic(dir / "tokenizer.json", hf_tokenizer_json().dump() + "\n");
}

}  // namespace bert::tok
