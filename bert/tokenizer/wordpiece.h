#pragma once

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bert/tokenizer/added_tokens.h"
#include "bert/tokenizer/normalizer.h"
#include "bert/tokenizer/tokenizer.h"

namespace bert::tok {

enum class CasingCheck {
  kError,  ///< throw TokenizerError (a user's setting contradicts the vocabulary)
  kWarn,   ///< log a warning (the checkpoint's own tokenizer_config.json says so)
  kOff,
};

struct WordPieceOptions {
  BertNormalizerOptions normalizer;
  std::string continuing_subword_prefix = "##";
  /// Words with more code points than this become a single [UNK] (HF default 100).
  size_t max_input_chars_per_word = 100;
  /// The model's embedding size; vocabulary lines at or past it are left out of the lookup
  /// (with a warning), so no id the model cannot embed is ever produced. 0 = no limit.
  int64_t model_vocab_size = 0;
  /// What to do with a cased vocabulary and lower-casing on, or an uncased one with it off.
  CasingCheck check_casing = CasingCheck::kError;
  SpecialTokens special;
  /// Tokens added after training, beyond the special ones (tokenizer.json's "added_tokens"), in
  /// HF's order. Each takes its vocabulary id when its content is a vocabulary line, else the
  /// next id after the vocabulary (as HF numbers them; `id` here is ignored).
  std::vector<AddedToken> added_tokens;
  /// The HF class save() names in tokenizer_config.json, which AutoTokenizer builds: the model
  /// family's (DistilBERT's takes no token_type_ids, and HF's model refuses them).
  std::string hf_class = "BertTokenizer";
};

/// The lines of a vocab.txt (line number = id), without line ends ("\n" or "\r\n"). Throws
/// TokenizerError if the file cannot be read, or naming file and line where a line is not UTF-8.
std::vector<std::string> read_vocab_file(const std::filesystem::path& path);

/// Casing of a WordPiece vocabulary, judged from its ordinary tokens.
struct VocabCasing {
  size_t tokens_with_letters = 0;
  size_t tokens_with_capitals = 0;
  std::string example;  ///< one token with a capital letter, if any
  bool cased() const { return tokens_with_capitals * 200 > tokens_with_letters; }  // > 0.5%
};
VocabCasing vocab_casing(const std::vector<std::string>& vocab);

/// BERT's WordPiece tokenizer, identical to HF's fast BertTokenizer (the `tokenizers` Rust
/// pipeline BertNormalizer -> BertPreTokenizer -> WordPiece -> BertProcessing). Written by
/// hand: no packaged C++ library implements it.
class WordPieceTokenizer final : public Tokenizer {
 public:
  /// Reads vocab.txt (line number = id). Throws TokenizerError if the file is missing, empty,
  /// has a duplicate token (naming both lines), lacks [UNK], or its casing contradicts
  /// `options.normalizer.lowercase` (with CasingCheck::kError).
  static std::unique_ptr<WordPieceTokenizer> from_file(const std::filesystem::path& vocab,
                                                       WordPieceOptions options = {});
  /// From an in-memory vocabulary (id = index). Throws TokenizerError when an added token would
  /// get an id at or past `options.model_vocab_size`.
  WordPieceTokenizer(std::vector<std::string> vocab,
                     WordPieceOptions options,
                     std::string source = "<vocab>");
  WordPieceTokenizer(const WordPieceTokenizer&) = delete;  // lookup tables point into the vocab
  WordPieceTokenizer& operator=(const WordPieceTokenizer&) = delete;

  std::vector<Piece> tokenize(std::string_view text) const override;
  void save(const std::filesystem::path& dir) const override;

  /// The HF `tokenizer.json` that describes this tokenizer (fast-tokenizer format).
  nlohmann::json hf_tokenizer_json() const;
  const WordPieceOptions& options() const { return options_; }
  /// The added tokens with their ids (empty when there are none).
  const std::vector<AddedToken>& added_tokens() const override { return options_.added_tokens; }
  /// Lines of vocab.txt (the ids before the added tokens).
  int64_t base_vocab_size() const { return static_cast<int64_t>(base_vocab_size_); }

 private:
  /// A space before each token but the first, "##" pieces glued on; HF's clean-up of each.
  std::string detokenize(const std::vector<std::string>& tokens) const override;
  void word_pieces(const NormalizedText& text,
                   uint32_t begin,
                   uint32_t end,
                   int32_t word,
                   std::vector<Piece>& out) const;
  void build_added_matchers();
  /// Sub-word pieces of normalized text (pre-tokenized, then WordPiece), words numbered from
  /// `word`.
  void normalized_pieces(const NormalizedText& text, int32_t& word, std::vector<Piece>& out) const;
  /// tokenize() with added tokens: those matched in the raw text (and the special tokens), then
  /// in each normalized stretch between them, then WordPiece on the rest.
  std::vector<Piece> tokenize_with_added(std::string_view text) const;

  WordPieceOptions options_;
  size_t base_vocab_size_ = 0;
  AddedTokenMatcher raw_added_;         // the special tokens and the non-normalized added ones
  AddedTokenMatcher normalized_added_;  // the normalized ones, as normalized
  BertNormalizer normalizer_;
  std::unordered_map<std::string_view, int64_t> word_start_;    // pieces that begin a word
  std::unordered_map<std::string_view, int64_t> continuation_;  // "##x" stored as "x"
  size_t max_piece_bytes_ = 0;
};

}  // namespace bert::tok
