#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bert/tokenizer/added_tokens.h"
#include "bert/tokenizer/encoding.h"

namespace bert::tok {

enum class Truncation {
  kLongestFirst,  ///< HF "longest_first": shorten the longer text first
  kOnlyFirst,     ///< "only_first"
  kOnlySecond,    ///< "only_second"
};
/// Parses "longest_first" | "only_first" | "only_second"; throws ConfigError otherwise.
Truncation parse_truncation(const std::string& name);

enum class Padding {
  kNone,       ///< no padding
  kMaxLength,  ///< pad every encoding to EncodeOptions::max_length
  kLongest,    ///< (batch only) pad to the longest encoding of the batch
};

struct EncodeOptions {
  bool add_special_tokens = true;
  /// Maximum length including special tokens; 0 = no truncation.
  int64_t max_length = 0;
  Truncation truncation = Truncation::kLongestFirst;
  Padding padding = Padding::kNone;
};

/// The longest encoding that padding or truncation may ask for (2^20 tokens; BERT has 512).
constexpr int64_t kMaxEncodeLength = int64_t{1} << 20;

/// The names and ids of BERT's special tokens in this vocabulary (id -1 if absent).
struct SpecialTokens {
  std::string unk = "[UNK]", cls = "[CLS]", sep = "[SEP]", pad = "[PAD]", mask = "[MASK]";
  int64_t unk_id = -1, cls_id = -1, sep_id = -1, pad_id = -1, mask_id = -1;
};

/// The special tokens a BERT input needs ([CLS], [SEP], [PAD], [UNK]; [MASK] only for
/// pre-training) that this vocabulary lacks, by name; empty when it has them all.
std::vector<std::string> missing_input_tokens(const SpecialTokens& special);

/// HF's clean_up_tokenization (decode's clean_up_tokenization_spaces): " ." " ?" " !" " ,"
/// " n't" " 'm" " 's" " 've" " 're" lose their space and " ' " becomes "'", each over the whole
/// text in this order.
std::string clean_up_tokenization(std::string text);

/// Text -> Encoding for BERT: a subword model (WordPiece or SentencePiece) followed by BERT's
/// post-processing ([CLS] A [SEP] B [SEP], segment ids, truncation, padding). Immutable after
/// construction; every method is safe to call from several threads.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  /// Sub-word pieces of `text` without special tokens; offsets in bytes of `text`.
  /// Special-token strings in the text (e.g. "[SEP]") become that token, never split.
  /// Throws TokenizerError on invalid UTF-8.
  virtual std::vector<Piece> tokenize(std::string_view text) const = 0;

  /// Sub-word pieces of one word of pre-split text (CoNLL's words), as HF tokenizes them with
  /// is_split_into_words. Default: tokenize(word).
  virtual std::vector<Piece> tokenize_word(std::string_view word) const { return tokenize(word); }
  /// Writes the files a Hugging Face tokenizer and bertft need into `dir` (vocab.txt or the
  /// .model, tokenizer_config.json, special_tokens_map.json, ...), each atomically.
  virtual void save(const std::filesystem::path& dir) const = 0;

  /// Encodes one text or a text pair. Throws TokenizerError if truncation cannot meet
  /// max_length (e.g. only_second with a short second text).
  Encoding encode(std::string_view text,
                  std::optional<std::string_view> pair = std::nullopt,
                  const EncodeOptions& options = {}) const;

  /// Encodes many inputs on `threads` threads (0 = all cores); results in input order.
  /// With Padding::kLongest every encoding is padded to the longest one.
  std::vector<Encoding> encode_batch(
      const std::vector<std::pair<std::string, std::optional<std::string>>>& inputs,
      const EncodeOptions& options = {},
      int threads = 0) const;

  /// Text of `ids` as HF's fast tokenizer decodes them (transformers 4.31: the `tokenizers`
  /// decode, then clean_up_tokenization_spaces): the tokens, less the special ones (added
  /// special tokens included) with `skip_special_tokens`, through the sub-word model's
  /// detokenize(); then, with clean_up_spaces(), no space before . ? ! , and English
  /// contractions (HF's clean_up_tokenization). An id outside the vocabulary is a TokenizerError.
  std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens = false) const;
  /// HF's convert_tokens_to_string: `tokens` through the fast tokenizer's decoder (detokenize),
  /// without decode()'s clean-up over the whole text; what HF's token-classification pipeline
  /// shows as a word or an entity.
  std::string convert_tokens_to_string(const std::vector<std::string>& tokens) const {
    return detokenize(tokens);
  }
  /// HF's clean_up_tokenization_spaces (tokenizer_config.json; true where absent, as in HF 4.31).
  bool clean_up_spaces() const { return clean_up_spaces_; }
  void set_clean_up_spaces(bool on) { clean_up_spaces_ = on; }

  int64_t vocab_size() const { return static_cast<int64_t>(id_to_token_.size()); }
  /// The tokens added after training, with their ids (empty when there are none).
  virtual const std::vector<AddedToken>& added_tokens() const;
  /// -1 if the token is not in the vocabulary.
  int64_t token_to_id(std::string_view token) const;
  const std::string& id_to_token(int64_t id) const;
  const SpecialTokens& special_tokens() const { return special_; }
  /// RoBERTa's layout `<s> A </s></s> B </s>` with every type id 0 (byte-level BPE and XLM-R's
  /// SentencePiece), instead of BERT's `[CLS] A [SEP] B [SEP]` with B's type ids 1.
  bool roberta_template() const { return roberta_template_; }
  /// How many special tokens encode() adds around one text or a pair (2 | 3, or 4 for RoBERTa).
  int64_t num_special_tokens(bool pair) const { return pair ? (roberta_template_ ? 4 : 3) : 2; }
  /// Maximum input length the checkpoint supports (HF `model_max_length`), 0 if unknown.
  int64_t model_max_length() const { return model_max_length_; }
  void set_model_max_length(int64_t n) { model_max_length_ = n; }

 protected:
  /// The tokens as text, as the HF fast tokenizer's decoder gives them: WordPiece puts a space
  /// before each token but the first and glues "##" pieces on (then its own clean-up, the
  /// tokenizer.json decoder's); byte-level BPE maps each token's byte symbols back to bytes (a
  /// token with another character keeps its own bytes) and reads them as UTF-8, U+FFFD for what
  /// is invalid; SentencePiece turns "▁" into spaces and drops the first token's leading one.
  virtual std::string detokenize(const std::vector<std::string>& tokens) const = 0;
  /// Appends [PAD] tokens (attention 0, offsets (0, 0)) until `e` has `length` tokens.
  void pad(Encoding& e, size_t length) const;
  /// Sets the vocabulary and resolves the special-token ids (missing ones stay -1).
  void set_vocab(std::vector<std::string> id_to_token, SpecialTokens special);
  /// A stretch of ordinary text (id -1) or a special token, from special_segments().
  struct Segment {
    size_t begin, end;  ///< bytes of `text`; for a special token the token's own characters
    int64_t id;         ///< -1: ordinary text
    size_t text_begin;  ///< where a special token's text starts (before the whitespace it took)
  };
  /// The stretches split_on_special_tokens() finds, as a list. With `mask_lstrip` the mask token
  /// takes the whitespace before it from the ordinary stretch (HF's lstrip, as RoBERTa's and
  /// XLM-R's tokenizers give `<mask>`): `text_begin` moves back over it, `begin` stays.
  std::vector<Segment> special_segments(std::string_view text, bool mask_lstrip) const;
  /// Splits `text` at occurrences of special-token strings (leftmost, longest first).
  /// Calls `normal(begin, end)` for ordinary stretches and `special(begin, end, id)`.
  template <class Normal, class Special>
  void split_on_special_tokens(std::string_view text, Normal&& normal, Special&& special) const;

  std::vector<std::string> id_to_token_;
  std::unordered_map<std::string, int64_t> token_to_id_;
  SpecialTokens special_;
  std::vector<std::pair<std::string, int64_t>> special_strings_;  // longest first
  bool special_first_byte_[256] = {};
  int64_t model_max_length_ = 0;
  bool roberta_template_ = false;
  bool clean_up_spaces_ = true;
};

template <class Normal, class Special>
void Tokenizer::split_on_special_tokens(std::string_view text,
                                        Normal&& normal,
                                        Special&& special) const {
  size_t start = 0, pos = 0;
  while (pos < text.size()) {
    if (!special_first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    bool matched = false;
    for (const auto& [s, id] : special_strings_) {
      if (text.compare(pos, s.size(), s) == 0) {
        if (pos > start) normal(start, pos);
        special(pos, pos + s.size(), id);
        pos += s.size();
        start = pos;
        matched = true;
        break;
      }
    }
    if (!matched) ++pos;
  }
  if (start < text.size()) normal(start, text.size());
}

}  // namespace bert::tok
