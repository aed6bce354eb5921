#include "recipes/runner/fill_mask.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "bert/common/error.h"
#include "bert/common/log.h"
#include "tasks/pretraining/adapter.h"
#include "tasks/training/precision.h"

namespace bert::recipes {

using json = nlohmann::json;

namespace {

/// One input, encoded and checked: its ids, type ids and mask positions.
struct Encoded {
  std::vector<int64_t> ids, type_ids, masked;
  bool next_sentence = false;  ///< a pair, and the model has the NSP head
};

/// The candidates for one mask: `probabilities` over the vocabulary at that position.
json candidates(const torch::Tensor& probabilities,
                const Encoded& input,
                int64_t mask,
                const tok::Tokenizer& tokenizer,
                const FillMaskOptions& o) {
  const auto& special = tokenizer.special_tokens();
  torch::Tensor scores, tokens;
  if (o.targets.empty()) {
    std::tie(scores, tokens) =
        probabilities.topk(std::min<int64_t>(o.top_k, probabilities.size(0)));
  } else {  // the targets' probabilities under the whole vocabulary's softmax
    const auto ids = torch::tensor(o.targets);
    torch::Tensor picked;
    std::tie(scores, picked) = probabilities.index_select(0, ids).topk(
        std::min<int64_t>(o.top_k, static_cast<int64_t>(o.targets.size())));
    tokens = ids.index_select(0, picked);
  }
  const int64_t masks = static_cast<int64_t>(input.masked.size());
  json out = json::array();
  for (int64_t j = 0; j < scores.size(0); ++j) {
    // An id past the tokenizer's vocabulary (an embedding padded beyond it) reads as the
    // unknown token, as HF's tokenizers read it.
    const int64_t id = tokens[j].item<int64_t>();
    const int64_t shown = id < tokenizer.vocab_size() ? id : special.unk_id;
    std::vector<int64_t> ids;
    for (size_t i = 0; i < input.ids.size(); ++i) {
      const int64_t t =
          static_cast<int64_t>(i) == input.masked[static_cast<size_t>(mask)] ? shown : input.ids[i];
      if (t != special.pad_id) ids.push_back(t);  // the pipeline drops padding
    }
    out.push_back({{"score", scores[j].item<double>()},
                   {"token", id},
                   {"token_str", tokenizer.decode({shown})},
                   {"sequence", tokenizer.decode(ids, /*skip_special_tokens=*/masks == 1)}});
  }
  return out;
}

}  // namespace

std::vector<int64_t> fill_mask_targets(const tok::Tokenizer& tokenizer,
                                       const std::vector<std::string>& targets,
                                       const std::string& option) {
  std::set<int64_t> ids;
  for (const auto& target : targets) {
    int64_t id = tokenizer.token_to_id(target);
    if (id < 0) {
      const auto pieces = tokenizer.tokenize(target);
      if (pieces.empty()) {
        log::warn("{} '{}': not in the vocabulary and no token when tokenized; ignored", option,
                  target);
        continue;
      }
      id = pieces.front().id;
      log::warn("{} '{}': not in the vocabulary; its first token '{}' stands for it", option,
                target, tokenizer.id_to_token(id));
    }
    ids.insert(id);
  }
  if (ids.empty())
    throw ConfigError(fmt::format("{}: no target is a token of the vocabulary or has one", option));
  return {ids.begin(), ids.end()};
}

std::vector<json> fill_mask(tasks::TaskModelImpl& model,
                            const tok::Tokenizer& tokenizer,
                            const BertConfig& config,
                            const std::vector<FillMaskInput>& inputs,
                            const FillMaskOptions& o) {
  auto* pretraining = dynamic_cast<tasks::PretrainingModelImpl*>(&model);
  if (pretraining == nullptr)
    throw ConfigError("fill_mask: the model has no masked-language-model head");
  const bool bert = !pretraining->lm_head.has_value();
  const bool nsp = bert && o.next_sentence;  // BERT's MLM + NSP
  const auto& special = tokenizer.special_tokens();
  if (special.mask_id < 0)
    throw ConfigError(fmt::format("the model's tokenizer has no mask token ('{}')", special.mask));
  for (const auto id : o.targets)
    if (id < 0 || id >= config.vocab_size())
      throw ConfigError(fmt::format("--targets: token id {} is outside the model's {} embeddings",
                                    id, config.vocab_size()));

  // Every input encoded and checked before any runs.
  std::vector<Encoded> encoded;
  encoded.reserve(inputs.size());
  for (const auto& input : inputs) {
    const auto& pair = input.pair;
    const auto encoding =
        tokenizer.encode(input.text, pair ? std::optional<std::string_view>(*pair) : std::nullopt);
    Encoded e{encoding.ids, encoding.type_ids, {}, pair.has_value() && nsp};
    const auto length = static_cast<int64_t>(e.ids.size());
    if (length > config.max_sequence_length())
      throw DataError(fmt::format("{}: {} tokens; the model takes at most {}", input.where, length,
                                  config.max_sequence_length()));
    for (int64_t i = 0; i < length; ++i)
      if (e.ids[static_cast<size_t>(i)] == special.mask_id) e.masked.push_back(i);
    if (e.masked.empty() && !e.next_sentence)
      throw DataError(fmt::format(
          "{}: no {} token to fill{}", input.where, special.mask,
          pair && bert   ? " (and the model has no next-sentence head for the pair)"
          : !pair && nsp ? " (and no second text, --text-pair or a tab, for next-sentence "
                           "prediction)"
                         : ""));
    encoded.push_back(std::move(e));
  }

  std::vector<json> results;
  results.reserve(inputs.size());
  const auto batch_size = static_cast<size_t>(std::max<int64_t>(o.batch_size, 1));
  for (size_t first = 0; first < encoded.size(); first += batch_size) {
    const size_t rows = std::min(batch_size, encoded.size() - first);
    size_t longest = 0;
    for (size_t r = 0; r < rows; ++r) longest = std::max(longest, encoded[first + r].ids.size());
    const auto n = static_cast<int64_t>(rows), width = static_cast<int64_t>(longest);
    tasks::Batch batch;
    batch.input_ids = torch::full({n, width}, std::max<int64_t>(special.pad_id, 0), torch::kLong);
    batch.attention_mask = torch::zeros({n, width}, torch::kLong);
    batch.token_type_ids = torch::zeros({n, width}, torch::kLong);
    std::vector<int64_t> positions;  // (row, position) of each mask, row by row
    for (int64_t r = 0; r < n; ++r) {
      const auto& e = encoded[first + static_cast<size_t>(r)];
      const auto length = static_cast<int64_t>(e.ids.size());
      batch.input_ids[r].narrow(0, 0, length).copy_(torch::tensor(e.ids));
      batch.token_type_ids[r].narrow(0, 0, length).copy_(torch::tensor(e.type_ids));
      batch.attention_mask[r].narrow(0, 0, length).fill_(1);
      for (const auto p : e.masked) positions.insert(positions.end(), {r, p});
      batch.feature_indices.push_back(static_cast<int64_t>(first) + r);
      batch.lengths.push_back(length);
    }
    const auto masks = static_cast<int64_t>(positions.size() / 2);
    batch.masked_positions =
        masks > 0 ? torch::tensor(positions).view({masks, 2}) : torch::zeros({0, 2}, torch::kLong);
    tasks::select_last_layer_rows(batch);  // the last layer: [CLS] and the masks alone
    torch::Tensor out;
    {
      c10::InferenceMode inference;
      const tasks::AutocastScope autocast(
          o.bf16 ? tasks::Precision::kBf16 : tasks::Precision::kFp32, o.device);
      out = model.forward(batch.to(o.device)).to(torch::kCPU, torch::kFloat32);
    }
    const auto probabilities = out.slice(0, 0, masks).softmax(-1);  // [masks, vocabulary]

    int64_t mask_row = 0;
    for (int64_t r = 0; r < n; ++r) {
      const auto& input = inputs[first + static_cast<size_t>(r)];
      const auto& e = encoded[first + static_cast<size_t>(r)];
      json result = {{"text", input.text}};
      if (input.pair) result["text_pair"] = *input.pair;
      if (!e.masked.empty()) {
        json all = json::array();
        for (int64_t m = 0; m < static_cast<int64_t>(e.masked.size()); ++m)
          all.push_back(candidates(probabilities[mask_row++], e, m, tokenizer, o));
        result["masks"] = std::move(all);
      }
      if (e.next_sentence) {
        // BERT's NSP logits follow the masked rows, a row per input, in columns 0 (IsNext)
        // and 1 (NotNext).
        const auto p = out[masks + r].slice(0, 0, 2).softmax(-1);
        const bool is_next = p[0].item<double>() >= p[1].item<double>();
        result["next_sentence"] = {{"label", is_next ? "IsNext" : "NotNext"},
                                   {"score", p[is_next ? 0 : 1].item<double>()}};
      }
      results.push_back(std::move(result));
    }
  }
  return results;
}

}  // namespace bert::recipes
