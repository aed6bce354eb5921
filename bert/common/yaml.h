#pragma once

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace bert {

/// Configuration problems collected so that all of them are reported at once (marian's and
/// rule 5's "nothing runs until the whole recipe is valid").
class ErrorList {
 public:
  void add(std::string message) { messages_.push_back(std::move(message)); }
  bool empty() const { return messages_.empty(); }
  size_t size() const { return messages_.size(); }
  const std::vector<std::string>& messages() const { return messages_; }
  /// Throws ConfigError carrying every message, if there is any.
  void throw_if_any() const;

 private:
  std::vector<std::string> messages_;
};

/// Closed choices are enum classes; a specialisation lists their names for parsing, dumping and
/// error messages: `template <> struct EnumNames<Policy> { static const std::vector<
/// std::pair<const char*, Policy>>& get(); };`
template <class E>
struct EnumNames;

/// The names of an enum's values joined with ", " (for "expected one of ..." messages).
template <class E>
std::string enum_choices() {
  std::string out;
  for (const auto& [name, value] : EnumNames<E>::get())
    out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}
template <class E>
const char* enum_name(E value) {
  for (const auto& [name, v] : EnumNames<E>::get())
    if (v == value) return name;
  return "?";
}
template <class E>
std::optional<E> parse_enum(const std::string& text) {
  for (const auto& [name, v] : EnumNames<E>::get())
    if (text == name) return v;
  return std::nullopt;
}

/// The candidate closest to `key` by edit distance, or "" when none is close enough to be a
/// plausible typo (distance <= max(2, |key| / 3)).
std::string nearest_key(const std::string& key, const std::vector<std::string>& candidates);

/// A YAML mapping being read into typed options. Every read remembers the key, so that
/// reject_unknown_keys() can name keys nobody asked for. Messages carry "file:line:col: path".
/// Not thread-safe (reads mark keys as used).
class YamlReader {
 public:
  /// `file` names the source in messages; `path` is the dotted path of `node` ("" at the root).
  YamlReader(YAML::Node node, std::string file, std::string path = "");
  /// Parses a YAML file; a syntax error is a ConfigError "file:line:col: message".
  static YamlReader load_file(const std::filesystem::path& file);
  /// Parses YAML text (tests, --set values); `name` stands for the file in messages.
  static YamlReader load_string(const std::string& text, const std::string& name);

  const YAML::Node& node() const { return node_; }
  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }
  bool defined() const { return node_.IsDefined() && !node_.IsNull(); }
  bool has(const std::string& key) const;
  /// "file:line:col: path.key" locating `key` (or this node when `key` is empty or absent).
  std::string where(const std::string& key = "") const;
  /// The mapping under `key` (undefined if absent); marks `key` as known.
  YamlReader child(const std::string& key) const;
  /// Keys of this mapping, in file order.
  std::vector<std::string> keys() const;

  /// Reads `key` into `out` if present (otherwise leaves the default). A value of the wrong
  /// type adds "where: expected <type>, got '<text>'" to `errors`. Returns true if read.
  template <class T>
  bool read(const std::string& key, T& out, ErrorList& errors) const {
    known_.insert(key);
    if (!node_.IsMap() || !node_[key]) return false;
    std::string problem;
    if (!convert(node_[key], out, problem)) {
      errors.add(where(key) + ": " + problem);
      return false;
    }
    return true;
  }
  /// Marks `key` as valid without reading it (read elsewhere).
  void allow(const std::string& key) const { known_.insert(key); }
  /// Adds an error for each key of this mapping that no read()/child()/allow() asked for,
  /// with the nearest known key as a suggestion. Also reports a non-mapping node.
  void reject_unknown_keys(ErrorList& errors) const;

  static bool convert(const YAML::Node& node, bool& out, std::string& problem);
  static bool convert(const YAML::Node& node, int64_t& out, std::string& problem);
  static bool convert(const YAML::Node& node, int& out, std::string& problem);
  static bool convert(const YAML::Node& node, double& out, std::string& problem);
  static bool convert(const YAML::Node& node, std::string& out, std::string& problem);
  static bool convert(const YAML::Node& node, std::filesystem::path& out, std::string& problem);
  template <class T>
  static bool convert(const YAML::Node& node, std::vector<T>& out, std::string& problem) {
    std::vector<T> values;
    if (node.IsScalar()) {  // a single value where a list is expected
      T v{};
      if (!convert(node, v, problem)) return false;
      values.push_back(std::move(v));
    } else if (node.IsSequence()) {
      for (const auto& item : node) {
        T v{};
        if (!convert(item, v, problem)) return false;
        values.push_back(std::move(v));
      }
    } else {
      problem = "expected a list";
      return false;
    }
    out = std::move(values);
    return true;
  }
  template <class T>
  static bool convert(const YAML::Node& node, std::optional<T>& out, std::string& problem) {
    if (node.IsNull()) {
      out.reset();
      return true;
    }
    T v{};
    if (!convert(node, v, problem)) return false;
    out = std::move(v);
    return true;
  }
  static bool convert(const YAML::Node& node,
                      std::map<std::string, std::string>& out,
                      std::string& problem);
  template <class E, std::enable_if_t<std::is_enum_v<E>, int> = 0>
  static bool convert(const YAML::Node& node, E& out, std::string& problem) {
    std::string text;
    if (!convert(node, text, problem)) return false;
    if (const auto v = parse_enum<E>(text)) {
      out = *v;
      return true;
    }
    problem = "unknown value '" + text + "'; expected one of: " + enum_choices<E>();
    return false;
  }

 private:
  YAML::Node node_;
  std::string file_, path_;
  mutable std::set<std::string> known_;
};

/// The YAML form of a value (inverse of YamlReader::convert).
inline YAML::Node to_yaml(bool v) {
  return YAML::Node(v);
}
inline YAML::Node to_yaml(int64_t v) {
  return YAML::Node(v);
}
inline YAML::Node to_yaml(int v) {
  return YAML::Node(v);
}
YAML::Node to_yaml(double v);
inline YAML::Node to_yaml(const std::string& v) {
  return YAML::Node(v);
}
inline YAML::Node to_yaml(const std::filesystem::path& v) {
  return YAML::Node(v.string());
}
YAML::Node to_yaml(const std::map<std::string, std::string>& v);
template <class E, std::enable_if_t<std::is_enum_v<E>, int> = 0>
YAML::Node to_yaml(E v) {
  return YAML::Node(std::string(enum_name(v)));
}
template <class T>
YAML::Node to_yaml(const std::vector<T>& v) {
  YAML::Node n(YAML::NodeType::Sequence);
  for (const auto& x : v) n.push_back(to_yaml(x));
  return n;
}
template <class T>
YAML::Node to_yaml(const std::optional<T>& v) {
  return v ? to_yaml(*v) : YAML::Node(YAML::NodeType::Null);
}

/// Reads every field an options struct lists in its `visit()` (rule 4), then rejects keys that
/// are not fields. `Options::visit(self, field)` calls `field(name, member, help)` per field.
template <class Options>
void read_struct(const YamlReader& reader, Options& options, ErrorList& errors) {
  if (!reader.defined()) return;
  Options::visit(options, [&](const char* name, auto& member, const char* /*help*/) {
    reader.read(name, member, errors);
  });
  reader.reject_unknown_keys(errors);
}

/// The mapping {field: value} of an options struct (for resolved configs and task metadata).
template <class Options>
YAML::Node write_struct(const Options& options) {
  YAML::Node node(YAML::NodeType::Map);
  Options::visit(options, [&](const char* name, const auto& member, const char* /*help*/) {
    node[name] = to_yaml(member);
  });
  return node;
}

/// One key of a configuration section, as `bertft recipe-keys` lists it.
struct KeyDoc {
  std::string key;            ///< dotted path (training.learning_rate)
  std::string type;           ///< int, float, bool, string, path, "one of: a, b", list of ...
  std::string default_value;  ///< YAML of the default ("" when empty)
  std::string help;
};

/// The type of a field, in words.
inline std::string type_name(const bool&) {
  return "bool";
}
inline std::string type_name(const int64_t&) {
  return "int";
}
inline std::string type_name(const int&) {
  return "int";
}
inline std::string type_name(const double&) {
  return "float";
}
inline std::string type_name(const std::string&) {
  return "string";
}
inline std::string type_name(const std::filesystem::path&) {
  return "path";
}
inline std::string type_name(const std::map<std::string, std::string>&) {
  return "mapping";
}
template <class E, std::enable_if_t<std::is_enum_v<E>, int> = 0>
std::string type_name(const E&) {
  return "one of: " + enum_choices<E>();
}
template <class T>
std::string type_name(const std::vector<T>&) {
  return "list of " + type_name(T{});
}
template <class T>
std::string type_name(const std::optional<T>&) {
  return type_name(T{}) + " or null";
}

/// A value as one line of flow YAML ("" for an empty string, path, list or mapping).
std::string flow_yaml(const YAML::Node& node);

/// Every field of an options struct with its type, default (a default-constructed Options)
/// and help, keys prefixed by `prefix` + ".".
template <class Options>
std::vector<KeyDoc> describe_struct(const std::string& prefix) {
  std::vector<KeyDoc> docs;
  Options defaults;
  Options::visit(defaults, [&](const char* name, const auto& member, const char* help) {
    docs.push_back({prefix.empty() ? std::string(name) : prefix + "." + name, type_name(member),
                    flow_yaml(to_yaml(member)), help});
  });
  return docs;
}

}  // namespace bert
