#include "data/text_file.h"

#include <fmt/format.h>
#include <utf8proc.h>

#include <algorithm>

#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/json_util.h"

namespace bert::data {

std::string TextFile::where(size_t offset) const {
  const auto line =
      1 + std::count(text.begin(), text.begin() + std::min(offset, text.size()), '\n');
  return fmt::format("{}:{}", name, line);
}

namespace {

/// The byte offset of the first invalid UTF-8 sequence in `text`, or npos.
size_t first_invalid_utf8(std::string_view text) {
  const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    if (bytes[pos] < 0x80) {  // ASCII fast path
      ++pos;
      continue;
    }
    utf8proc_int32_t cp = 0;
    const auto n =
        utf8proc_iterate(bytes + pos, static_cast<utf8proc_ssize_t>(text.size() - pos), &cp);
    if (n < 0) return pos;
    pos += static_cast<size_t>(n);
  }
  return std::string_view::npos;
}

}  // namespace

void check_utf8(std::string_view text, const std::string& where) {
  const size_t pos = first_invalid_utf8(text);
  if (pos == std::string_view::npos) return;
  const auto line_start = text.rfind('\n', pos == 0 ? 0 : pos - 1);
  const size_t line = 1 + std::count(text.begin(), text.begin() + pos, '\n');
  const size_t column = pos - (line_start == std::string_view::npos ? 0 : line_start + 1) + 1;
  throw DataError(fmt::format("{}:{}:{}: invalid UTF-8 (byte 0x{:02X}); the file must be UTF-8",
                              where, line, column, static_cast<unsigned char>(text[pos])));
}

void check_text_utf8(std::string_view text, const std::string& where) {
  const size_t pos = first_invalid_utf8(text);
  if (pos == std::string_view::npos) return;
  throw DataError(fmt::format("{}: invalid UTF-8 at byte {} (0x{:02X}); the text must be UTF-8",
                              where, pos, static_cast<unsigned char>(text[pos])));
}

std::vector<StdinLine> read_stdin_lines(std::istream& in) {
  std::vector<StdinLine> lines;
  int64_t number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    check_text_utf8(line, fmt::format("<stdin>:{}", number));
    lines.push_back({number, std::move(line)});
  }
  return lines;
}

TextFile read_text_file(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path))
    throw DataError(fmt::format("{}: no such file", path.string()));
  if (std::filesystem::is_directory(path))
    throw DataError(fmt::format("{}: is a directory, not a file", path.string()));
  TextFile file{path.string(), read_file(path)};
  if (file.text.compare(0, 3, "\xEF\xBB\xBF") == 0) file.text.erase(0, 3);
  check_utf8(file.text, file.name);
  return file;
}

std::vector<Line> split_lines(std::string_view text) {
  std::vector<Line> lines;
  size_t start = 0;
  int64_t number = 1;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    const bool last = end == std::string_view::npos;
    if (last) end = text.size();
    auto line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back({number++, line});
    if (last) break;
    start = end + 1;
  }
  return lines;
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t pos = 0;
  while (pos < line.size()) {
    while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t')) ++pos;
    if (pos >= line.size()) break;
    size_t end = pos;
    while (end < line.size() && line[end] != ' ' && line[end] != '\t') ++end;
    fields.push_back(line.substr(pos, end - pos));
    pos = end;
  }
  return fields;
}

nlohmann::json parse_json(std::string_view text, const std::string& where) {
  try {
    return parse_json_limited(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw DataError(fmt::format("{}: not valid JSON: {}", where, e.what()));
  }
}

void for_each_json_line(
    const TextFile& file,
    const std::function<void(nlohmann::json&& object, const Line& line, const std::string& where)>&
        fn) {
  for (const auto& line : split_lines(file.text)) {
    if (is_blank(line.text)) continue;
    const auto where = fmt::format("{}:{}", file.name, line.number);
    auto object = parse_json(line.text, where);
    if (!object.is_object()) throw DataError(where + ": expected a JSON object per line");
    fn(std::move(object), line, where);
  }
}

nlohmann::json read_json_file(const std::filesystem::path& path) {
  const auto file = read_text_file(path);
  try {
    return parse_json_limited(file.text);
  } catch (const nlohmann::json::parse_error& e) {
    throw DataError(
        fmt::format("{}: not valid JSON: {}", file.where(e.byte > 0 ? e.byte - 1 : 0), e.what()));
  }
}

}  // namespace bert::data
