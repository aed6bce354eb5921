#pragma once

#include <filesystem>

namespace bert::recipes {

struct QuickstartOptions {
  std::filesystem::path out = "runs/quickstart";
  int threads = 0;
  int seed = 0;
};

/// The embedded default job: builds a small BERT and a WordPiece vocabulary generated from
/// nothing but the seed, saves both in Hugging Face layout, reloads them strictly, checks
/// that the reloaded model reproduces the original outputs bit for bit and prints the encoder
/// outputs for a few generated sentences. Returns 0 when every check holds.
int run_quickstart(const QuickstartOptions& options);

}  // namespace bert::recipes
