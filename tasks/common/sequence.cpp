#include "tasks/common/sequence.h"

#include <fmt/format.h>

#include "bert/common/error.h"

namespace bert {
const std::vector<std::pair<const char*, tok::Truncation>>& EnumNames<tok::Truncation>::get() {
  static const std::vector<std::pair<const char*, tok::Truncation>> names = {
      {"longest_first", tok::Truncation::kLongestFirst},
      {"only_first", tok::Truncation::kOnlyFirst},
      {"only_second", tok::Truncation::kOnlySecond}};
  return names;
}
}  // namespace bert

namespace bert::tasks {

void check_max_seq_length(const YamlReader& reader,
                          int64_t value,
                          ErrorList& errors,
                          int64_t minimum) {
  if (value < minimum || value > kMaxSeqLength)
    errors.add(fmt::format("{}: must be in [{}, {}], got {}", reader.where("max_seq_length"),
                           minimum, kMaxSeqLength, value));
}

std::vector<int64_t> piece_ids(const std::vector<tok::Piece>& pieces) {
  std::vector<int64_t> ids;
  ids.reserve(pieces.size());
  for (const auto& p : pieces) ids.push_back(p.id);
  return ids;
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> bert_sequence(const tok::Tokenizer& tokenizer,
                                                                    const std::vector<int64_t>& a,
                                                                    const std::vector<int64_t>* b) {
  const auto& special = tokenizer.special_tokens();
  if (special.cls_id < 0 || special.sep_id < 0)
    throw TokenizerError("the vocabulary has no " + special.cls + " / " + special.sep + " token");
  std::vector<int64_t> ids, types;
  ids.reserve(a.size() + (b ? b->size() : 0) + 4);
  ids.push_back(special.cls_id);
  ids.insert(ids.end(), a.begin(), a.end());
  ids.push_back(special.sep_id);
  types.assign(ids.size(), 0);
  if (b) {
    if (tokenizer.roberta_template()) ids.push_back(special.sep_id);
    ids.insert(ids.end(), b->begin(), b->end());
    ids.push_back(special.sep_id);
    types.resize(ids.size(), tokenizer.roberta_template() ? 0 : 1);
  }
  return {std::move(ids), std::move(types)};
}

}  // namespace bert::tasks
