#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bert/common/yaml.h"
#include "bert/tokenizer/tokenizer.h"

namespace bert::tasks {

/// The bounds of every task's max_seq_length: room for [CLS], [SEP] and a few tokens at
/// least, and at most what instance shards can store (16-bit lengths). A task may ask for more
/// room (question answering: the question and the context).
inline constexpr int64_t kMinSeqLength = 8;
inline constexpr int64_t kMaxSeqLength = 65535;

/// Adds "where: max_seq_length must be in [minimum, kMaxSeqLength], got N" to `errors` when
/// `value` is out of bounds (`reader` locates the key).
void check_max_seq_length(const YamlReader& reader,
                          int64_t value,
                          ErrorList& errors,
                          int64_t minimum = kMinSeqLength);

/// Ids of pieces.
std::vector<int64_t> piece_ids(const std::vector<tok::Piece>& pieces);

/// `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]` with segment ids 0 for the first part and 1 for
/// b and its [SEP] (BERT's input layout); RoBERTa's `<s> a </s></s> b </s>`, all type 0, for a
/// tokenizer with roberta_template(). Throws TokenizerError if the vocabulary lacks [CLS]
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
