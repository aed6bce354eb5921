#include "bert/tokenizer/encoding.h"

namespace bert::tok {

int64_t Encoding::char_to_token(int64_t char_index, int sequence) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (sequence_ids[i] == sequence && offsets[i].first <= char_index &&
        char_index < offsets[i].second)
      return static_cast<int64_t>(i);
  }
  return -1;
}

nlohmann::json to_json(const Encoding& e) {
  nlohmann::json offsets = nlohmann::json::array();
  for (const auto& [b, end] : e.offsets) offsets.push_back({b, end});
  return {{"ids", e.ids},
          {"tokens", e.tokens},
          {"offsets", offsets},
          {"token_type_ids", e.type_ids},
          {"attention_mask", e.attention_mask}};
}

}  // namespace bert::tok
