#pragma once

#include <cstdint>
#include <filesystem>

#include "bert/model/bert_config.h"
#include "bert/tokenizer/tokenizer.h"

namespace bert::recipes {

/// Writes a randomly initialised BertForPreTraining (HF's initialisation, drawn from `seed`) in
/// HF layout to `out`: config.json, model.safetensors (the tied decoder weight omitted, as HF
/// writes it) and the tokenizer's files. `config.vocab_size` must match the tokenizer. The start
/// of a model trained from scratch, and the tiny models of tests and the quickstart.
void write_random_model(const std::filesystem::path& out,
                        const BertConfig& config,
                        const tok::Tokenizer& tokenizer,
                        uint64_t seed);

}  // namespace bert::recipes
