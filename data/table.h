#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace bert::data {

enum class TableFormat {
  kTsv,    ///< tab-separated, no quoting (GLUE's files: quotes are ordinary characters)
  kCsv,    ///< comma-separated, RFC 4180 quoting (fields may hold commas, quotes, newlines)
  kJsonl,  ///< one JSON object per line; columns are its keys
};

/// A cell: absent when a JSONL object lacks the key or holds null.
using Cell = std::optional<std::string>;

/// Rows of a tabular file with a header (given or synthesised as "0", "1", ...).
struct Table {
  std::string file;
  std::vector<std::string> header;
  std::vector<std::vector<Cell>> rows;
  std::vector<int64_t> lines;  ///< 1-based line where each row starts

  /// Index of a column by header name, or by number ("3") when no header names it; -1 if
  /// neither. `required` throws DataError naming the file and listing the columns instead.
  int column(const std::string& name, bool required = true) const;
  /// "file:line" of a row.
  std::string where(size_t row) const;
  /// Cell text; throws DataError "file:line: column 'name' is empty/missing" when absent.
  const std::string& at(size_t row, int column) const;
};

/// Reads a whole table. TSV/CSV rows must all have the header's number of fields (DataError
/// "file:line: expected N fields (as the header), got M" otherwise) unless `skip_malformed`,
/// which drops and counts them (logged). Blank lines are skipped. JSONL values that are not
/// strings (numbers, booleans, lists) become their JSON text. UTF-8 is checked.
Table read_table(const std::filesystem::path& path,
                 TableFormat format,
                 bool header = true,
                 bool skip_malformed = false);

/// kTsv for .tsv/.txt, kCsv for .csv, kJsonl for .jsonl/.json; nullopt otherwise.
std::optional<TableFormat> table_format_from_extension(const std::filesystem::path& path);

}  // namespace bert::data
