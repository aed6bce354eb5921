#pragma once

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "bert/tokenizer/added_tokens.h"
#include "bert/tokenizer/tokenizer.h"

namespace bert::tok {

/// Splits text as GPT-2's pre-tokenizer regex does (HF ByteLevel, use_regex):
/// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ — the leftmost
/// alternative that matches at each position. Returns [begin, end) byte spans of `text`
/// (valid UTF-8; TokenizerError otherwise), covering it without gaps.
std::vector<std::pair<uint32_t, uint32_t>> byte_level_words(std::string_view text);

/// GPT-2's reversible byte -> printable character map (byte b as one code point, UTF-8): printable
/// Latin-1 bytes stand for themselves, the others (space, controls, ...) for 256 + n ("Ġ" = ' ').
const std::string& byte_symbol(unsigned char byte);

/// Byte-level BPE as HF's fast RoBERTa tokenizer runs it (ByteLevel pre-tokenizer without a
/// prefix space -> BPE over the bytes of each word -> RobertaProcessing with trimmed offsets:
/// `<s> A </s></s> B </s>`, every type id 0). The `<mask>` token takes the whitespace before it
/// (HF's lstrip). Written by hand: no packaged C++ library implements it.
class ByteLevelBpeTokenizer final : public Tokenizer {
 public:
  struct Options {
    /// The model's embedding size; ids at or past it are an error at load. 0 = no limit.
    int64_t model_vocab_size = 0;
    SpecialTokens special = {"<unk>", "<s>", "</s>", "<pad>", "<mask>"};
    /// Tokens added after training beyond the special ones, in HF's order; numbered as HF does
    /// (number_added_tokens: `id` here is ignored).
    std::vector<AddedToken> added_tokens;
  };
  /// Reads vocab.json ({token: id}) and merges.txt ("#version" line, then "a b" per line).
  /// Throws TokenizerError naming the file and line of anything malformed (ids not 0..n-1 without
  /// gaps, a merge of tokens that are not in the vocabulary, ...).
  static std::unique_ptr<ByteLevelBpeTokenizer> from_files(const std::filesystem::path& vocab_json,
                                                           const std::filesystem::path& merges_txt,
                                                           Options options);
  ByteLevelBpeTokenizer(std::vector<std::string> vocab,
                        std::vector<std::pair<std::string, std::string>> merges,
                        Options options,
                        const std::string& source = "<bpe>");

  std::vector<Piece> tokenize(std::string_view text) const override;
  /// A pre-split word with a space before it ("Ġword"), as HF's RoBERTa tokenizer needs
  /// add_prefix_space for split words; spans stay inside `word`.
  std::vector<Piece> tokenize_word(std::string_view word) const override;
  /// vocab.json, merges.txt, tokenizer_config.json (RobertaTokenizer), special_tokens_map.json.
  void save(const std::filesystem::path& dir) const override;
  /// The HF `tokenizer.json` that describes this tokenizer (fast-tokenizer format).
  nlohmann::json hf_tokenizer_json() const;
  /// The added tokens with their ids (empty when there are none).
  const std::vector<AddedToken>& added_tokens() const override { return options_.added_tokens; }
  /// Entries of vocab.json (the ids before the added tokens).
  int64_t base_vocab_size() const { return static_cast<int64_t>(base_vocab_size_); }

 private:
  /// Each token's byte symbols back to bytes (a token with other characters: its own bytes),
  /// read as UTF-8 with U+FFFD for what is invalid.
  std::string detokenize(const std::vector<std::string>& tokens) const override;
  /// BPE pieces of the words of text[begin, end), words numbered on from `word`.
  void stretch_pieces(std::string_view text,
                      size_t begin,
                      size_t end,
                      int32_t& word,
                      std::vector<Piece>& out) const;
  /// tokenize() with added tokens: those matched in the raw text (with the special tokens),
  /// then the normalized ones (RoBERTa has no normalizer) in each stretch between, then BPE.
  std::vector<Piece> tokenize_with_added(std::string_view text) const;
  /// BPE over the byte symbols of one word; appends (id, first symbol, symbol count) triples.
  void merge_word(const std::vector<std::string>& symbols,
                  std::vector<std::tuple<int64_t, size_t, size_t>>& out) const;

  Options options_;
  size_t base_vocab_size_ = 0;
  AddedTokenMatcher raw_added_, normalized_added_;
  std::vector<std::pair<std::string, std::string>> merges_;
  std::unordered_map<std::string, int> merge_rank_;  // "a b" -> rank
};

}  // namespace bert::tok
