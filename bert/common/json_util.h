#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string_view>

namespace bert {

/// The deepest nesting of arrays and objects accepted from a file: far above any real
/// config, index, header or data cell, and far below what dump(), copies and comparisons
/// (which recurse) can take on the stack.
constexpr int kMaxJsonDepth = 128;

/// nlohmann::json::parse for bytes from outside: input nested deeper than kMaxJsonDepth is a
/// json::parse_error (id 101, with the byte where the limit was crossed) like any other
/// syntax error, before anything is built; so is a number beyond a double's range.
nlohmann::json parse_json_limited(std::string_view text);

/// The byte offset where `text` (JSON) first nests deeper than `max_depth`, or npos. Strings
/// and their escapes are skipped; the text need not be valid JSON.
size_t json_depth_violation(std::string_view text, int max_depth);

}  // namespace bert
