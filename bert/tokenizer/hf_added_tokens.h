#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "bert/tokenizer/added_tokens.h"

namespace bert::tok {

/// The "added_tokens" list of an HF tokenizer.json for a tokenizer's special strings (as
/// Tokenizer keeps them: string, id) and its `others` added tokens: one special, non-normalised
/// entry per special string (the one whose id is `lstrip_id`, RoBERTa's <mask>, also takes the
/// whitespace before it), the others as they are; by id.
nlohmann::json hf_added_tokens(const std::vector<std::pair<std::string, int64_t>>& specials,
                               int64_t lstrip_id = -1,
                               const std::vector<AddedToken>& others = {});

}  // namespace bert::tok
