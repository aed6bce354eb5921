#include "bert/checkpoint/family_keys.h"

#include <cctype>

#include "bert/common/strings.h"

namespace bert {
namespace {

/// DistilBERT's names for parts of a layer: bertft (BERT) suffix -> HF suffix after "layer.N.".
constexpr std::pair<const char*, const char*> kDistilBertLayer[] = {
    {"attention.self.query.", "attention.q_lin."},
    {"attention.self.key.", "attention.k_lin."},
    {"attention.self.value.", "attention.v_lin."},
    {"attention.output.dense.", "attention.out_lin."},
    {"attention.output.LayerNorm.", "sa_layer_norm."},
    {"intermediate.dense.", "ffn.lin1."},
    {"output.dense.", "ffn.lin2."},
    {"output.LayerNorm.", "output_layer_norm."},
};
constexpr const char* kBertLayers = "encoder.layer.";
constexpr const char* kDistilBertLayers = "transformer.layer.";

/// Rewrites `key` = prefix + `from_layers` + N + "." + suffix when the suffix is one of `pairs`
/// (`forward`: BERT -> DistilBERT names, else back); nullopt when it is not such a key.
std::optional<std::string> rename_layer_key(const std::string& key, bool forward) {
  const std::string from_layers = forward ? kBertLayers : kDistilBertLayers;
  const std::string to_layers = forward ? kDistilBertLayers : kBertLayers;
  const auto at = key.find(from_layers);
  if (at == std::string::npos) return std::nullopt;
  size_t pos = at + from_layers.size();
  const size_t digits = pos;
  while (pos < key.size() && std::isdigit(static_cast<unsigned char>(key[pos]))) ++pos;
  if (pos == digits || pos >= key.size() || key[pos] != '.') return std::nullopt;
  const std::string rest = key.substr(pos + 1);
  for (const auto& [bert, distil] : kDistilBertLayer) {
    const std::string from = forward ? bert : distil, to = forward ? distil : bert;
    if (starts_with(rest, from))
      return key.substr(0, at) + to_layers + key.substr(digits, pos - digits) + "." + to +
             rest.substr(from.size());
  }
  return std::nullopt;
}

}  // namespace

std::string hf_key(ModelFamily family, const std::string& key) {
  if (family != ModelFamily::kDistilBert) return key;
  return rename_layer_key(key, /*forward=*/true).value_or(key);
}

std::string bertft_key(const std::string& key) {
  return rename_layer_key(key, /*forward=*/false).value_or(key);
}

TensorMap to_hf_keys(const TensorMap& tensors, ModelFamily family) {
  TensorMap out;
  for (const auto& [key, tensor] : tensors) out.emplace(hf_key(family, key), tensor);
  return out;
}

std::optional<std::string> base_prefix_of(const std::string& key) {
  for (const char* prefix : {"bert.", "roberta.", "distilbert.", "electra."})
    if (starts_with(key, prefix)) return std::string(prefix);
  return std::nullopt;
}

}  // namespace bert
