#include "bert/tokenizer/tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "bert/common/error.h"
#include "bert/tokenizer/hf_added_tokens.h"
#include "bert/tokenizer/unicode.h"

namespace bert::tok {

Truncation parse_truncation(const std::string& name) {
  if (name == "longest_first") return Truncation::kLongestFirst;
  if (name == "only_first") return Truncation::kOnlyFirst;
  if (name == "only_second") return Truncation::kOnlySecond;
  throw ConfigError(fmt::format(
      "unknown truncation strategy '{}'; choose longest_first, only_first or only_second", name));
}

std::vector<std::string> missing_input_tokens(const SpecialTokens& s) {
  std::vector<std::string> missing;
  for (const auto& [token, id] : {std::pair{&s.cls, s.cls_id}, std::pair{&s.sep, s.sep_id},
                                  std::pair{&s.pad, s.pad_id}, std::pair{&s.unk, s.unk_id}})
    if (id < 0) missing.push_back(*token);
  return missing;
}

void Tokenizer::set_vocab(std::vector<std::string> id_to_token, SpecialTokens special) {
  id_to_token_ = std::move(id_to_token);
  token_to_id_.clear();
  token_to_id_.reserve(id_to_token_.size());
  for (size_t i = 0; i < id_to_token_.size(); ++i)
    token_to_id_.emplace(id_to_token_[i], static_cast<int64_t>(i));
  special_ = std::move(special);
  special_.unk_id = token_to_id(special_.unk);
  special_.cls_id = token_to_id(special_.cls);
  special_.sep_id = token_to_id(special_.sep);
  special_.pad_id = token_to_id(special_.pad);
  special_.mask_id = token_to_id(special_.mask);
  special_strings_.clear();
  std::fill(std::begin(special_first_byte_), std::end(special_first_byte_), false);
  for (const auto& [name, id] :
       {std::pair{special_.unk, special_.unk_id}, std::pair{special_.cls, special_.cls_id},
        std::pair{special_.sep, special_.sep_id}, std::pair{special_.pad, special_.pad_id},
        std::pair{special_.mask, special_.mask_id}}) {
    if (id < 0 || name.empty()) continue;
    special_strings_.emplace_back(name, id);
    special_first_byte_[static_cast<unsigned char>(name[0])] = true;
  }
  std::stable_sort(special_strings_.begin(), special_strings_.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const {
  static const std::vector<AddedToken> none;
  return none;
}

std::string clean_up_tokenization(std::string text) {
  static const std::pair<std::string_view, std::string_view> kReplacements[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kReplacements) {
    std::string out;
    out.reserve(text.size());
    size_t at = 0;
    for (size_t hit; (hit = text.find(from, at)) != std::string::npos; at = hit + from.size())
      out.append(text, at, hit - at).append(to);
    out.append(text, at, std::string::npos);
    text = std::move(out);
  }
  return text;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  std::vector<int64_t> special_ids;
  if (skip_special_tokens) {
    special_ids = {special_.unk_id, special_.cls_id, special_.sep_id, special_.pad_id,
                   special_.mask_id};
    for (const auto& t : added_tokens())
      if (t.special) special_ids.push_back(t.id);
  }
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int64_t id : ids) {
    const auto& token = id_to_token(id);
    if (std::find(special_ids.begin(), special_ids.end(), id) == special_ids.end())
      tokens.push_back(token);
  }
  auto text = detokenize(tokens);
  return clean_up_spaces_ ? clean_up_tokenization(std::move(text)) : text;
}

int64_t Tokenizer::token_to_id(std::string_view token) const {
  const auto it = token_to_id_.find(std::string(token));
  return it == token_to_id_.end() ? -1 : it->second;
}

const std::string& Tokenizer::id_to_token(int64_t id) const {
  if (id < 0 || id >= vocab_size())
    throw TokenizerError(
        fmt::format("token id {} is outside the vocabulary [0, {})", id, vocab_size()));
  return id_to_token_[static_cast<size_t>(id)];
}

std::vector<Tokenizer::Segment> Tokenizer::special_segments(std::string_view text,
                                                            bool mask_lstrip) const {
  std::vector<Segment> segments;
  split_on_special_tokens(
      text,
      [&](size_t begin, size_t end) {
        segments.push_back({begin, end, -1, begin});
      },
      [&](size_t begin, size_t end, int64_t id) {
        size_t text_begin = begin;
        if (mask_lstrip && id == special_.mask_id && !segments.empty() && segments.back().id < 0) {
          auto& before = segments.back();
          std::vector<char32_t> cp;
          std::vector<uint32_t> at;
          unicode::decode_utf8(text.substr(before.begin, before.end - before.begin), cp, at);
          size_t k = cp.size();
          while (k > 0 && unicode::is_whitespace(cp[k - 1])) --k;
          text_begin = before.begin + at[k];
          before.end = text_begin;
          if (before.end == before.begin) segments.pop_back();
        }
        segments.push_back({begin, end, id, text_begin});
      });
  return segments;
}

namespace {

/// Code-point offsets for byte offsets of pieces that mostly come in increasing order.
class CharCounter {
 public:
  explicit CharCounter(std::string_view text) : text_(text) {}
  int64_t at(uint32_t byte) {
    if (byte < byte_) {
      byte_ = 0;
      chars_ = 0;
    }
    for (; byte_ < byte && byte_ < text_.size(); ++byte_)
      if ((static_cast<unsigned char>(text_[byte_]) & 0xC0) != 0x80) ++chars_;
    return chars_;
  }

 private:
  std::string_view text_;
  uint32_t byte_ = 0;
  int64_t chars_ = 0;
};

void truncate_pieces(std::vector<Piece>& a,
                     std::vector<Piece>* b,
                     size_t budget,
                     Truncation strategy,
                     int64_t& dropped) {
  const size_t na = a.size(), nb = b ? b->size() : 0;
  if (na + nb <= budget) return;
  size_t keep_a = na, keep_b = nb;
  if (b == nullptr) {
    if (strategy == Truncation::kOnlySecond)
      throw TokenizerError("truncation 'only_second' needs a text pair");
    keep_a = budget;
  } else if (strategy == Truncation::kLongestFirst) {
    // Same split as HF tokenizers: the shorter text keeps its length if it fits in half.
    size_t n1 = std::min(na, nb), n2 = std::max(na, nb);
    n2 = n1 > budget ? n1 : std::max(n1, budget - n1);
    if (n1 + n2 > budget) {
      n1 = budget / 2;
      n2 = n1 + budget % 2;
    }
    if (na > nb) std::swap(n1, n2);
    keep_a = std::min(na, n1);
    keep_b = std::min(nb, n2);
  } else {
    const size_t excess = na + nb - budget;
    size_t& target = strategy == Truncation::kOnlyFirst ? keep_a : keep_b;
    if (target <= excess)
      throw TokenizerError(
          fmt::format("cannot truncate to max_length: the {} text has {} tokens, {} must go",
                      strategy == Truncation::kOnlyFirst ? "first" : "second", target, excess));
    target -= excess;
  }
  dropped += static_cast<int64_t>(na - keep_a + nb - keep_b);
  a.resize(keep_a);
  if (b) b->resize(keep_b);
}

}  // namespace

void Tokenizer::pad(Encoding& e, size_t length) const {
  if (e.size() >= length) return;
  if (special_.pad_id < 0)
    throw TokenizerError(fmt::format("the vocabulary lacks '{}'", special_.pad));
  const size_t n = length - e.size();
  e.ids.insert(e.ids.end(), n, special_.pad_id);
  e.tokens.insert(e.tokens.end(), n, special_.pad);
  e.type_ids.insert(e.type_ids.end(), n, 0);
  e.attention_mask.insert(e.attention_mask.end(), n, 0);
  e.special_tokens_mask.insert(e.special_tokens_mask.end(), n, 1);
  e.offsets.insert(e.offsets.end(), n, {0, 0});
  e.byte_offsets.insert(e.byte_offsets.end(), n, {0, 0});
  e.word_ids.insert(e.word_ids.end(), n, -1);
  e.sequence_ids.insert(e.sequence_ids.end(), n, -1);
}

Encoding Tokenizer::encode(std::string_view text,
                           std::optional<std::string_view> pair,
                           const EncodeOptions& options) const {
  std::vector<Piece> a = tokenize(text);
  std::vector<Piece> b;
  if (pair) b = tokenize(*pair);
  Encoding e;
  const bool specials = options.add_special_tokens;
  if (specials && (special_.cls_id < 0 || special_.sep_id < 0))
    throw TokenizerError(
        fmt::format("the vocabulary lacks '{}' or '{}'", special_.cls, special_.sep));
  if (options.max_length > kMaxEncodeLength)
    throw TokenizerError(fmt::format("max_length {} is above the supported maximum {}",
                                     options.max_length, kMaxEncodeLength));
  if (options.max_length > 0) {
    const int64_t added = specials ? num_special_tokens(pair.has_value()) : 0;
    if (options.max_length < added)
      throw TokenizerError(fmt::format("max_length {} is shorter than the {} special tokens",
                                       options.max_length, added));
    truncate_pieces(a, pair ? &b : nullptr, static_cast<size_t>(options.max_length - added),
                    options.truncation, e.num_truncated);
  }
  const size_t total = a.size() + b.size() +
                       (specials ? static_cast<size_t>(num_special_tokens(pair.has_value())) : 0);
  for (auto* v : {&e.ids, &e.type_ids, &e.attention_mask, &e.special_tokens_mask, &e.word_ids,
                  &e.sequence_ids})
    v->reserve(total);
  auto add_special = [&](int64_t id, const std::string& token, int64_t type) {
    e.ids.push_back(id);
    e.tokens.push_back(token);
    e.type_ids.push_back(type);
    e.attention_mask.push_back(1);
    e.special_tokens_mask.push_back(1);
    e.offsets.emplace_back(0, 0);
    e.byte_offsets.emplace_back(0, 0);
    e.word_ids.push_back(-1);
    e.sequence_ids.push_back(-1);
  };
  auto add_pieces = [&](std::vector<Piece>& pieces, std::string_view source, int64_t seq) {
    const int64_t type = roberta_template_ ? 0 : seq;
    CharCounter chars(source);
    for (auto& p : pieces) {
      e.ids.push_back(p.id);
      e.tokens.push_back(std::move(p.token));
      e.type_ids.push_back(type);
      e.attention_mask.push_back(1);
      e.special_tokens_mask.push_back(0);
      const int64_t begin = chars.at(p.begin);
      e.offsets.emplace_back(begin, chars.at(p.end));
      e.byte_offsets.emplace_back(p.begin, p.end);
      e.word_ids.push_back(p.word);
      e.sequence_ids.push_back(seq);
    }
  };
  if (specials) add_special(special_.cls_id, special_.cls, 0);
  add_pieces(a, text, 0);
  if (specials) add_special(special_.sep_id, special_.sep, 0);
  if (pair) {
    const int64_t type = roberta_template_ ? 0 : 1;
    if (specials && roberta_template_) add_special(special_.sep_id, special_.sep, 0);
    add_pieces(b, *pair, 1);
    if (specials) add_special(special_.sep_id, special_.sep, type);
  }
  if (options.padding == Padding::kMaxLength && options.max_length > 0)
    pad(e, static_cast<size_t>(options.max_length));
  return e;
}

std::vector<Encoding> Tokenizer::encode_batch(
    const std::vector<std::pair<std::string, std::optional<std::string>>>& inputs,
    const EncodeOptions& options,
    int threads) const {
  std::vector<Encoding> out(inputs.size());
  EncodeOptions single = options;
  if (single.padding == Padding::kLongest) single.padding = Padding::kNone;
  size_t n_threads =
      threads > 0 ? static_cast<size_t>(threads) : std::thread::hardware_concurrency();
  n_threads = std::max<size_t>(1, std::min(n_threads, inputs.size() / 16 + 1));
  std::vector<std::exception_ptr> errors(n_threads);
  auto work = [&](size_t t) {
    try {
      for (size_t i = t; i < inputs.size(); i += n_threads) {
        const auto& [text, pair] = inputs[i];
        out[i] = pair ? encode(text, std::string_view(*pair), single)
                      : encode(text, std::nullopt, single);
      }
    } catch (...) {
      errors[t] = std::current_exception();
    }
  };
  if (n_threads == 1) {
    work(0);
  } else {
    std::vector<std::thread> pool;
    for (size_t t = 0; t < n_threads; ++t) pool.emplace_back(work, t);
    for (auto& th : pool) th.join();
  }
  for (const auto& err : errors)
    if (err) std::rethrow_exception(err);
  if (options.padding == Padding::kLongest) {
    size_t longest = 0;
    for (const auto& e : out) longest = std::max(longest, e.size());
    for (auto& e : out) pad(e, longest);
  }
  return out;
}

nlohmann::json hf_added_tokens(const std::vector<std::pair<std::string, int64_t>>& specials,
                               int64_t lstrip_id,
                               const std::vector<AddedToken>& others) {
  std::vector<AddedToken> all = special_added_tokens(specials, lstrip_id);
  all.insert(all.end(), others.begin(), others.end());
  std::stable_sort(all.begin(), all.end(),
                   [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
  nlohmann::json added = nlohmann::json::array();
  for (const auto& t : all)
    added.push_back({{"id", t.id},
                     {"content", t.content},
                     {"single_word", t.single_word},
                     {"lstrip", t.lstrip},
                     {"rstrip", t.rstrip},
                     {"normalized", t.normalized},
                     {"special", t.special}});
  return added;
}

}  // namespace bert::tok
