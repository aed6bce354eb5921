#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bert/model/bert_config.h"
#include "bert/tokenizer/tokenizer.h"
#include "tasks/task_adapter.h"

namespace bert::recipes {

/// How fill_mask runs the model.
struct FillMaskOptions {
  int64_t top_k = 5;  ///< candidates per mask token (at most the vocabulary, or the targets)
  /// Token ids the candidates are restricted to (fill_mask_targets), as the pipeline's
  /// `targets`: their probabilities under the softmax over the whole vocabulary. Empty: all.
  std::vector<int64_t> targets;
  int64_t batch_size = 64;  ///< texts per forward pass (padded to the batch's longest)
  torch::Device device = torch::kCPU;
  bool bf16 = false;  ///< autocast the forward pass to bf16
  /// The model's NSP head was loaded (FinetunedModel::next_sentence_head): a pair then gets
  /// next-sentence prediction.
  bool next_sentence = true;
};

/// One input of fill_mask: a text, maybe a second one (a pair), and its name in errors
/// ("--text", "stdin line 3").
struct FillMaskInput {
  std::string text;
  std::optional<std::string> pair;
  std::string where = "--text";
};

/// `bertft predict --text` with a pre-training model (tasks::PretrainingModelImpl: BERT's MLM +
/// NSP heads, the other families' MLM head), as HF's fill-mask pipeline: each text (and pair)
/// encoded whole, then for each mask token in order the top_k tokens by probability (softmax
/// over the vocabulary at that position), each {"score", "token" (id), "token_str" (the token
/// decoded alone), "sequence" (the input with this token in place of the mask, decoded without
/// special tokens when there is one mask, with them when there are more, as the pipeline
/// does)}. Returns per input, in order, {"text", "text_pair" (when given), "masks":
/// [[candidates of mask 1], ...] (when there are masks), "next_sentence": {"label": "IsNext" |
/// "NotNext", "score"} (with a pair, for a model with BERT's NSP head and
/// options.next_sentence: whether the pair's second text follows the first)}. The inputs run
/// options.batch_size at a time, each answer as the input's alone would be (padding is masked).
/// Every input is checked before any runs: DataError naming its `where` for one with neither a
/// mask token nor (with an NSP head) a pair, one longer than the model's positions, or a pair
/// for a model without an NSP head and no mask.
std::vector<nlohmann::json> fill_mask(tasks::TaskModelImpl& model,
                                      const tok::Tokenizer& tokenizer,
                                      const BertConfig& config,
                                      const std::vector<FillMaskInput>& inputs,
                                      const FillMaskOptions& options);

/// The token ids of the pipeline's `targets`: a target that is a token of the vocabulary (added
/// tokens included) is its id; another is tokenized without special tokens and its first piece
/// taken (a warning names the replacement), or ignored with a warning when it has none.
/// Duplicates count once. ConfigError naming `option` when no target is left.
std::vector<int64_t> fill_mask_targets(const tok::Tokenizer& tokenizer,
                                       const std::vector<std::string>& targets,
                                       const std::string& option);

}  // namespace bert::recipes
