#include "bert/common/yaml.h"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/strings.h"

namespace bert {
namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::string scalar_text(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar();
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "null";
}

std::string location(const std::string& file, const YAML::Mark& mark) {
  if (mark.is_null()) return file;
  return fmt::format("{}:{}:{}", file, mark.line + 1, mark.column + 1);
}

/// Refuses a mapping that repeats a key, reading the parser's events (so aliases are not
/// expanded): yaml-cpp keeps both pairs and a lookup finds one, so the other value, often the
/// one the user meant, would be ignored without a word.
class DuplicateKeyCheck : public YAML::EventHandler {
 public:
  explicit DuplicateKeyCheck(std::string file) : file_(std::move(file)) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override { node_done(); }
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override { node_done(); }
  void OnScalar(const YAML::Mark& mark,
                const std::string&,
                YAML::anchor_t,
                const std::string& value) override {
    if (!open_.empty() && open_.back().map && open_.back().key_next) {
      const auto [first, fresh] = open_.back().keys.emplace(value, mark);
      if (!fresh)
        throw ConfigError(fmt::format(
            "{}: duplicate key '{}' (also at line {}); YAML would keep one value and ignore the "
            "other",
            location(file_, mark), clip(value), first->second.line + 1));
    }
    node_done();
  }
  void OnSequenceStart(const YAML::Mark&,
                       const std::string&,
                       YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    open_.emplace_back();
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark&,
                  const std::string&,
                  YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    open_.emplace_back();
    open_.back().map = true;
  }
  void OnMapEnd() override { close(); }

 private:
  struct Open {
    bool map = false;
    bool key_next = true;
    std::unordered_map<std::string, YAML::Mark> keys;
  };
  /// A whole node was read: in a mapping, a key is followed by its value and a value by a key.
  void node_done() {
    if (!open_.empty() && open_.back().map) open_.back().key_next = !open_.back().key_next;
  }
  void close() {
    open_.pop_back();
    node_done();
  }
  std::string file_;
  std::vector<Open> open_;
};

/// The first document of `text`, after DuplicateKeyCheck; YAML::Exception on bad syntax.
YAML::Node load_checked(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DuplicateKeyCheck check(name);
  parser.HandleNextDocument(check);
  return YAML::Load(text);
}

}  // namespace

void ErrorList::throw_if_any() const {
  if (!messages_.empty()) throw ConfigError(messages_);
}

std::string nearest_key(const std::string& key, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, key.size() / 3) + 1;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(key, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

YamlReader::YamlReader(YAML::Node node, std::string file, std::string path)
    : node_(std::move(node)), file_(std::move(file)), path_(std::move(path)) {}

YamlReader YamlReader::load_file(const std::filesystem::path& file) {
  if (!std::filesystem::exists(file))
    throw ConfigError(fmt::format("{}: no such file", file.string()));
  const auto text = read_file(file);
  try {
    return YamlReader(load_checked(text, file.string()), file.string());
  } catch (const YAML::Exception& e) {
    throw ConfigError(fmt::format("{}: {}", location(file.string(), e.mark), e.msg));
  }
}

YamlReader YamlReader::load_string(const std::string& text, const std::string& name) {
  try {
    return YamlReader(load_checked(text, name), name);
  } catch (const YAML::Exception& e) {
    throw ConfigError(fmt::format("{}: {}", location(name, e.mark), e.msg));
  }
}

bool YamlReader::has(const std::string& key) const {
  return node_.IsMap() && node_[key] && !node_[key].IsNull();
}

std::string YamlReader::where(const std::string& key) const {
  const std::string dotted = key.empty() ? path_ : (path_.empty() ? key : path_ + "." + key);
  YAML::Mark mark = node_.IsDefined() ? node_.Mark() : YAML::Mark::null_mark();
  if (!key.empty() && node_.IsMap()) {
    for (const auto& kv : node_)
      if (kv.first.Scalar() == key) mark = kv.first.Mark();
  }
  const auto loc = location(file_, mark);
  return dotted.empty() ? loc : loc + ": " + dotted;
}

YamlReader YamlReader::child(const std::string& key) const {
  known_.insert(key);
  const std::string dotted = path_.empty() ? key : path_ + "." + key;
  if (!node_.IsMap() || !node_[key]) return YamlReader(YAML::Node(), file_, dotted);
  return YamlReader(node_[key], file_, dotted);
}

std::vector<std::string> YamlReader::keys() const {
  std::vector<std::string> out;
  if (node_.IsMap())
    for (const auto& kv : node_) out.push_back(kv.first.Scalar());
  return out;
}

void YamlReader::reject_unknown_keys(ErrorList& errors) const {
  if (!defined()) return;
  if (!node_.IsMap()) {
    errors.add(where() + ": expected a mapping of keys, got " + scalar_text(node_));
    return;
  }
  const std::vector<std::string> valid(known_.begin(), known_.end());
  for (const auto& kv : node_) {
    const std::string key = kv.first.Scalar();
    if (known_.count(key)) continue;
    const auto loc = location(file_, kv.first.Mark());
    const auto dotted = path_.empty() ? std::string() : path_ + ": ";
    const auto suggestion = nearest_key(key, valid);
    errors.add(
        fmt::format("{}: {}unknown key '{}'{}", loc, dotted, key,
                    suggestion.empty() ? "" : fmt::format(" (did you mean '{}'?)", suggestion)));
  }
}

bool YamlReader::convert(const YAML::Node& node, bool& out, std::string& problem) {
  if (node.IsScalar()) {
    const auto& s = node.Scalar();
    if (s == "true" || s == "True" || s == "TRUE") return out = true, true;
    if (s == "false" || s == "False" || s == "FALSE") return out = false, true;
  }
  problem = "expected true or false, got '" + scalar_text(node) + "'";
  return false;
}

bool YamlReader::convert(const YAML::Node& node, int64_t& out, std::string& problem) {
  if (node.IsScalar()) {
    const auto& s = node.Scalar();
    try {
      size_t used = 0;
      const long long v = std::stoll(s, &used);
      if (used == s.size()) return out = v, true;
    } catch (const std::exception&) {
    }
  }
  problem = "expected an integer, got '" + scalar_text(node) + "'";
  return false;
}

bool YamlReader::convert(const YAML::Node& node, int& out, std::string& problem) {
  int64_t v = 0;
  if (!convert(node, v, problem)) return false;
  out = static_cast<int>(v);
  return true;
}

bool YamlReader::convert(const YAML::Node& node, double& out, std::string& problem) {
  if (node.IsScalar()) {
    if (const auto v = parse_double(node.Scalar())) return out = *v, true;
  }
  problem = "expected a number, got '" + scalar_text(node) + "'";
  return false;
}

bool YamlReader::convert(const YAML::Node& node, std::string& out, std::string& problem) {
  if (!node.IsScalar()) {
    problem = "expected a string, got " + scalar_text(node);
    return false;
  }
  out = node.Scalar();
  return true;
}

bool YamlReader::convert(const YAML::Node& node, std::filesystem::path& out, std::string& problem) {
  std::string s;
  if (!convert(node, s, problem)) return false;
  out = s;
  return true;
}

bool YamlReader::convert(const YAML::Node& node,
                         std::map<std::string, std::string>& out,
                         std::string& problem) {
  if (!node.IsMap()) {
    problem = "expected a mapping, got " + scalar_text(node);
    return false;
  }
  std::map<std::string, std::string> values;
  for (const auto& kv : node) {
    std::string v;
    if (!convert(kv.second, v, problem)) return false;
    values[kv.first.Scalar()] = v;
  }
  out = std::move(values);
  return true;
}

YAML::Node to_yaml(double v) {
  // Shortest text that reads back as the same double (e.g. 2e-05, 0.1).
  return YAML::Node(fmt::format("{}", v));
}

YAML::Node to_yaml(const std::map<std::string, std::string>& v) {
  YAML::Node n(YAML::NodeType::Map);
  for (const auto& [key, value] : v) n[key] = value;
  return n;
}

std::string flow_yaml(const YAML::Node& node) {
  if (node.IsNull() || (node.IsScalar() && node.Scalar().empty()) ||
      ((node.IsSequence() || node.IsMap()) && node.size() == 0))
    return node.IsNull() ? "null" : "";
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

}  // namespace bert
