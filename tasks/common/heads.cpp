#include "tasks/common/heads.h"

#include "bert/model/init.h"

namespace bert::tasks {

BertTaskModelImpl::BertTaskModelImpl(const BertConfig& config, HeadKind kind, int64_t outputs)
    : kind_(kind) {
  const bool pooler = kind == HeadKind::kPooled || kind == HeadKind::kChoices;
  bert = register_module("bert", BertModel(config, pooler));
  const double p = config.classifier_dropout().value_or(config.hidden_dropout_prob());
  const int64_t n = kind == HeadKind::kChoices ? 1 : kind == HeadKind::kSpan ? 2 : outputs;
  TORCH_CHECK(n > 0, "task head needs at least one output, got ", n);
  if (kind != HeadKind::kSpan) dropout = register_module("dropout", bert::Dropout(p));
  head = register_module(head_name(), torch::nn::Linear(config.hidden_size(), n));
  init_bert_weights(*head, config.initializer_range());
}

torch::Tensor BertTaskModelImpl::forward(const Batch& batch) {
  switch (kind_) {
    case HeadKind::kPooled: {
      const auto out = bert->forward(batch.input_ids, batch.attention_mask, batch.token_type_ids);
      return head->forward(dropout->forward(out.pooler_output));  // [batch, labels]
    }
    case HeadKind::kChoices: {
      const int64_t b = batch.input_ids.size(0), c = batch.input_ids.size(1);
      const auto flat = [](const torch::Tensor& t) {
        return t.reshape({-1, t.size(-1)});
      };  // [b*c, seq]
      const auto out = bert->forward(flat(batch.input_ids), flat(batch.attention_mask),
                                     flat(batch.token_type_ids));
      return head->forward(dropout->forward(out.pooler_output)).view({b, c});  // [batch, choices]
    }
    case HeadKind::kTokens: {
      const auto out = bert->forward(batch.input_ids, batch.attention_mask, batch.token_type_ids);
      return head->forward(dropout->forward(out.last_hidden_state));  // [batch, seq, labels]
    }
    case HeadKind::kSpan: {
      const auto out = bert->forward(batch.input_ids, batch.attention_mask, batch.token_type_ids);
      return head->forward(out.last_hidden_state);  // [batch, seq, 2]
    }
  }
  TORCH_INTERNAL_ASSERT(false, "unknown head kind");
}

}  // namespace bert::tasks
