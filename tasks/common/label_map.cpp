#include "tasks/common/label_map.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "bert/common/error.h"

namespace bert::tasks {
namespace {

bool is_integer(const std::string& s) {
  if (s.empty()) return false;
  const size_t start = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  return start < s.size() && s.find_first_not_of("0123456789", start) == std::string::npos;
}

}  // namespace

LabelMap::LabelMap(std::vector<std::string> names) : names_(std::move(names)) {
  for (size_t i = 0; i < names_.size(); ++i) {
    if (!ids_.emplace(names_[i], static_cast<int64_t>(i)).second)
      throw ConfigError(fmt::format("label '{}' is listed twice", names_[i]));
  }
}

LabelMap LabelMap::from_observed(const std::vector<std::string>& labels) {
  const std::set<std::string> distinct(labels.begin(), labels.end());
  std::vector<std::string> names(distinct.begin(), distinct.end());
  if (std::all_of(names.begin(), names.end(), is_integer)) {
    std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
      return std::stoll(a) < std::stoll(b);
    });
  }
  return LabelMap(std::move(names));
}

std::optional<std::string> LabelMap::name_of_id(const std::string& tag) const {
  if (tag.empty() || tag.size() > 9 || tag.find_first_not_of("0123456789") != std::string::npos ||
      ids_.count(tag) || std::all_of(names_.begin(), names_.end(), is_integer))
    return std::nullopt;
  const auto id = std::stoll(tag);
  if (id >= size()) return std::nullopt;
  return name(id);
}

std::optional<int64_t> LabelMap::find(const std::string& label) const {
  const auto it = ids_.find(label);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

int64_t LabelMap::id(const std::string& label, const std::string& where) const {
  if (const auto i = find(label)) return *i;
  throw DataError(
      fmt::format("{}: label '{}' was not seen in training (labels: {})", where, label, joined()));
}

std::string LabelMap::joined() const {
  std::string out;
  for (const auto& n : names_) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace bert::tasks
