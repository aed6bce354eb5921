#include "bert/common/json_util.h"

#include <fmt/format.h>

#include <string>

#include "bert/common/error.h"

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
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::out_of_range& e) {
    // A number beyond a double's range ("1e999") is out_of_range, not a parse error; the
    // callers turn parse errors into messages naming the file, so it becomes one (no byte:
    // nlohmann gives none for it).
    throw nlohmann::json::parse_error::create(101, 0, clip(e.what()), nullptr);
  }
}

}  // namespace bert
