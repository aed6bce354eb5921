#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace bert::tok {

/// A token added to a vocabulary after its training (HF `tokenizer.add_tokens`, an entry of
/// tokenizer.json's "added_tokens"): matched in the text before the subword model runs and kept
/// whole, with HF's options.
struct AddedToken {
  std::string content;
  int64_t id = -1;
  bool single_word = false;  ///< only where no word character is on either side
  bool lstrip = false;       ///< also takes the whitespace before it
  bool rstrip = false;       ///< also takes the whitespace after it
  bool normalized = true;    ///< matched in the normalized text (else in the raw text)
  bool special = false;      ///< a special token (HF skips it when decoding)
};

/// Finds added tokens in a sequence of code points as HF's AddedVocabulary does: the matched
/// patterns are leftmost-longest and do not overlap (on equal patterns the first token wins);
/// a single_word match with a word character next to it is dropped (its characters stay
/// ordinary text, and no match starts inside it); lstrip/rstrip widen a match over adjacent
/// whitespace (lstrip never back into the previous match; the next match may start inside what
/// rstrip took, overlapping it, as in HF).
class AddedTokenMatcher {
 public:
  struct Match {
    size_t begin, end;  ///< code points, whitespace taken by lstrip/rstrip included
    int64_t id;
  };
  AddedTokenMatcher() = default;
  /// `patterns[i]` is what `tokens[i]` matches (its content, or its normalized form). Empty
  /// patterns are left out.
  AddedTokenMatcher(const std::vector<std::u32string>& patterns,
                    const std::vector<AddedToken>& tokens);

  bool empty() const { return entries_.empty(); }
  /// The matches in `text[0, n)`, in order.
  void find(const char32_t* text, size_t n, std::vector<Match>& out) const;

 private:
  struct Entry {
    std::u32string pattern;
    int64_t id;
    bool single_word, lstrip, rstrip;
  };
  std::vector<Entry> entries_;
  /// Entries by first code point, longest pattern first (then in the tokens' order).
  std::unordered_map<char32_t, std::vector<size_t>> by_first_;
};

/// Splits a sequence of `n` code points at `matches` (AddedTokenMatcher::find's) as HF does:
/// `gap(begin, end)` for each stretch before a match (none when a match overlaps the one before)
/// and after the last, `token(match)` for each match; after a match the text resumes at its end,
/// even when that is earlier than the end of the match before.
template <class Gap, class Token>
void split_at_matches(const std::vector<AddedTokenMatcher::Match>& matches,
                      size_t n,
                      Gap&& gap,
                      Token&& token) {
  size_t done = 0;
  for (const auto& m : matches) {
    if (done < m.begin) gap(done, m.begin);
    token(m);
    done = m.end;
  }
  if (done < n) gap(done, n);
}

/// A tokenizer's special tokens (string, id) as HF lists them among its added tokens: special,
/// not normalized, the one whose id is `lstrip_id` (RoBERTa's <mask>) taking the whitespace
/// before it.
std::vector<AddedToken> special_added_tokens(
    const std::vector<std::pair<std::string, int64_t>>& specials, int64_t lstrip_id);

/// Numbers `added` as HF does: a token whose content is a line of `vocab` takes that id, any
/// other the next id after the vocabulary and the added tokens before it (appended to `vocab`).
/// Throws TokenizerError naming `source` for an empty token or an id at or past
/// `model_vocab_size` (when > 0: the model's embeddings were not resized for it).
void number_added_tokens(std::vector<AddedToken>& added,
                         std::vector<std::string>& vocab,
                         int64_t model_vocab_size,
                         const std::string& source);

/// The two matchers HF runs: `raw` over the text (the special tokens, the one whose id is
/// `lstrip_id` taking the whitespace before it, and the added tokens that are not normalized),
/// then `normalized` over each stretch between those, normalized (the other added tokens, as
/// `normalize` turns their content; without `normalize`, their content as it is).
struct AddedTokenMatchers {
  AddedTokenMatcher raw, normalized;
};
AddedTokenMatchers added_token_matchers(
    const std::vector<std::pair<std::string, int64_t>>& specials,
    int64_t lstrip_id,
    const std::vector<AddedToken>& added,
    const std::function<std::u32string(const std::string&)>& normalize);

}  // namespace bert::tok
