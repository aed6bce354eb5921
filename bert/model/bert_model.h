#pragma once

#include <torch/torch.h>

#include "bert/model/bert_config.h"
#include "bert/model/embeddings.h"
#include "bert/model/encoder.h"

namespace bert {

/// Turns a [batch, seq] 0/1 attention mask into the additive mask [batch, 1, 1, seq] that
/// self-attention adds to its scores: 0 where attended, the lowest float of `dtype` where masked
/// (HF's convention, so padded rows match HF bit for bit).
torch::Tensor additive_attention_mask(const torch::Tensor& attention_mask, torch::ScalarType dtype);

/// The BERT encoder: embeddings -> (ELECTRA's embeddings_project) -> encoder -> optional
/// pooler. Parameter names are exactly the keys of an HF `BertModel` state dict
/// (`embeddings.word_embeddings.weight`, `encoder.layer.0.attention.self.query.weight`,
/// `pooler.dense.weight`, ...); RoBERTa's and ELECTRA's are the same, DistilBERT's are mapped
/// by hf_key_names (bert/checkpoint/family_keys.h).
class BertModelImpl : public torch::nn::Module {
 public:
  explicit BertModelImpl(const BertConfig& config, bool add_pooling_layer = true);

  /// input_ids [batch, seq] int64; attention_mask [batch, seq] (1 = token, 0 = padding) or
  /// undefined (all 1); token_type_ids [batch, seq] or undefined (all 0).
  BertModelOutput forward(const torch::Tensor& input_ids,
                          const torch::Tensor& attention_mask = {},
                          const torch::Tensor& token_type_ids = {},
                          const ForwardOptions& options = {});

  const BertConfig& config() const { return config_; }
  bool has_pooler() const { return !pooler.is_empty(); }

  BertEmbeddings embeddings{nullptr};
  torch::nn::Linear embeddings_project{nullptr};  ///< only when embedding_dim != hidden_size
  BertEncoder encoder{nullptr};
  BertPooler pooler{nullptr};

 private:
  BertConfig config_;
};
TORCH_MODULE(BertModel);

}  // namespace bert
