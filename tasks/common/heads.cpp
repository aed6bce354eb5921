#include "tasks/common/heads.h"

#include "bert/common/error.h"
#include "bert/model/init.h"
#include "bert/model/layer.h"
#include "bert/model/onednn_linear.h"

namespace bert::tasks {
namespace {

/// A value of type T from the config's extra keys (ELECTRA's summary_*), else `fallback`
/// (also when config.json holds another type there).
template <class T>
T extra_value(const BertConfig& config, const char* key, T fallback) {
  const auto it = config.extra().find(key);
  if (it == config.extra().end()) return fallback;
  if constexpr (std::is_same_v<T, double>) return it->is_number() ? it->get<double>() : fallback;
  if constexpr (std::is_same_v<T, bool>) return it->is_boolean() ? it->get<bool>() : fallback;
  if constexpr (std::is_same_v<T, std::string>)
    return it->is_string() ? it->get<std::string>() : fallback;
}

}  // namespace

BertTaskModelImpl::BertTaskModelImpl(const BertConfig& config, HeadKind kind, int64_t outputs)
    : kind_(kind), family_(config.family()) {
  const bool sentence = kind == HeadKind::kPooled || kind == HeadKind::kChoices;
  const bool roberta = config.positions_after_padding();
  uses_pooler_ =
      sentence && (family_ == ModelFamily::kBert || (roberta && kind == HeadKind::kChoices));
  bert = register_module(family_base_prefix(family_), BertModel(config, uses_pooler_));
  const int64_t hidden = config.hidden_size();
  const int64_t n = kind == HeadKind::kChoices ? 1 : kind == HeadKind::kSpan ? 2 : outputs;
  TORCH_CHECK(n > 0, "task head needs at least one output, got ", n);
  const double classifier_p = config.classifier_dropout().value_or(config.hidden_dropout_prob());
  double p = classifier_p;

  std::shared_ptr<torch::nn::Module> holder;  // "classifier" / "sequence_summary" with children
  const bool distil = family_ == ModelFamily::kDistilBert;
  if (sentence && !uses_pooler_) {
    pre_ = torch::nn::Linear(hidden, hidden);
    if (distil) {
      pre_activation_ = Activation::kRelu;
      register_module("pre_classifier", pre_);
    } else if (kind == HeadKind::kPooled) {  // RoBERTa / ELECTRA classification head
      pre_tanh_ = roberta;
      holder = std::make_shared<torch::nn::Module>();
      holder->register_module("dense", pre_);
    } else {  // ELECTRA's SequenceSummary: first token, projection, GELU, last dropout
      const auto type = extra_value<std::string>(config, "summary_type", "first");
      const auto activation = extra_value<std::string>(config, "summary_activation", "gelu");
      if (type != "first" || activation != "gelu" ||
          !extra_value(config, "summary_use_proj", true) ||
          extra_value(config, "summary_proj_to_labels", false))
        throw ConfigError(
            "ELECTRA multiple choice: bertft implements the summary HF's ElectraConfig defaults "
            "give (summary_type \"first\", summary_use_proj true, summary_activation \"gelu\")");
      p = extra_value(config, "summary_last_dropout", 0.1);
      first_dropout_ = register_module(
          "first_dropout", bert::Dropout(extra_value(config, "summary_first_dropout", 0.0)));
      auto summary = register_module("sequence_summary", std::make_shared<torch::nn::Module>());
      summary->register_module("summary", pre_);
    }
  }
  if (roberta && kind == HeadKind::kChoices) p = config.hidden_dropout_prob();
  if (distil && kind == HeadKind::kTokens) p = config.hidden_dropout_prob();
  if (kind == HeadKind::kSpan) p = distil ? config.qa_dropout().value_or(0.1) : 0.0;
  if (kind != HeadKind::kSpan || distil) dropout_ = register_module("dropout", bert::Dropout(p));

  head_ = torch::nn::Linear(hidden, n);
  if (holder) {
    holder->register_module("out_proj", head_);
    register_module("classifier", holder);
  } else {
    register_module(kind == HeadKind::kSpan ? "qa_outputs" : "classifier", head_);
  }
  init_bert_weights(*head_, config.initializer_range());
  if (!pre_.is_empty()) init_bert_weights(*pre_, config.initializer_range());
}

namespace {

/// A head's projection, through oneDNN where bert::Linear would take it (a multithreaded BLAS
/// call in a oneDNN step leaves OpenBLAS's idle thread yielding on the other core).
torch::Tensor project(const torch::nn::Linear& linear, const torch::Tensor& x) {
  return fast_linear(x, linear->weight, linear->bias);
}

}  // namespace

torch::Tensor BertTaskModelImpl::sentence_vector(const BertModelOutput& out) {
  if (uses_pooler_) return dropout_(out.pooler_output);  // [rows, hidden]
  torch::Tensor x = out.last_hidden_state.select(1, 0);  // the first token, [rows, hidden]
  switch (family_) {
    case ModelFamily::kDistilBert:
      return dropout_(torch::relu(project(pre_, x)));
    case ModelFamily::kElectra:
      if (kind_ == HeadKind::kChoices)
        return dropout_(apply_activation(Activation::kGelu, project(pre_, first_dropout_(x))));
      [[fallthrough]];
    default: {
      x = project(pre_, dropout_(x));
      return dropout_(pre_tanh_ ? torch::tanh(x) : apply_activation(pre_activation_, x));
    }
  }
}

torch::Tensor BertTaskModelImpl::forward(const Batch& batch) {
  // A sentence head reads the first position alone: the last layer computes only that row.
  ForwardOptions first_token;
  first_token.first_token_only = true;
  switch (kind_) {
    case HeadKind::kPooled: {
      const auto out =
          bert->forward(batch.input_ids, batch.attention_mask, batch.token_type_ids, first_token);
      return project(head_, sentence_vector(out));  // [batch, labels]
    }
    case HeadKind::kChoices: {
      const int64_t b = batch.input_ids.size(0), c = batch.input_ids.size(1);
      const auto flat = [](const torch::Tensor& t) {
        return t.reshape({-1, t.size(-1)});
      };  // [b*c, seq]
      const auto out = bert->forward(flat(batch.input_ids), flat(batch.attention_mask),
                                     flat(batch.token_type_ids), first_token);
      return project(head_, sentence_vector(out)).view({b, c});  // [batch, choices]
    }
    case HeadKind::kTokens: {
      const auto out = bert->forward(batch.input_ids, batch.attention_mask, batch.token_type_ids);
      return project(head_, dropout_(out.last_hidden_state));  // [batch, seq, labels]
    }
    case HeadKind::kSpan: {
      const auto out = bert->forward(batch.input_ids, batch.attention_mask, batch.token_type_ids);
      const auto& hidden = out.last_hidden_state;
      return project(head_, dropout_.is_empty() ? hidden : dropout_(hidden));  // [batch, seq, 2]
    }
  }
  TORCH_INTERNAL_ASSERT(false, "unknown head kind");
}

}  // namespace bert::tasks
