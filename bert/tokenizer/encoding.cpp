#include "bert/tokenizer/encoding.h"

namespace bert::tok {

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
