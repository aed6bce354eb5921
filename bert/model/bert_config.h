#pragma once

#include <torch/arg.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace bert {

/// The activation of the feed-forward block (`hidden_act` in HF config.json).
enum class Activation {
  kGelu,     ///< "gelu": exact erf form (HF GELUActivation)
  kGeluNew,  ///< "gelu_new" / "gelu_pytorch_tanh": tanh approximation
  kRelu,     ///< "relu"
};

/// Parses an HF activation name; throws ConfigError listing the supported ones.
Activation parse_activation(const std::string& name, const std::string& where);
std::string activation_name(Activation activation);

/// The largest sizes a config.json may ask for: far above any released encoder (XLM-R's
/// 250 002 words, BERT-large's 24 layers and 4 096-wide feed-forward), far below sizes that
/// would build a model of terabytes from a few bytes of JSON.
constexpr int64_t kMaxVocabSize = int64_t{1} << 22;
constexpr int64_t kMaxHiddenSize = 16384;
constexpr int64_t kMaxLayers = 256;
constexpr int64_t kMaxHeads = 256;
constexpr int64_t kMaxIntermediateSize = 65536;
constexpr int64_t kMaxPositions = int64_t{1} << 17;
constexpr int64_t kMaxTypeVocabSize = 1024;

/// BERT hyperparameters, fields named exactly like Hugging Face `config.json`.
/// Defaults are HF BertConfig's (bert-base). Keys this struct does not model are kept in
/// `extra` and written back unchanged, so a read-write round trip loses nothing.
struct BertConfig {
  TORCH_ARG(int64_t, vocab_size) = 30522;
  TORCH_ARG(int64_t, hidden_size) = 768;
  TORCH_ARG(int64_t, num_hidden_layers) = 12;
  TORCH_ARG(int64_t, num_attention_heads) = 12;
  TORCH_ARG(int64_t, intermediate_size) = 3072;
  TORCH_ARG(Activation, hidden_act) = Activation::kGelu;
  TORCH_ARG(double, hidden_dropout_prob) = 0.1;
  TORCH_ARG(double, attention_probs_dropout_prob) = 0.1;
  TORCH_ARG(int64_t, max_position_embeddings) = 512;
  TORCH_ARG(int64_t, type_vocab_size) = 2;
  TORCH_ARG(double, initializer_range) = 0.02;
  TORCH_ARG(double, layer_norm_eps) = 1e-12;
  TORCH_ARG(int64_t, pad_token_id) = 0;
  /// Dropout of task heads; HF falls back to hidden_dropout_prob when null.
  TORCH_ARG(std::optional<double>, classifier_dropout) = std::nullopt;
  /// Label names by id (HF `id2label`); empty when the checkpoint has none.
  TORCH_ARG(std::vector<std::string>, id2label) = {};
  TORCH_ARG(std::vector<std::string>, architectures) = {};
  TORCH_ARG(std::optional<std::string>, problem_type) = std::nullopt;
  /// Every other key of config.json, written back verbatim.
  TORCH_ARG(nlohmann::json, extra) = nlohmann::json::object();

 public:
  /// Reads and validates an HF config.json. `source` names the file in errors. Throws
  /// ConfigError naming each bad or unsupported key (e.g. `position_embedding_type:
  /// "relative_key"`, `is_decoder: true`).
  static BertConfig from_json(const nlohmann::json& json, const std::string& source);
  static BertConfig from_file(const std::filesystem::path& path);

  /// HF-compatible config.json content (model_type "bert", id2label/label2id when labels are set).
  nlohmann::json to_json() const;

  /// Throws ConfigError listing every inconsistent value (e.g. hidden_size not divisible by
  /// num_attention_heads).
  void validate(const std::string& source) const;

  int64_t head_dim() const { return hidden_size_ / num_attention_heads_; }
  /// Parameters of the encoder (embeddings, layers, pooler) this config builds.
  int64_t encoder_parameters() const;
  int64_t num_labels() const { return static_cast<int64_t>(id2label_.size()); }
};

}  // namespace bert
