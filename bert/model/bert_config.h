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

/// The encoder families bertft runs as configuration of one BERT-shaped stack. Each differs from
/// BERT only in what its HF checkpoint says: key names, position ids, token types, an embedding
/// projection, which pooler and which task heads.
enum class ModelFamily {
  kBert,        ///< "bert" (also BioBERT, SciBERT, multilingual BERT, ...)
  kRoberta,     ///< "roberta": positions counted after the padding id, one token type
  kXlmRoberta,  ///< "xlm-roberta": RoBERTa's network, a SentencePiece vocabulary
  kDistilBert,  ///< "distilbert": own key names, no token types, no pooler
  kElectra,     ///< "electra": embeddings of embedding_size projected to hidden_size, no pooler
};

/// HF `model_type` of a family ("bert", "roberta", "xlm-roberta", "distilbert", "electra").
std::string family_model_type(ModelFamily family);
/// The family of an HF `model_type`; throws ConfigError naming `where` and the supported types.
ModelFamily parse_model_type(const std::string& type, const std::string& where);
/// The attribute that holds the encoder in HF task models ("bert", "roberta", "distilbert",
/// "electra"): the first component of their state-dict keys.
std::string family_base_prefix(ModelFamily family);
/// The class-name stem of HF architectures ("Bert", "Roberta", "XLMRoberta", "DistilBert",
/// "Electra"), e.g. "Roberta" + "ForSequenceClassification".
std::string family_class_stem(ModelFamily family);
/// `bert_architecture` ("BertForSequenceClassification") as `family` names it
/// ("RobertaForSequenceClassification").
std::string family_architecture(ModelFamily family, const std::string& bert_architecture);
/// The BERT name of any family's architecture ("ElectraForTokenClassification" ->
/// "BertForTokenClassification"); other names unchanged.
std::string bert_architecture(const std::string& architecture);

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
  TORCH_ARG(ModelFamily, family) = ModelFamily::kBert;
  /// Width of the embeddings (ELECTRA's `embedding_size`); 0 = hidden_size. When it differs from
  /// hidden_size an `embeddings_project` Linear maps the embeddings to hidden_size.
  TORCH_ARG(int64_t, embedding_size) = 0;
  /// DistilBERT's `qa_dropout` before its span head; unset elsewhere (no dropout there).
  TORCH_ARG(std::optional<double>, qa_dropout) = std::nullopt;
  /// Dropout of task heads; HF falls back to hidden_dropout_prob when null.
  TORCH_ARG(std::optional<double>, classifier_dropout) = std::nullopt;
  /// Label names by id (HF `id2label`); empty when the checkpoint has none.
  TORCH_ARG(std::vector<std::string>, id2label) = {};
  TORCH_ARG(std::vector<std::string>, architectures) = {};
  TORCH_ARG(std::optional<std::string>, problem_type) = std::nullopt;
  /// Every other key of config.json, written back verbatim.
  TORCH_ARG(nlohmann::json, extra) = nlohmann::json::object();

 public:
  /// Reads and validates an HF config.json of any ModelFamily (`model_type`; BERT without it).
  /// DistilBERT's own key names (dim, n_layers, hidden_dim, ...) are read into the BERT fields
  /// and written back under its names. `source` names the file in errors. Throws
  /// ConfigError naming each bad or unsupported key (e.g. `position_embedding_type:
  /// "relative_key"`, `is_decoder: true`).
  static BertConfig from_json(const nlohmann::json& json, const std::string& source);
  static BertConfig from_file(const std::filesystem::path& path);

  /// HF-compatible config.json content in the family's own keys (model_type, id2label/label2id
  /// when labels are set).
  nlohmann::json to_json() const;

  /// Throws ConfigError listing every inconsistent value (e.g. hidden_size not divisible by
  /// num_attention_heads).
  void validate(const std::string& source) const;

  int64_t head_dim() const { return hidden_size_ / num_attention_heads_; }
  int64_t embedding_dim() const { return embedding_size_ > 0 ? embedding_size_ : hidden_size_; }
  /// RoBERTa's position ids: pad_token_id + 1 + index for tokens, pad_token_id for padding.
  bool positions_after_padding() const {
    return family_ == ModelFamily::kRoberta || family_ == ModelFamily::kXlmRoberta;
  }
  /// The longest input the position embeddings allow (max_position_embeddings, less RoBERTa's
  /// pad_token_id + 1 offset).
  int64_t max_sequence_length() const {
    return positions_after_padding() ? max_position_embeddings_ - pad_token_id_ - 1
                                     : max_position_embeddings_;
  }
  /// Whether the family's base model (HF `XxxModel`) has a pooler: BERT and RoBERTa do.
  bool base_has_pooler() const {
    return family_ == ModelFamily::kBert || positions_after_padding();
  }
  /// Parameters of the encoder (embeddings, layers, pooler) this config builds.
  int64_t encoder_parameters() const;
  int64_t num_labels() const { return static_cast<int64_t>(id2label_.size()); }
};

}  // namespace bert
