#include "bert/model/bert_config.h"

#include <fmt/format.h>

#include <set>
#include <tuple>

#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/json_util.h"

namespace bert {
namespace {

using json = nlohmann::json;

/// Collects typed reads of config.json keys and every problem with them.
class KeyReader {
 public:
  KeyReader(const json& root, std::string source) : root_(root), source_(std::move(source)) {}

  template <class T>
  void read(const char* key, T& out) {
    seen_.insert(key);
    const auto it = root_.find(key);
    if (it == root_.end() || it->is_null()) return;
    try {
      if constexpr (std::is_same_v<T, int64_t>) {
        if (!it->is_number_integer()) throw std::invalid_argument("expected an integer");
        out = it->template get<int64_t>();
      } else if constexpr (std::is_same_v<T, double>) {
        if (!it->is_number()) throw std::invalid_argument("expected a number");
        out = it->template get<double>();
      } else {
        out = it->template get<T>();
      }
    } catch (const std::exception& e) {
      problem(key, fmt::format("{} (got {})", e.what(), clip(it->dump())));
    }
  }

  void mark(const char* key) { seen_.insert(key); }
  bool seen(const std::string& key) const { return seen_.count(key) > 0; }
  const json* find(const char* key) const {
    const auto it = root_.find(key);
    return it == root_.end() ? nullptr : &*it;
  }
  void problem(const std::string& key, const std::string& message) {
    problems_.push_back(fmt::format("{}: key '{}': {}", source_, key, message));
  }
  std::vector<std::string>& problems() { return problems_; }

 private:
  const json& root_;
  std::string source_;
  std::set<std::string> seen_;
  std::vector<std::string> problems_;
};

}  // namespace

Activation parse_activation(const std::string& name, const std::string& where) {
  if (name == "gelu") return Activation::kGelu;
  if (name == "gelu_new" || name == "gelu_pytorch_tanh") return Activation::kGeluNew;
  if (name == "relu") return Activation::kRelu;
  throw ConfigError(
      fmt::format("{}: key 'hidden_act': unsupported activation '{}'; supported: "
                  "gelu, gelu_new, gelu_pytorch_tanh, relu",
                  where, name));
}

std::string activation_name(Activation activation) {
  switch (activation) {
    case Activation::kGelu:
      return "gelu";
    case Activation::kGeluNew:
      return "gelu_new";
    case Activation::kRelu:
      return "relu";
  }
  return "gelu";
}

namespace {

/// DistilBERT's config.json names for the BERT fields they hold.
constexpr std::pair<const char*, const char*> kDistilBertKeys[] = {
    {"dim", "hidden_size"},
    {"n_layers", "num_hidden_layers"},
    {"n_heads", "num_attention_heads"},
    {"hidden_dim", "intermediate_size"},
    {"activation", "hidden_act"},
    {"dropout", "hidden_dropout_prob"},
    {"attention_dropout", "attention_probs_dropout_prob"},
    {"seq_classif_dropout", "classifier_dropout"},
};

}  // namespace

std::string family_model_type(ModelFamily family) {
  switch (family) {
    case ModelFamily::kBert:
      return "bert";
    case ModelFamily::kRoberta:
      return "roberta";
    case ModelFamily::kXlmRoberta:
      return "xlm-roberta";
    case ModelFamily::kDistilBert:
      return "distilbert";
    case ModelFamily::kElectra:
      return "electra";
  }
  return "bert";
}

ModelFamily parse_model_type(const std::string& type, const std::string& where) {
  for (const auto family : {ModelFamily::kBert, ModelFamily::kRoberta, ModelFamily::kXlmRoberta,
                            ModelFamily::kDistilBert, ModelFamily::kElectra})
    if (type == family_model_type(family)) return family;
  throw ConfigError(fmt::format(
      "{}: key 'model_type': '{}' is not an encoder bertft runs; supported: bert, roberta, "
      "xlm-roberta, distilbert, electra",
      where, type));
}

std::string family_base_prefix(ModelFamily family) {
  switch (family) {
    case ModelFamily::kRoberta:
    case ModelFamily::kXlmRoberta:
      return "roberta";
    case ModelFamily::kDistilBert:
      return "distilbert";
    case ModelFamily::kElectra:
      return "electra";
    case ModelFamily::kBert:
      break;
  }
  return "bert";
}

std::string family_class_stem(ModelFamily family) {
  switch (family) {
    case ModelFamily::kRoberta:
      return "Roberta";
    case ModelFamily::kXlmRoberta:
      return "XLMRoberta";
    case ModelFamily::kDistilBert:
      return "DistilBert";
    case ModelFamily::kElectra:
      return "Electra";
    case ModelFamily::kBert:
      break;
  }
  return "Bert";
}

std::string family_architecture(ModelFamily family, const std::string& bert_architecture) {
  const std::string bert = "Bert";
  if (bert_architecture.compare(0, bert.size(), bert) != 0) return bert_architecture;
  return family_class_stem(family) + bert_architecture.substr(bert.size());
}

std::string bert_architecture(const std::string& architecture) {
  for (const auto family : {ModelFamily::kXlmRoberta, ModelFamily::kRoberta,
                            ModelFamily::kDistilBert, ModelFamily::kElectra}) {
    const auto stem = family_class_stem(family);
    if (architecture.compare(0, stem.size(), stem) == 0)
      return "Bert" + architecture.substr(stem.size());
  }
  return architecture;
}

BertConfig BertConfig::from_json(const json& original, const std::string& source) {
  if (!original.is_object()) throw ConfigError(fmt::format("{}: expected a JSON object", source));
  BertConfig c;
  if (const auto t = original.find("model_type"); t != original.end() && t->is_string())
    c.family_ = parse_model_type(t->get<std::string>(), source);
  json root = original;
  if (c.family_ == ModelFamily::kDistilBert) {
    // Read DistilBERT's keys as the BERT fields they are; it has no token types and a fixed
    // LayerNorm epsilon.
    for (const auto& [own, bert_key] : kDistilBertKeys) {
      if (root.contains(bert_key))
        throw ConfigError(fmt::format("{}: key '{}' is not a DistilBERT key (it uses '{}')", source,
                                      bert_key, own));
      if (const auto it = root.find(own); it != root.end()) {
        root[bert_key] = *it;
        root.erase(own);
      }
    }
    for (const char* key : {"type_vocab_size", "layer_norm_eps"})
      if (root.contains(key))
        throw ConfigError(fmt::format("{}: key '{}' is not a DistilBERT key", source, key));
    c.num_hidden_layers_ = 6;
    c.type_vocab_size_ = 0;
    c.classifier_dropout_ = 0.2;  // DistilBertConfig's seq_classif_dropout
    c.qa_dropout_ = 0.1;
  } else if (c.positions_after_padding()) {
    c.pad_token_id_ = 1;  // RobertaConfig's default
    // RobertaConfig's vocab_size (XLMRobertaConfig keeps BERT's 30522).
    if (c.family_ == ModelFamily::kRoberta) c.vocab_size_ = 50265;
  } else if (c.family_ == ModelFamily::kElectra) {
    c.embedding_size_ = 128;  // ElectraConfig's defaults
    c.hidden_size_ = 256;
    c.num_attention_heads_ = 4;
    c.intermediate_size_ = 1024;
  }
  KeyReader r(root, source);
  r.read("vocab_size", c.vocab_size_);
  r.read("hidden_size", c.hidden_size_);
  r.read("num_hidden_layers", c.num_hidden_layers_);
  r.read("num_attention_heads", c.num_attention_heads_);
  r.read("intermediate_size", c.intermediate_size_);
  r.read("hidden_dropout_prob", c.hidden_dropout_prob_);
  r.read("attention_probs_dropout_prob", c.attention_probs_dropout_prob_);
  r.read("max_position_embeddings", c.max_position_embeddings_);
  r.read("type_vocab_size", c.type_vocab_size_);
  r.read("initializer_range", c.initializer_range_);
  r.read("layer_norm_eps", c.layer_norm_eps_);
  r.read("pad_token_id", c.pad_token_id_);
  if (c.family_ == ModelFamily::kElectra) r.read("embedding_size", c.embedding_size_);
  if (c.family_ == ModelFamily::kDistilBert) {
    r.mark("qa_dropout");
    if (const json* d = r.find("qa_dropout"); d != nullptr && !d->is_null()) {
      if (d->is_number())
        c.qa_dropout_ = d->get<double>();
      else
        r.problem("qa_dropout", fmt::format("expected a number, got {}", clip(d->dump())));
    }
  }

  r.mark("hidden_act");
  if (const json* act = r.find("hidden_act")) {
    if (!act->is_string()) {
      r.problem("hidden_act", fmt::format("expected a string, got {}", clip(act->dump())));
    } else {
      try {
        c.hidden_act_ = parse_activation(act->get<std::string>(), source);
      } catch (const ConfigError& e) {
        r.problems().push_back(e.what());
      }
    }
  }
  r.mark("classifier_dropout");
  if (const json* d = r.find("classifier_dropout"); d != nullptr && !d->is_null()) {
    if (d->is_number())
      c.classifier_dropout_ = d->get<double>();
    else
      r.problem("classifier_dropout",
                fmt::format("expected a number or null, got {}", clip(d->dump())));
  }
  r.mark("problem_type");
  if (const json* p = r.find("problem_type"); p != nullptr && !p->is_null()) {
    if (p->is_string())
      c.problem_type_ = p->get<std::string>();
    else
      r.problem("problem_type", "expected a string or null");
  }
  r.mark("architectures");
  if (const json* a = r.find("architectures"); a != nullptr && !a->is_null()) {
    try {
      c.architectures_ = a->get<std::vector<std::string>>();
    } catch (const std::exception&) {
      r.problem("architectures", "expected a list of strings");
    }
  }
  r.mark("label2id");  // derived from id2label when written
  r.mark("id2label");
  if (const json* labels = r.find("id2label"); labels != nullptr && !labels->is_null()) {
    if (!labels->is_object()) {
      r.problem("id2label", "expected an object {\"0\": \"LABEL\", ...}");
    } else {
      std::map<int64_t, std::string> by_id;
      for (const auto& [k, v] : labels->items()) {
        try {
          size_t used = 0;
          const int64_t id = std::stoll(k, &used);
          if (used != k.size() || id < 0) throw std::invalid_argument(k);
          if (!v.is_string()) throw std::invalid_argument(k);
          by_id[id] = v.get<std::string>();
        } catch (const std::exception&) {
          r.problem("id2label", fmt::format("entry \"{}\": {} is not a non-negative id -> string",
                                            clip(k), clip(v.dump())));
        }
      }
      int64_t expected = 0;
      for (const auto& [id, name] : by_id) {
        if (id != expected++) {
          r.problem("id2label", fmt::format("ids must be 0..{} without gaps", by_id.size() - 1));
          break;
        }
        c.id2label_.push_back(name);
      }
    }
  }
  // Settings of HF BertConfig that change the computation and that bertft does not implement.
  r.mark("position_embedding_type");
  if (const json* p = r.find("position_embedding_type"); p != nullptr && !p->is_null()) {
    if (!p->is_string() || p->get<std::string>() != "absolute")
      r.problem("position_embedding_type",
                fmt::format("unsupported value {}; bertft implements only \"absolute\"",
                            clip(p->dump())));
  }
  // HF builds the layers of pruned_heads with fewer heads (its prune_heads after init).
  r.mark("pruned_heads");
  if (const json* p = r.find("pruned_heads");
      p != nullptr && !p->is_null() && !(p->is_object() && p->empty()))
    r.problem("pruned_heads",
              fmt::format("{} is unsupported: bertft builds every layer with all its heads",
                          clip(p->dump())));
  for (const char* flag : {"is_decoder", "add_cross_attention"}) {
    r.mark(flag);
    if (const json* f = r.find(flag); f != nullptr && f->is_boolean() && f->get<bool>())
      r.problem(flag, "true is unsupported: bertft implements the BERT encoder only");
  }
  r.mark("model_type");
  if (const json* t = r.find("model_type"); t != nullptr && !t->is_string())
    r.problem("model_type", fmt::format("expected a string, got {}", clip(t->dump())));
  for (const auto& [key, value] : root.items()) {
    if (!r.seen(key)) c.extra_[key] = value;
  }
  // Problems name the keys as the file spells them (DistilBERT's "dim", not "hidden_size").
  const auto own_names = [&](std::vector<std::string> problems) {
    if (c.family_ != ModelFamily::kDistilBert) return problems;
    for (auto& p : problems)
      for (const auto& [own, bert_key] : kDistilBertKeys) {
        const std::string from = fmt::format("key '{}'", bert_key);
        if (const auto at = p.find(from); at != std::string::npos)
          p.replace(at, from.size(), fmt::format("key '{}'", own));
      }
    return problems;
  };
  if (!r.problems().empty()) throw ConfigError(own_names(std::move(r.problems())));
  try {
    c.validate(source);
  } catch (const ConfigError& e) {
    throw ConfigError(own_names(e.problems()));
  }
  return c;
}

BertConfig BertConfig::from_file(const std::filesystem::path& path) {
  json root;
  try {
    root = parse_json_limited(read_file(path));
  } catch (const json::parse_error& e) {
    throw ConfigError(fmt::format("{}: invalid JSON: {}", path.string(), e.what()));
  } catch (const Error& e) {
    throw ConfigError(e.what());
  }
  return from_json(root, path.string());
}

void BertConfig::validate(const std::string& source) const {
  std::vector<std::string> problems;
  auto positive = [&](const char* key, int64_t value) {
    if (value <= 0)
      problems.push_back(fmt::format("{}: key '{}': must be > 0, got {}", source, key, value));
  };
  positive("vocab_size", vocab_size_);
  positive("hidden_size", hidden_size_);
  positive("num_hidden_layers", num_hidden_layers_);
  positive("num_attention_heads", num_attention_heads_);
  positive("intermediate_size", intermediate_size_);
  positive("max_position_embeddings", max_position_embeddings_);
  if (family_ != ModelFamily::kDistilBert) positive("type_vocab_size", type_vocab_size_);
  if (embedding_size_ < 0 || embedding_size_ > kMaxHiddenSize)
    problems.push_back(fmt::format("{}: key 'embedding_size': must be in [1, {}], got {}", source,
                                   kMaxHiddenSize, embedding_size_));
  if (positions_after_padding() && max_sequence_length() <= 0)
    problems.push_back(
        fmt::format("{}: key 'max_position_embeddings': {} leaves no positions after the padding "
                    "id {} (RoBERTa's positions start at pad_token_id + 1)",
                    source, max_position_embeddings_, pad_token_id_));
  // Upper bounds far above any released encoder's, so that a hostile config.json cannot make
  // bertft build a model of terabytes before a weight is read.
  for (const auto& [key, value, most] :
       {std::tuple{"vocab_size", vocab_size_, kMaxVocabSize},
        std::tuple{"hidden_size", hidden_size_, kMaxHiddenSize},
        std::tuple{"num_hidden_layers", num_hidden_layers_, kMaxLayers},
        std::tuple{"num_attention_heads", num_attention_heads_, kMaxHeads},
        std::tuple{"intermediate_size", intermediate_size_, kMaxIntermediateSize},
        std::tuple{"max_position_embeddings", max_position_embeddings_, kMaxPositions},
        std::tuple{"type_vocab_size", type_vocab_size_, kMaxTypeVocabSize}})
    if (value > most)
      problems.push_back(fmt::format("{}: key '{}': {} is above the supported maximum {}", source,
                                     key, value, most));
  if (num_attention_heads_ > 0 && hidden_size_ % num_attention_heads_ != 0)
    problems.push_back(
        fmt::format("{}: key 'num_attention_heads': hidden_size ({}) must be divisible by "
                    "num_attention_heads ({})",
                    source, hidden_size_, num_attention_heads_));
  for (const auto& [key, p] :
       {std::pair{"hidden_dropout_prob", hidden_dropout_prob_},
        std::pair{"attention_probs_dropout_prob", attention_probs_dropout_prob_}}) {
    if (p < 0.0 || p >= 1.0)
      problems.push_back(fmt::format("{}: key '{}': must be in [0, 1), got {}", source, key, p));
  }
  if (layer_norm_eps_ <= 0.0)
    problems.push_back(fmt::format("{}: key 'layer_norm_eps': must be > 0", source));
  if (pad_token_id_ < 0 || pad_token_id_ >= vocab_size_)
    problems.push_back(fmt::format("{}: key 'pad_token_id': {} is outside the vocabulary [0, {})",
                                   source, pad_token_id_, vocab_size_));
  if (!problems.empty()) throw ConfigError(std::move(problems));
}

int64_t BertConfig::encoder_parameters() const {
  const int64_t h = hidden_size_, i = intermediate_size_;
  const int64_t e = embedding_dim();
  const int64_t embeddings = (vocab_size_ + max_position_embeddings_ + type_vocab_size_) * e +
                             2 * e + (e != h ? e * h + h : 0);
  const int64_t layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h;
  return embeddings + num_hidden_layers_ * layer + (base_has_pooler() ? h * h + h : 0);
}

json BertConfig::to_json() const {
  json out = extra_;
  out["model_type"] = family_model_type(family_);
  out["vocab_size"] = vocab_size_;
  out["hidden_size"] = hidden_size_;
  out["num_hidden_layers"] = num_hidden_layers_;
  out["num_attention_heads"] = num_attention_heads_;
  out["intermediate_size"] = intermediate_size_;
  out["hidden_act"] = activation_name(hidden_act_);
  out["hidden_dropout_prob"] = hidden_dropout_prob_;
  out["attention_probs_dropout_prob"] = attention_probs_dropout_prob_;
  out["max_position_embeddings"] = max_position_embeddings_;
  out["type_vocab_size"] = type_vocab_size_;
  out["initializer_range"] = initializer_range_;
  out["layer_norm_eps"] = layer_norm_eps_;
  out["pad_token_id"] = pad_token_id_;
  out["position_embedding_type"] = "absolute";
  out["classifier_dropout"] = classifier_dropout_ ? json(*classifier_dropout_) : json(nullptr);
  if (!architectures_.empty()) out["architectures"] = architectures_;
  if (problem_type_) out["problem_type"] = *problem_type_;
  if (!id2label_.empty()) {
    json id2label = json::object(), label2id = json::object();
    for (size_t i = 0; i < id2label_.size(); ++i) {
      id2label[std::to_string(i)] = id2label_[i];
      label2id[id2label_[i]] = i;
    }
    out["id2label"] = id2label;
    out["label2id"] = label2id;
  }
  if (family_ == ModelFamily::kElectra) out["embedding_size"] = embedding_dim();
  if (family_ == ModelFamily::kDistilBert) {
    for (const auto& [own, bert_key] : kDistilBertKeys) {
      out[own] = out[bert_key];
      out.erase(bert_key);
    }
    if (out["seq_classif_dropout"].is_null()) out["seq_classif_dropout"] = 0.2;
    out["qa_dropout"] = qa_dropout_.value_or(0.1);
    for (const char* key : {"type_vocab_size", "layer_norm_eps", "position_embedding_type"})
      out.erase(key);
  }
  return out;
}

}  // namespace bert
