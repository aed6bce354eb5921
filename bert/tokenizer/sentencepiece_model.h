#pragma once

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bert/tokenizer/added_tokens.h"
#include "bert/tokenizer/tokenizer.h"

namespace bert::tok {

class UnigramModel;
class PrecompiledCharsmap;
struct AlignedText;

namespace detail {
struct SpmModule;  // the dlopen()ed functions of spm_shim.h
}

/// How a SentencePiece tokenizer numbers its pieces.
enum class SentencePieceIds {
  kModel,  ///< the .model's own ids
  /// fairseq's (HF XLMRobertaTokenizer): <s>=0 <pad>=1 </s>=2 <unk>=3, piece i at i + 1 for
  /// i >= 3, <mask> last; `<s> A </s></s> B </s>` layout; offsets, the lone "▁" after trailing
  /// whitespace and <mask>'s lstrip as HF's fast XLMRobertaTokenizer gives them.
  kFairseq,
};

/// A BERT-style tokenizer over a SentencePiece `.model` (through libsentencepiece, loaded at
/// run time from the bertft_spm module, see spm_shim.h; $BERTFT_SPM_MODULE overrides its path),
/// with the same post-processing as WordPiece. Special tokens default to [CLS]/[SEP]/[PAD]/[MASK]
/// and fall back to <s>/</s>/<pad>/<mask> when the model lacks the bracketed ones.
class SentencePieceTokenizer final : public Tokenizer {
 public:
  /// Throws TokenizerError (with libsentencepiece's status) if the model cannot be loaded.
  /// `added`: tokens added after training (HF's add_tokens, added_tokens.json), numbered as HF
  /// does (their `id` is ignored) and matched as HF's fast tokenizer matches them; fairseq ids
  /// only (HF's pipeline; TokenizerError otherwise). An id at or past `model_vocab_size` (when
  /// above 0) is a TokenizerError.
  explicit SentencePieceTokenizer(const std::filesystem::path& model_file,
                                  SentencePieceIds ids = SentencePieceIds::kModel,
                                  std::vector<AddedToken> added = {},
                                  int64_t model_vocab_size = 0);
  /// How an XLM-R tokenizer.json runs the text before its Unigram.
  struct UnigramPipeline {
    std::string charsmap;           ///< the Precompiled normalizer's map (empty: none)
    bool collapse_spaces = true;    ///< then Replace(" {2,}", " ") (the converter since 2021)
    bool whitespace_split = false;  ///< WhitespaceSplit before Metaspace (transformers 4.0's)
  };
  /// XLM-R's tokenizer as a tokenizer.json alone gives it (no .model): HF's Unigram `pieces` by
  /// id, as the file numbers them (fairseq's: <s> <pad> </s> <unk> ... <mask>), with their
  /// `scores`, the unknown piece `unk_id` (which must be "<unk>"), after `pipeline`'s
  /// normalizer and pre-tokenizer and Metaspace, then `<s> A </s></s> B </s>`, as the fairseq
  /// ids of a .model run. `added` and `model_vocab_size` as above; `source` names the file in
  /// errors. Its save() writes tokenizer.json (the same pipeline) and no .model.
  static std::unique_ptr<SentencePieceTokenizer> from_unigram(std::vector<std::string> pieces,
                                                              std::vector<double> scores,
                                                              int64_t unk_id,
                                                              UnigramPipeline pipeline,
                                                              std::vector<AddedToken> added,
                                                              int64_t model_vocab_size,
                                                              const std::filesystem::path& source);
  ~SentencePieceTokenizer() override;
  SentencePieceTokenizer(const SentencePieceTokenizer&) = delete;
  SentencePieceTokenizer& operator=(const SentencePieceTokenizer&) = delete;

  std::vector<Piece> tokenize(std::string_view text) const override;
  /// The model, tokenizer_config.json and, with fairseq's ids, tokenizer.json (which keeps the
  /// added tokens' options) and added_tokens.json (those past the vocabulary, as HF's slow
  /// tokenizer writes them).
  void save(const std::filesystem::path& dir) const override;
  /// The HF `tokenizer.json` of this tokenizer with fairseq's ids (the converter's XLM-R
  /// pipeline: the model's map, spaces collapsed, Metaspace, Unigram with the model's scores,
  /// `<s> A </s></s> B </s>`, the added tokens with their options). TokenizerError for the
  /// model's own ids.
  nlohmann::json hf_tokenizer_json() const;
  /// The added tokens with their ids (empty when there are none).
  const std::vector<AddedToken>& added_tokens() const override { return added_; }
  /// Pieces before the added tokens (fairseq's numbering: the model's pieces, the four
  /// specials and <mask>).
  int64_t base_vocab_size() const { return base_vocab_size_; }

 private:
  struct WithoutModel {};
  /// A tokenizer without a .model (from_unigram): fairseq's ids, filled in by init_fairseq.
  SentencePieceTokenizer(WithoutModel, const std::filesystem::path& source);
  /// fairseq's numbering over `pieces` (by id) with their `scores`, the unknown piece `unk_id`
  /// and the precompiled map in charsmap_blob_; `added` numbered as HF does. `source` for errors.
  void init_fairseq(std::vector<std::string> pieces,
                    std::vector<double> scores,
                    int64_t unk_id,
                    std::vector<AddedToken> added,
                    int64_t model_vocab_size,
                    const std::string& source);
  /// The pieces concatenated, "▁" as a space, less the first piece's leading space.
  std::string detokenize(const std::vector<std::string>& tokens) const override;
  /// tokenize() with added tokens: those matched in the raw text (with the special tokens),
  /// then, in each stretch between, normalized, the normalized ones, then HF's pipeline.
  std::vector<Piece> tokenize_with_added(std::string_view text) const;
  /// `text` through HF's normalizer: the model's map (when it has one), spaces collapsed (unless
  /// a tokenizer.json of transformers 4.0's form said otherwise: collapse_spaces_).
  AlignedText normalize_like_hf(std::string_view text) const;
  /// Metaspace and Unigram over one normalized split (HF pre-tokenizes each on its own: a "▁"
  /// before each; with whitespace_split_ each run of non-whitespace in it on its own); offsets
  /// through its alignment, plus `base`.
  void metaspace_unigram(AlignedText split,
                         size_t base,
                         std::vector<Piece>& out,
                         int32_t& word) const;
  /// metaspace_unigram's Metaspace and Unigram over one split.
  void metaspace_words_unigram(AlignedText split,
                               size_t base,
                               std::vector<Piece>& out,
                               int32_t& word) const;
  /// HF's fast XLM-R pipeline (normalize_like_hf, then metaspace_unigram) over
  /// text[base, base + stretch.size()), appending to `out`.
  void tokenize_like_hf(std::string_view stretch,
                        size_t base,
                        std::vector<Piece>& out,
                        int32_t& word) const;
  /// libsentencepiece's own segmentation and spans.
  void tokenize_with_libsentencepiece(std::string_view stretch,
                                      size_t base,
                                      std::vector<Piece>& out,
                                      int32_t& word) const;

  std::filesystem::path model_file_;  ///< the .model, or the tokenizer.json of from_unigram
  bool has_model_file_ = true;        ///< false: from_unigram
  SentencePieceIds ids_;
  const detail::SpmModule* module_ = nullptr;
  void* processor_ = nullptr;
  std::unique_ptr<UnigramModel> unigram_;          ///< fairseq ids only
  std::unique_ptr<PrecompiledCharsmap> charsmap_;  ///< fairseq ids, when the model has a map
  std::vector<double> scores_;     ///< fairseq ids: each piece's score (the specials' 0)
  std::string charsmap_blob_;      ///< fairseq ids: the model's precompiled map, as stored
  bool collapse_spaces_ = true;    ///< fairseq ids: Replace(" {2,}", " ") after the map
  bool whitespace_split_ = false;  ///< fairseq ids: WhitespaceSplit before Metaspace
  std::vector<AddedToken> added_;
  int64_t base_vocab_size_ = 0;
  AddedTokenMatcher raw_added_, normalized_added_;
  /// Each normalized added token's content -> that content normalized (what decoding shows).
  std::unordered_map<std::string, std::string> normalized_added_text_;
};

/// Runs libsentencepiece's trainer with command-line style arguments ("--input=...") in the
/// small helper program bertft_spm_train (libsentencepiece cannot run inside a process that has
/// LibTorch's protobuf loaded; see spm_shim.h). $BERTFT_SPM_TRAIN overrides its path. Throws
/// TokenizerError when it fails (its own message goes to stderr).
void train_sentencepiece_with_args(const std::vector<std::string>& args);

}  // namespace bert::tok
