#include "bert/common/error.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <utility>

namespace bert {
namespace {
std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) {
    if (!out.empty()) out += '\n';
    out += line;
  }
  return out;
}
}  // namespace

ConfigError::ConfigError(std::string problem) : Error(problem), problems_{std::move(problem)} {}

ConfigError::ConfigError(std::vector<std::string> problems)
    : Error(join_lines(problems)), problems_(std::move(problems)) {}

std::string message_of(const std::exception& e) {
  if (const auto* torch_error = dynamic_cast<const c10::Error*>(&e))
    return torch_error->what_without_backtrace();
  return e.what();
}

std::string clip(std::string_view text, size_t limit) {
  if (text.size() <= limit) return std::string(text);
  size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return fmt::format("{}... ({} bytes)", text.substr(0, cut), text.size());
}

}  // namespace bert
