#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bert/common/yaml.h"
#include "bert/tokenizer/tokenizer.h"

namespace bert::tasks {

/// Ids of pieces.
std::vector<int64_t> piece_ids(const std::vector<tok::Piece>& pieces);

/// `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]` with segment ids 0 for the first part and 1 for
/// b and its [SEP] (BERT's input layout). Throws TokenizerError if the vocabulary lacks [CLS]
/// or [SEP].
std::pair<std::vector<int64_t>, std::vector<int64_t>> bert_sequence(
    const tok::Tokenizer& tokenizer,
    const std::vector<int64_t>& a,
    const std::vector<int64_t>* b = nullptr);

}  // namespace bert::tasks

namespace bert {
template <>
struct EnumNames<tok::Truncation> {
  static const std::vector<std::pair<const char*, tok::Truncation>>& get();
};
}  // namespace bert
