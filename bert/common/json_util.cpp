#include "bert/common/json_util.h"

#include <fmt/format.h>

#include <string>

namespace bert {

size_t json_depth_violation(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character, whatever it is
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if (c == ']' || c == '}') {
      if (depth > 0) --depth;
    }
  }
  return std::string_view::npos;
}

nlohmann::json parse_json_limited(std::string_view text) {
  const size_t at = json_depth_violation(text, kMaxJsonDepth);
  if (at != std::string_view::npos)
    throw nlohmann::json::parse_error::create(
        101, at + 1, fmt::format("nested deeper than {} levels", kMaxJsonDepth), nullptr);
  return nlohmann::json::parse(text);
}

}  // namespace bert
