#include "bert/tokenizer/added_tokens.h"

#include <fmt/format.h>

#include <algorithm>

#include "bert/common/error.h"
#include "bert/tokenizer/unicode.h"

namespace bert::tok {

AddedTokenMatcher::AddedTokenMatcher(const std::vector<std::u32string>& patterns,
                                     const std::vector<AddedToken>& tokens) {
  for (size_t i = 0; i < patterns.size() && i < tokens.size(); ++i) {
    if (patterns[i].empty()) continue;
    const auto& t = tokens[i];
    by_first_[patterns[i][0]].push_back(entries_.size());
    entries_.push_back({patterns[i], t.id, t.single_word, t.lstrip, t.rstrip});
  }
  for (auto& [first, list] : by_first_)
    std::stable_sort(list.begin(), list.end(), [&](size_t a, size_t b) {
      return entries_[a].pattern.size() > entries_[b].pattern.size();
    });
}

void AddedTokenMatcher::find(const char32_t* text, size_t n, std::vector<Match>& out) const {
  out.clear();
  if (entries_.empty()) return;
  size_t taken = 0;  // end of the last match, lstrip stops there
  size_t pos = 0;
  while (pos < n) {
    const auto it = by_first_.find(text[pos]);
    const Entry* found = nullptr;
    if (it != by_first_.end())
      for (const size_t e : it->second) {
        const auto& p = entries_[e].pattern;
        if (p.size() <= n - pos && std::equal(p.begin(), p.end(), text + pos)) {
          found = &entries_[e];
          break;
        }
      }
    if (found == nullptr) {
      ++pos;
      continue;
    }
    size_t begin = pos, end = pos + found->pattern.size();
    // The search goes on after the match, dropped or not, and not after the whitespace rstrip
    // takes: as in HF, a token that begins with whitespace may match inside it (they overlap).
    pos = end;
    if (found->single_word && ((begin > 0 && unicode::is_word_char(text[begin - 1])) ||
                               (end < n && unicode::is_word_char(text[end]))))
      continue;
    if (found->lstrip) {
      while (begin > 0 && unicode::is_whitespace(text[begin - 1])) --begin;
      begin = std::max(begin, taken);
    }
    if (found->rstrip)
      while (end < n && unicode::is_whitespace(text[end])) ++end;
    out.push_back({begin, end, found->id});
    taken = end;
  }
}

std::vector<AddedToken> special_added_tokens(
    const std::vector<std::pair<std::string, int64_t>>& specials, int64_t lstrip_id) {
  std::vector<AddedToken> out;
  for (const auto& [name, id] : specials) {
    AddedToken t;
    t.content = name;
    t.id = id;
    t.lstrip = id == lstrip_id;
    t.normalized = false;
    t.special = true;
    out.push_back(std::move(t));
  }
  return out;
}

void number_added_tokens(std::vector<AddedToken>& added,
                         std::vector<std::string>& vocab,
                         int64_t model_vocab_size,
                         const std::string& source) {
  std::unordered_map<std::string, int64_t> ids;
  for (size_t i = 0; i < vocab.size(); ++i) ids.emplace(vocab[i], static_cast<int64_t>(i));
  for (auto& t : added) {
    if (t.content.empty()) throw TokenizerError(fmt::format("{}: an added token is empty", source));
    const auto [it, inserted] = ids.emplace(t.content, static_cast<int64_t>(vocab.size()));
    if (inserted) vocab.push_back(t.content);
    t.id = it->second;
    if (model_vocab_size > 0 && t.id >= model_vocab_size)
      throw TokenizerError(fmt::format(
          "{}: added token '{}' has id {} but the model embeds only {} tokens (resize its "
          "embeddings to the tokenizer's {} tokens, as HF's resize_token_embeddings does)",
          source, t.content, t.id, model_vocab_size, ids.size()));
  }
}

AddedTokenMatchers added_token_matchers(
    const std::vector<std::pair<std::string, int64_t>>& specials,
    int64_t lstrip_id,
    const std::vector<AddedToken>& added,
    const std::function<std::u32string(const std::string&)>& normalize) {
  const auto code_points = [](const std::string& text) {
    std::vector<char32_t> cps;
    std::vector<uint32_t> at;
    unicode::decode_utf8(text, cps, at);
    return std::u32string(cps.begin(), cps.end());
  };
  std::vector<AddedToken> raw = special_added_tokens(specials, lstrip_id), normalized;
  std::vector<std::u32string> raw_patterns, normalized_patterns;
  for (const auto& t : raw) raw_patterns.push_back(code_points(t.content));
  for (const auto& t : added) {
    (t.normalized ? normalized : raw).push_back(t);
    (t.normalized ? normalized_patterns : raw_patterns)
        .push_back(t.normalized && normalize ? normalize(t.content) : code_points(t.content));
  }
  return {AddedTokenMatcher(raw_patterns, raw), AddedTokenMatcher(normalized_patterns, normalized)};
}

}  // namespace bert::tok
