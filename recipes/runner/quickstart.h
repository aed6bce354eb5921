#pragma once

#include <filesystem>

namespace bert::recipes {

struct QuickstartOptions {
  std::filesystem::path out = "runs/quickstart";
  int threads = 0;
  int seed = 0;
  int jobs = 2;           ///< trials in parallel
  bool pretrain = false;  ///< pre-train the small BERT (MLM + NSP) on generated text first
};

/// The embedded default job, offline, end to end: generates a small sentence-classification
/// dataset and a WordPiece vocabulary from nothing but the seed, writes a small BERT
/// initialised from scratch, writes a recipe with a 2 x 2 sweep (learning rate x epochs, two
/// seeds each) and runs it (trials, leaderboard, export of the best model), then predicts a
/// held-out file with the exported model. With `pretrain`, the small BERT is first pre-trained
/// (pretrain-data instances, MLM + NSP) on generated documents and the sweep starts from it.
/// Returns 0 when every trial finished and the exported model predicts.
int run_quickstart(const QuickstartOptions& options);

}  // namespace bert::recipes
