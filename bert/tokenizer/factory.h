#pragma once

#include <memory>
#include <optional>

#include "bert/checkpoint/pretrained_dir.h"
#include "bert/tokenizer/tokenizer.h"

namespace bert::tok {

/// Settings that override what a model directory says.
struct TokenizerOverrides {
  /// The user's casing choice; a vocabulary that contradicts it is an error (a checkpoint's
  /// own contradicting tokenizer_config.json only gets a warning).
  std::optional<bool> lowercase;
  bool check_casing = true;
};

/// Builds the tokenizer of a model directory: WordPiece from vocab.txt (casing and special
/// tokens from tokenizer_config.json; without that file the casing is inferred from the
/// vocabulary and logged), byte-level BPE from vocab.json + merges.txt (RoBERTa), else
/// SentencePiece from its .model (with fairseq's ids for XLM-RoBERTa), else from a
/// tokenizer.json alone: WordPiece (its vocabulary, BertNormalizer and special tokens; with a
/// tokenizer_config.json its do_lower_case, strip_accents and tokenize_chinese_chars or their
/// defaults over the normalizer's, as HF's BertTokenizerFast sets them, unless it names the
/// generic PreTrainedTokenizerFast), RoBERTa's byte-level BPE (vocabulary, merges, <s> and </s>
/// of RobertaProcessing) or XLM-R's Unigram (pieces and scores, precompiled map, Metaspace, with
/// fairseq's ids as the .model gets them); another model, normalizer, pre-tokenizer or decoder
/// is refused, naming the key. Added tokens (tokenizer.json's "added_tokens",
/// added_tokens.json) are read as HF reads them for WordPiece, byte-level BPE and XLM-R, and
/// refused for a SentencePiece model with its own ids. `model_vocab_size` (the checkpoint's
/// vocab_size) bounds the ids produced. Throws TokenizerError / ConfigError.
std::unique_ptr<Tokenizer> load_tokenizer(const PretrainedDir& dir,
                                          int64_t model_vocab_size,
                                          const TokenizerOverrides& overrides = {});

/// The file load_tokenizer builds `dir`'s tokenizer from (vocab.txt, vocab.json, the
/// SentencePiece model, tokenizer.json), for messages; nullopt where it has none of them.
std::optional<std::filesystem::path> tokenizer_file(const PretrainedDir& dir);

/// The kind of `tokenizer` ("WordPiece", "byte-level BPE", "SentencePiece"), for reports.
std::string tokenizer_kind(const Tokenizer& tokenizer);

}  // namespace bert::tok
