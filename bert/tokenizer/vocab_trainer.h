#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace bert::tok {

struct WordPieceTrainerOptions {
  int64_t vocab_size = 30522;  ///< entries in the result, specials included
  int64_t min_frequency = 2;   ///< pairs seen fewer times are never merged
  bool lowercase = false;      ///< uncased (lower-case + strip accents), as the tokenizer will be
  std::vector<std::string> special_tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
};

/// Trains a WordPiece vocabulary the way HF tokenizers' WordPieceTrainer does: BERT
/// normalisation and pre-tokenisation, words split into characters (continuations prefixed
/// "##"), then the most frequent adjacent pair merged repeatedly (ties broken by the pair's
/// text, so the result is deterministic) until vocab_size entries or no pair reaches
/// min_frequency. Returns the vocabulary in vocab.txt order: specials, the alphabet (sorted),
/// merges in the order made.
std::vector<std::string> train_wordpiece(const std::vector<std::string>& texts,
                                         const WordPieceTrainerOptions& options);

/// Trains a SentencePiece model (unigram or bpe) with libsentencepiece's trainer, with BERT's
/// special tokens: [PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3, [MASK]=4 (no <s>/</s>). Writes
/// `model_prefix`.model and .vocab. Throws TokenizerError with the trainer's message, or
/// naming an input whose path has a comma (the trainer splits its inputs at commas).
void train_sentencepiece(const std::vector<std::filesystem::path>& inputs,
                         const std::string& model_prefix,
                         int64_t vocab_size,
                         const std::string& model_type,
                         double character_coverage = 0.9995,
                         int64_t seed_sentences = 1000000);

}  // namespace bert::tok
