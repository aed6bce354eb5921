#pragma once

#include <filesystem>
#include <memory>
#include <string_view>
#include <vector>

#include "bert/tokenizer/tokenizer.h"

namespace bert::tok {

namespace detail {
struct SpmModule;  // the dlopen()ed functions of spm_shim.h
}

/// A BERT-style tokenizer over a SentencePiece `.model` (through libsentencepiece, loaded at
/// run time from the bertft_spm module, see spm_shim.h; $BERTFT_SPM_MODULE overrides its path),
/// with the same post-processing as WordPiece. Special tokens default to [CLS]/[SEP]/[PAD]/[MASK]
/// and fall back to <s>/</s>/<pad>/<mask> when the model lacks the bracketed ones.
class SentencePieceTokenizer final : public Tokenizer {
 public:
  /// Throws TokenizerError (with libsentencepiece's status) if the model cannot be loaded.
  explicit SentencePieceTokenizer(const std::filesystem::path& model_file);
  ~SentencePieceTokenizer() override;
  SentencePieceTokenizer(const SentencePieceTokenizer&) = delete;
  SentencePieceTokenizer& operator=(const SentencePieceTokenizer&) = delete;

  std::vector<Piece> tokenize(std::string_view text) const override;
  void save(const std::filesystem::path& dir) const override;

 private:
  std::filesystem::path model_file_;
  const detail::SpmModule* module_ = nullptr;
  void* processor_ = nullptr;
};

/// Runs libsentencepiece's trainer with command-line style arguments ("--input=...") in the
/// small helper program bertft_spm_train (libsentencepiece cannot run inside a process that has
/// LibTorch's protobuf loaded; see spm_shim.h). $BERTFT_SPM_TRAIN overrides its path. Throws
/// TokenizerError when it fails (its own message goes to stderr).
void train_sentencepiece_with_args(const std::vector<std::string>& args);

}  // namespace bert::tok
