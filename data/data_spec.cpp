#include "data/data_spec.h"

#include <fmt/format.h>

#include <algorithm>

#include "bert/common/error.h"
#include "data/table.h"

namespace bert {
const std::vector<std::pair<const char*, data::DataFormat>>& EnumNames<data::DataFormat>::get() {
  using F = data::DataFormat;
  static const std::vector<std::pair<const char*, F>> names = {
      {"auto", F::kAuto},   {"glue", F::kGlue},   {"tsv", F::kTsv},     {"csv", F::kCsv},
      {"jsonl", F::kJsonl}, {"squad", F::kSquad}, {"conll", F::kConll}, {"swag", F::kSwag}};
  return names;
}
}  // namespace bert

namespace bert::data {

int resolve_column(const DataSpec& spec,
                   const Table& table,
                   const std::string& role,
                   const std::vector<std::string>& defaults) {
  const auto it = spec.columns.find(role);
  if (it != spec.columns.end()) return table.column(it->second, /*required=*/true);
  for (const auto& name : defaults) {
    const int c = table.column(name, /*required=*/false);
    if (c >= 0) return c;
  }
  return -1;
}

void check_column_roles(const DataSpec& spec, const std::vector<std::string>& roles) {
  std::vector<std::string> problems;
  for (const auto& [role, column] : spec.columns) {
    if (std::find(roles.begin(), roles.end(), role) != roles.end()) continue;
    std::string valid;
    for (const auto& r : roles) valid += (valid.empty() ? "" : ", ") + r;
    problems.push_back(
        fmt::format("{}: columns: unknown role '{}' (valid: {})", spec.path.string(), role, valid));
  }
  if (!problems.empty()) throw ConfigError(problems);
}

}  // namespace bert::data
