#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "bert/model/bert_config.h"
#include "bert/tokenizer/tokenizer.h"
#include "tasks/task_adapter.h"

namespace bert::recipes {

/// How fill_mask runs the model.
struct FillMaskOptions {
  int64_t top_k = 5;  ///< candidates per mask token (at most the vocabulary)
  torch::Device device = torch::kCPU;
  bool bf16 = false;  ///< autocast the forward pass to bf16
  /// The model's NSP head was loaded (FinetunedModel::next_sentence_head): a pair then gets
  /// next-sentence prediction.
  bool next_sentence = true;
  std::string where = "--text";  ///< names the input in errors ("--text", "stdin line 3")
};

/// `bertft predict --text` with a pre-training model (tasks::PretrainingModelImpl: BERT's MLM +
/// NSP heads, the other families' MLM head), as HF's fill-mask pipeline: `text` (and `pair`)
/// encoded whole, then for each mask token in order the top_k tokens by probability (softmax
/// over the vocabulary at that position), each {"score", "token" (id), "token_str" (the token
/// decoded alone), "sequence" (the input with this token in place of the mask, decoded without
/// special tokens when there is one mask, with them when there are more, as the pipeline
/// does)}. Returns {"text", "text_pair" (when given), "masks": [[candidates of mask 1], ...]
/// (when there are masks), "next_sentence": {"label": "IsNext" | "NotNext", "score"} (with
/// `pair`, for a model with BERT's NSP head and options.next_sentence: whether `pair` follows
/// `text`)}. DataError naming
/// `options.where` for an input with neither a mask token nor (with an NSP head) a pair, one
/// longer than the model's positions, or a pair for a model without an NSP head and no mask.
nlohmann::json fill_mask(tasks::TaskModelImpl& model,
                         const tok::Tokenizer& tokenizer,
                         const BertConfig& config,
                         const std::string& text,
                         const std::optional<std::string>& pair,
                         const FillMaskOptions& options);

}  // namespace bert::recipes
