#pragma once

#include <cstdint>

#include "bert/checkpoint/tensor_map.h"

namespace bert {

/// Grows every vocabulary-sized tensor of a state dict (HF key names of any family, with or
/// without the encoder's prefix) from `old_size` to `new_size` entries, as HF's
/// resize_token_embeddings does with mean resizing: new word-embedding rows are the mean of the
/// old rows (so new tokens start from an average word, not noise); new MLM output-bias entries
/// (cls.predictions.bias, lm_head.bias, vocab_projector.bias, generator_lm_head.bias and their
/// decoder aliases) are 0. Old entries are unchanged. Throws CheckpointError when new_size <
/// old_size, no word embedding is found, or a vocabulary tensor does not have old_size rows.
void grow_vocabulary(TensorMap& weights, int64_t old_size, int64_t new_size);

}  // namespace bert
