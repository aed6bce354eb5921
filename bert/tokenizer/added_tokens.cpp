#include "bert/tokenizer/added_tokens.h"

#include <algorithm>

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

}  // namespace bert::tok
