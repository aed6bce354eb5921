#include "recipes/runner/new_model.h"

#include <fmt/format.h>

#include "bert/checkpoint/load.h"
#include "bert/checkpoint/pretrained_dir.h"
#include "bert/common/error.h"
#include "bert/model/pretraining.h"

namespace bert::recipes {

void write_random_model(const std::filesystem::path& out,
                        const BertConfig& config,
                        tok::Tokenizer& tokenizer,
                        uint64_t seed) {
  if (config.vocab_size() != tokenizer.vocab_size())
    throw ConfigError(fmt::format("new model: vocab_size {} but the tokenizer has {} entries",
                                  config.vocab_size(), tokenizer.vocab_size()));
  config.validate("new model");
  torch::manual_seed(seed);
  BertForPreTraining model(config);
  TensorMap tensors = state_dict(*model);
  for (const auto& [alias, target] : BertForPreTrainingImpl::tied_aliases()) tensors.erase(alias);
  save_weights(out, tensors);
  save_config(out, config, "BertForPreTraining");
  tokenizer.set_model_max_length(config.max_sequence_length());
  tokenizer.save(out);
}

}  // namespace bert::recipes
