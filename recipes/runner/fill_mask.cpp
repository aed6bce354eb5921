#include "recipes/runner/fill_mask.h"

#include <fmt/format.h>

#include <algorithm>

#include "bert/common/error.h"
#include "tasks/pretraining/adapter.h"
#include "tasks/training/precision.h"

namespace bert::recipes {

using json = nlohmann::json;

json fill_mask(tasks::TaskModelImpl& model,
               const tok::Tokenizer& tokenizer,
               const BertConfig& config,
               const std::string& text,
               const std::optional<std::string>& pair,
               const FillMaskOptions& o) {
  auto* pretraining = dynamic_cast<tasks::PretrainingModelImpl*>(&model);
  if (pretraining == nullptr)
    throw ConfigError("fill_mask: the model has no masked-language-model head");
  const bool nsp = !pretraining->lm_head.has_value() && o.next_sentence;  // BERT's MLM + NSP
  const auto& special = tokenizer.special_tokens();
  if (special.mask_id < 0)
    throw ConfigError(fmt::format("the model's tokenizer has no mask token ('{}')", special.mask));
  const auto encoding =
      tokenizer.encode(text, pair ? std::optional<std::string_view>(*pair) : std::nullopt);
  const auto length = static_cast<int64_t>(encoding.ids.size());
  if (length > config.max_sequence_length())
    throw DataError(fmt::format("{}: {} tokens; the model takes at most {}", o.where, length,
                                config.max_sequence_length()));
  std::vector<int64_t> masked;
  for (int64_t i = 0; i < length; ++i)
    if (encoding.ids[static_cast<size_t>(i)] == special.mask_id) masked.push_back(i);
  const bool next_sentence = pair.has_value() && nsp;
  if (masked.empty() && !next_sentence) {
    const bool bert = !pretraining->lm_head.has_value();
    throw DataError(fmt::format(
        "{}: no {} token to fill{}", o.where, special.mask,
        pair && bert   ? " (and the model has no next-sentence head for the pair)"
        : !pair && nsp ? " (and no second text, --text-pair or a tab, for next-sentence "
                         "prediction)"
                       : ""));
  }

  tasks::Batch batch;
  const auto row = [](const std::vector<int64_t>& v) { return torch::tensor(v).unsqueeze(0); };
  batch.input_ids = row(encoding.ids);
  batch.attention_mask = torch::ones_like(batch.input_ids);
  batch.token_type_ids = row(encoding.type_ids);
  batch.masked_positions = torch::zeros({static_cast<int64_t>(masked.size()), 2}, torch::kLong);
  if (!masked.empty()) batch.masked_positions.select(1, 1).copy_(torch::tensor(masked));
  batch.feature_indices = {0};
  batch.lengths = {length};
  torch::Tensor out;
  {
    c10::InferenceMode inference;
    const tasks::AutocastScope autocast(o.bf16 ? tasks::Precision::kBf16 : tasks::Precision::kFp32,
                                        o.device);
    out = model.forward(batch.to(o.device)).to(torch::kCPU, torch::kFloat32);
  }

  json result = {{"text", text}};
  if (pair) result["text_pair"] = *pair;
  const auto masks = static_cast<int64_t>(masked.size());
  if (masks > 0) {
    const int64_t k = std::min<int64_t>(o.top_k, out.size(1));
    const auto [scores, tokens] = out.slice(0, 0, masks).softmax(-1).topk(k, -1);
    json all = json::array();
    for (int64_t m = 0; m < masks; ++m) {
      json candidates = json::array();
      for (int64_t j = 0; j < k; ++j) {
        // An id past the tokenizer's vocabulary (an embedding padded beyond it) reads as the
        // unknown token, as HF's tokenizers read it.
        const int64_t id = tokens[m][j].item<int64_t>();
        const int64_t shown = id < tokenizer.vocab_size() ? id : special.unk_id;
        std::vector<int64_t> ids;
        for (int64_t i = 0; i < length; ++i) {
          const int64_t t =
              i == masked[static_cast<size_t>(m)] ? shown : encoding.ids[static_cast<size_t>(i)];
          if (t != special.pad_id) ids.push_back(t);  // the pipeline drops padding
        }
        candidates.push_back(
            {{"score", scores[m][j].item<double>()},
             {"token", id},
             {"token_str", tokenizer.decode({shown})},
             {"sequence", tokenizer.decode(ids, /*skip_special_tokens=*/masks == 1)}});
      }
      all.push_back(std::move(candidates));
    }
    result["masks"] = std::move(all);
  }
  if (next_sentence) {
    // BERT's NSP logits follow the masked rows, in columns 0 (IsNext) and 1 (NotNext).
    const auto p = out[masks].slice(0, 0, 2).softmax(-1);
    const bool is_next = p[0].item<double>() >= p[1].item<double>();
    result["next_sentence"] = {{"label", is_next ? "IsNext" : "NotNext"},
                               {"score", p[is_next ? 0 : 1].item<double>()}};
  }
  return result;
}

}  // namespace bert::recipes
