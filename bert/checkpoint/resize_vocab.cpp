#include "bert/checkpoint/resize_vocab.h"

#include <fmt/format.h>

#include "bert/common/error.h"
#include "bert/common/strings.h"

namespace bert {

void grow_vocabulary(TensorMap& weights, int64_t old_size, int64_t new_size) {
  if (new_size < old_size)
    throw CheckpointError(fmt::format("vocabulary can only grow: {} -> {}", old_size, new_size));
  bool found = false;
  torch::NoGradGuard no_grad;
  for (auto& [key, tensor] : weights) {
    const bool embedding = ends_with(key, "embeddings.word_embeddings.weight") ||
                           key == "cls.predictions.decoder.weight";
    const bool bias = key == "cls.predictions.bias" || key == "cls.predictions.decoder.bias";
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
