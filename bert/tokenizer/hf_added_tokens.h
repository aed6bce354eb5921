#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace bert::tok {

/// The "added_tokens" list of an HF tokenizer.json for a tokenizer's special strings (as
/// Tokenizer keeps them: string, id): one special, non-normalised entry per string, by id;
/// the string whose id is `lstrip_id` (RoBERTa's <mask>) also takes the whitespace before it.
nlohmann::json hf_added_tokens(const std::vector<std::pair<std::string, int64_t>>& specials,
                               int64_t lstrip_id = -1);

}  // namespace bert::tok
