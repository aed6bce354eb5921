#pragma once

#include <filesystem>
#include <memory>
#include <string_view>
#include <vector>

#include "bert/tokenizer/tokenizer.h"

namespace bert::tok {

class UnigramModel;
class PrecompiledCharsmap;

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
  explicit SentencePieceTokenizer(const std::filesystem::path& model_file,
                                  SentencePieceIds ids = SentencePieceIds::kModel);
  ~SentencePieceTokenizer() override;
  SentencePieceTokenizer(const SentencePieceTokenizer&) = delete;
  SentencePieceTokenizer& operator=(const SentencePieceTokenizer&) = delete;

  std::vector<Piece> tokenize(std::string_view text) const override;
  void save(const std::filesystem::path& dir) const override;

 private:
  /// HF's fast XLM-R pipeline (precompiled map, spaces collapsed, Metaspace, Unigram) over
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

  std::filesystem::path model_file_;
  SentencePieceIds ids_;
  const detail::SpmModule* module_ = nullptr;
  void* processor_ = nullptr;
  std::unique_ptr<UnigramModel> unigram_;          ///< fairseq ids only
  std::unique_ptr<PrecompiledCharsmap> charsmap_;  ///< fairseq ids, when the model has a map
};

/// Runs libsentencepiece's trainer with command-line style arguments ("--input=...") in the
/// small helper program bertft_spm_train (libsentencepiece cannot run inside a process that has
/// LibTorch's protobuf loaded; see spm_shim.h). $BERTFT_SPM_TRAIN overrides its path. Throws
/// TokenizerError when it fails (its own message goes to stderr).
void train_sentencepiece_with_args(const std::vector<std::string>& args);

}  // namespace bert::tok
