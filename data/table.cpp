#include "data/table.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "bert/common/error.h"
#include "bert/common/log.h"
#include "bert/common/strings.h"
#include "data/text_file.h"

namespace bert::data {
namespace {

using json = nlohmann::json;

std::vector<Cell> split_tsv(std::string_view line) {
  std::vector<Cell> cells;
  size_t start = 0;
  while (true) {
    const size_t tab = line.find('\t', start);
    if (tab == std::string_view::npos) {
      cells.emplace_back(std::string(line.substr(start)));
      return cells;
    }
    cells.emplace_back(std::string(line.substr(start, tab - start)));
    start = tab + 1;
  }
}

/// RFC 4180 records; returns (start line, fields) per record.
std::vector<std::pair<int64_t, std::vector<Cell>>> parse_csv(const TextFile& file) {
  std::vector<std::pair<int64_t, std::vector<Cell>>> records;
  const std::string& t = file.text;
  size_t i = 0;
  int64_t line = 1;
  while (i < t.size()) {
    const int64_t record_line = line;
    std::vector<Cell> fields;
    std::string field;
    bool record_done = false;
    bool blank = true;
    while (!record_done) {
      field.clear();
      if (i < t.size() && t[i] == '"') {  // quoted field
        blank = false;
        const int64_t quote_line = line;
        ++i;
        while (true) {
          if (i >= t.size())
            throw DataError(fmt::format("{}:{}: unterminated quoted field", file.name, quote_line));
          if (t[i] == '"') {
            if (i + 1 < t.size() && t[i + 1] == '"') {
              field += '"';
              i += 2;
              continue;
            }
            ++i;
            break;
          }
          if (t[i] == '\n') ++line;
          field += t[i++];
        }
        if (i < t.size() && t[i] != ',' && t[i] != '\n' && t[i] != '\r')
          throw DataError(
              fmt::format("{}:{}: unexpected character after closing quote", file.name, line));
      } else {
        while (i < t.size() && t[i] != ',' && t[i] != '\n') field += t[i++];
        if (!field.empty() && field.back() == '\r' && (i >= t.size() || t[i] == '\n'))
          field.pop_back();
        if (!field.empty()) blank = false;
      }
      if (i < t.size() && t[i] == '\r') ++i;
      fields.emplace_back(field);
      if (i >= t.size()) {
        record_done = true;
      } else if (t[i] == ',') {
        blank = false;
        ++i;
      } else {  // '\n'
        ++i;
        ++line;
        record_done = true;
      }
    }
    if (!blank) records.emplace_back(record_line, std::move(fields));
  }
  return records;
}

Table read_jsonl(const TextFile& file) {
  Table table;
  table.file = file.name;
  std::vector<json> objects;
  for_each_json_line(file, [&](json&& j, const Line& l, const std::string&) {
    for (const auto& [key, value] : j.items()) {
      if (std::find(table.header.begin(), table.header.end(), key) == table.header.end())
        table.header.push_back(key);
    }
    objects.push_back(std::move(j));
    table.lines.push_back(l.number);
  });
  if (objects.empty())
    throw DataError(fmt::format("{}: the file is empty (no JSON lines)", file.name));
  for (size_t r = 0; r < objects.size(); ++r) {
    std::vector<Cell> row(table.header.size());
    for (size_t c = 0; c < table.header.size(); ++c) {
      const auto it = objects[r].find(table.header[c]);
      if (it == objects[r].end() || it->is_null()) continue;
      row[c] = it->is_string() ? it->get<std::string>()
                               : it->dump();  // numbers, booleans, lists: JSON text
    }
    table.rows.push_back(std::move(row));
  }
  return table;
}

}  // namespace

int Table::column(const std::string& name, bool required) const {
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return static_cast<int>(i);
  if (const auto index = parse_count(name); index && *index < static_cast<int>(header.size()))
    return *index;
  if (!required) return -1;
  std::string names;
  for (const auto& h : header) names += (names.empty() ? "'" : ", '") + h + "'";
  throw DataError(fmt::format("{}: no column '{}' (columns: {})", file, name, names));
}

std::string Table::where(size_t row) const {
  return fmt::format("{}:{}", file, lines.at(row));
}

const std::string& Table::at(size_t row, int column) const {
  const auto& cell = rows.at(row).at(static_cast<size_t>(column));
  if (!cell) throw DataError(fmt::format("{}: missing value for '{}'", where(row), header[column]));
  return *cell;
}

Table read_table(const std::filesystem::path& path,
                 TableFormat format,
                 bool header,
                 bool skip_malformed) {
  const auto file = read_text_file(path);
  if (format == TableFormat::kJsonl) return read_jsonl(file);

  std::vector<std::pair<int64_t, std::vector<Cell>>> records;
  if (format == TableFormat::kCsv) {
    records = parse_csv(file);
  } else {
    for (const auto& l : split_lines(file.text))
      if (!l.text.empty()) records.emplace_back(l.number, split_tsv(l.text));
  }
  Table table;
  table.file = file.name;
  if (records.empty())
    throw DataError(fmt::format("{}: the file is empty (no {})", file.name,
                                header ? "header and no rows" : "rows"));
  if (header && records.size() == 1)
    throw DataError(fmt::format("{}:{}: only a header, no data rows", file.name, records[0].first));
  size_t first = 0;
  if (header) {
    for (const auto& c : records[0].second) table.header.push_back(*c);
    first = 1;
  } else {
    for (size_t i = 0; i < records[0].second.size(); ++i) table.header.push_back(std::to_string(i));
  }
  size_t skipped = 0;
  std::vector<std::string> malformed;  // every such row is reported (the first 20 by line)
  for (size_t r = first; r < records.size(); ++r) {
    auto& [line, cells] = records[r];
    if (cells.size() != table.header.size()) {
      ++skipped;
      if (!skip_malformed && malformed.size() < 20)
        malformed.push_back(fmt::format(
            "{}:{}: expected {} fields ({}), got {}", file.name, line, table.header.size(),
            header ? "as the header" : "as the first row", cells.size()));
      continue;
    }
    table.rows.push_back(std::move(cells));
    table.lines.push_back(line);
  }
  if (!skip_malformed && skipped > 0) {
    std::string message = malformed.front();
    for (size_t i = 1; i < malformed.size(); ++i) message += "\n" + malformed[i];
    if (skipped > malformed.size())
      message += fmt::format("\n{}: {} more rows with the wrong number of fields", file.name,
                             skipped - malformed.size());
    if (skipped > 1)
      message +=
          fmt::format("\n{}: {} malformed rows in all (data.*.skip_malformed: true drops them)",
                      file.name, skipped);
    throw DataError(message);
  }
  if (skipped)
    log::warn("[data] {}: skipped {} malformed rows (skip_malformed)", file.name, skipped);
  return table;
}

std::optional<TableFormat> table_format_from_extension(const std::filesystem::path& path) {
  const auto ext = path.extension().string();
  if (ext == ".tsv" || ext == ".txt") return TableFormat::kTsv;
  if (ext == ".csv") return TableFormat::kCsv;
  if (ext == ".jsonl" || ext == ".json") return TableFormat::kJsonl;
  return std::nullopt;
}

}  // namespace bert::data
