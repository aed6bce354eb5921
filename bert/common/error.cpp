#include "bert/common/error.h"

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

}  // namespace bert
