#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace bert::tok {

/// A sub-word piece of one input text, before special tokens are added.
struct Piece {
  int64_t id = 0;
  std::string token;
  uint32_t begin = 0;  ///< byte span in the input text
  uint32_t end = 0;
  int32_t word = -1;  ///< index of the pre-tokenized word it belongs to
};

/// The model input for one text or text pair, HF `Encoding`-like. All vectors have one entry
/// per token. Special and padding tokens have offsets (0, 0), word id -1 and sequence id -1.
struct Encoding {
  std::vector<int64_t> ids;
  std::vector<std::string> tokens;
  std::vector<int64_t> type_ids;             ///< segment ids: 0 for [CLS] A [SEP], 1 for B [SEP]
  std::vector<int64_t> attention_mask;       ///< 1 for tokens, 0 for padding
  std::vector<int64_t> special_tokens_mask;  ///< 1 for [CLS]/[SEP]/padding
  /// Character (Unicode code point) span in the original text of the token's sequence, as
  /// HF's Python `offset_mapping` gives it.
  std::vector<std::pair<int64_t, int64_t>> offsets;
  std::vector<std::pair<int64_t, int64_t>> byte_offsets;  ///< the same span in UTF-8 bytes
  std::vector<int64_t> word_ids;
  std::vector<int64_t> sequence_ids;  ///< 0 for the first text, 1 for the pair, -1 special
  int64_t num_truncated = 0;          ///< pieces dropped by truncation (both texts)

  size_t size() const { return ids.size(); }
};

/// {"ids", "tokens", "offsets", "token_type_ids", "attention_mask"} for `bertft tokenize`.
nlohmann::json to_json(const Encoding& encoding);

}  // namespace bert::tok
