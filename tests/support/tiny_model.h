// A tiny random BERT directory for the recipes layer's tests (recipes, sweeps, tasks).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "bert/tokenizer/wordpiece.h"
#include "recipes/runner/new_model.h"
#include "tests/support/test_support.h"

namespace bert::testing {

/// Writes a random model of tiny_config() shape with a 12-entry uncased vocabulary ([PAD]
/// [UNK] [CLS] [SEP] [MASK] and the words "a" to "g") to `dir`, seed 0.
inline void write_tiny_model(const std::filesystem::path& dir) {
  const std::vector<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a",
                                          "b",     "c",     "d",     "e",     "f",      "g"};
  tok::WordPieceOptions options;
  options.check_casing = tok::CasingCheck::kOff;
  tok::WordPieceTokenizer tokenizer(vocab, options);
  auto config = tiny_config();
  config.vocab_size(static_cast<int64_t>(vocab.size()));
  recipes::write_random_model(dir, config, tokenizer, 0);
}

}  // namespace bert::testing
