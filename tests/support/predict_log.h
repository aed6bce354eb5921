// What `bertft predict` logs beside its predictions, read back by the command-line tests.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace bert::testing {

/// The metrics `predict --data` logged for a file with gold labels ("gold labels found: {...}")
/// in `output`; an empty object, and a test failure, where it logged none.
inline nlohmann::json gold_metrics(const std::string& output) {
  constexpr std::string_view kFound = "gold labels found: ";
  const auto found = output.find(kFound);
  EXPECT_NE(found, std::string::npos) << output;
  if (found == std::string::npos) return nlohmann::json::object();
  const auto line = output.substr(found + kFound.size());
  return nlohmann::json::parse(line.substr(0, line.find('\n')));
}

}  // namespace bert::testing
