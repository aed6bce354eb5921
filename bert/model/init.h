#pragma once

#include <torch/torch.h>

namespace bert {

/// BERT initialisation over every submodule of `module`: Linear and Embedding weights
/// ~ N(0, initializer_range), Linear biases 0, an Embedding's padding row 0, LayerNorm 1 / 0.
/// Parameters registered directly on a module (e.g. an MLM output bias) are set to 0.
void init_bert_weights(torch::nn::Module& module, double initializer_range);

}  // namespace bert
