#pragma once

#include <optional>
#include <string>

#include "bert/checkpoint/tensor_map.h"
#include "bert/model/bert_config.h"

namespace bert {

/// The HF state-dict key of bertft's key `key` in a model of `family`. bertft names every family's
/// parameters as BERT's; only DistilBERT's HF names differ ("encoder.layer.0.attention.self.query"
/// is "transformer.layer.0.attention.q_lin", "...output.LayerNorm" is "...output_layer_norm").
std::string hf_key(ModelFamily family, const std::string& key);

/// bertft's key for an HF key: DistilBERT's "transformer.layer.N...." names mapped back, every
/// other key unchanged.
std::string bertft_key(const std::string& key);

/// `tensors` (bertft keys) under the HF keys of `family`, sharing memory.
TensorMap to_hf_keys(const TensorMap& tensors, ModelFamily family);

/// The encoder prefixes HF task models use ("bert.", "roberta.", "distilbert.", "electra."):
/// the one `key` starts with, or nullopt.
std::optional<std::string> base_prefix_of(const std::string& key);

}  // namespace bert
