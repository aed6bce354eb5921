#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace bert::tasks {

/// Label names <-> ids. The order is stable: an explicit list (recipe / checkpoint / GLUE's
/// official order) or the training labels sorted (numerically when all are integers).
class LabelMap {
 public:
  LabelMap() = default;
  explicit LabelMap(std::vector<std::string> names);
  /// Sorted distinct labels (numeric order if every label is an integer, else byte order).
  static LabelMap from_observed(const std::vector<std::string>& labels);

  bool empty() const { return names_.empty(); }
  int64_t size() const { return static_cast<int64_t>(names_.size()); }
  const std::vector<std::string>& names() const { return names_; }
  const std::string& name(int64_t id) const { return names_.at(static_cast<size_t>(id)); }
  std::optional<int64_t> find(const std::string& label) const;
  /// The id of `label`; DataError "<where>: label 'x' was not seen in training (labels: ...)".
  int64_t id(const std::string& label, const std::string& where) const;
  /// "a, b, c" for messages.
  std::string joined() const;
  /// The label whose id `tag` is, where `tag` is the decimal text of an id (HF datasets write a
  /// ClassLabel column's ids) and the labels are names, not integers themselves (those were
  /// taken from integer tags and are matched as they are): nullopt otherwise, an id out of
  /// range included (id() then names it as an unknown label).
  std::optional<std::string> name_of_id(const std::string& tag) const;

 private:
  std::vector<std::string> names_;
  std::unordered_map<std::string, int64_t> ids_;
};

}  // namespace bert::tasks
