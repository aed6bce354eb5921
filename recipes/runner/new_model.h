#pragma once

#include <cstdint>
#include <filesystem>

#include "bert/model/bert_config.h"
#include "bert/tokenizer/tokenizer.h"

namespace bert::recipes {

/// Writes a randomly initialised BertForPreTraining (HF's initialisation, drawn from `seed`) in
/// HF layout to `out`: config.json, model.safetensors (the tied decoder weight omitted, as HF
/// writes it) and the tokenizer's files, whose model_max_length becomes the model's longest
/// input (HF's checkpoints state it so; the saved default, 512, would let HF's tokenizer pass a
/// smaller model more positions than it has). `config.vocab_size` must match the tokenizer. The
/// start of a model trained from scratch, and the tiny models of tests and the quickstart.
void write_random_model(const std::filesystem::path& out,
                        const BertConfig& config,
                        tok::Tokenizer& tokenizer,
                        uint64_t seed);

}  // namespace bert::recipes
