#include "bert/checkpoint/resize_vocab.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <string>

#include "bert/common/error.h"
#include "bert/common/strings.h"

namespace bert {
namespace {

/// The masked-LM heads' decoder weights (aliases of the word embeddings in pytorch_model.bin) and
/// output biases of every family's HF classes.
constexpr const char* kDecoderWeights[] = {"cls.predictions.decoder.weight",
                                           "lm_head.decoder.weight", "vocab_projector.weight",
                                           "generator_lm_head.weight"};
constexpr const char* kOutputBiases[] = {"cls.predictions.bias", "cls.predictions.decoder.bias",
                                         "lm_head.bias",         "lm_head.decoder.bias",
                                         "vocab_projector.bias", "generator_lm_head.bias"};

template <class Names>
bool one_of(const std::string& key, const Names& names) {
  return std::any_of(std::begin(names), std::end(names), [&](const char* n) { return key == n; });
}

}  // namespace

void grow_vocabulary(TensorMap& weights, int64_t old_size, int64_t new_size) {
  if (new_size < old_size)
    throw CheckpointError(fmt::format("vocabulary can only grow: {} -> {}", old_size, new_size));
  bool found = false;
  torch::NoGradGuard no_grad;
  for (auto& [key, tensor] : weights) {
    const bool embedding =
        ends_with(key, "embeddings.word_embeddings.weight") || one_of(key, kDecoderWeights);
    const bool bias = one_of(key, kOutputBiases);
    if (!embedding && !bias) continue;
    if (tensor.size(0) != old_size)
      throw CheckpointError(fmt::format("{}: {} rows, but the config's vocab_size is {}", key,
                                        tensor.size(0), old_size));
    found |= embedding;
    if (new_size == old_size) continue;
    const auto extra = new_size - old_size;
    const auto fresh = embedding ? tensor.to(torch::kFloat)
                                       .mean(0, /*keepdim=*/true)
                                       .expand({extra, tensor.size(1)})
                                       .to(tensor.scalar_type())
                                 : torch::zeros({extra}, tensor.options());
    tensor = torch::cat({tensor, fresh}, 0).contiguous();
  }
  if (!found)
    throw CheckpointError("no word embedding (embeddings.word_embeddings.weight) in the weights");
}

}  // namespace bert
