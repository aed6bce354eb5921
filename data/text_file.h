#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <istream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace bert::data {

/// A whole text file in memory, checked to be valid UTF-8, without a leading byte-order mark.
struct TextFile {
  std::string name;  ///< the path as given, for messages
  std::string text;

  /// "name:line" (1-based) of the byte at `offset`.
  std::string where(size_t offset) const;
};

/// Reads `path`. Throws DataError naming file, line and column at the first invalid UTF-8
/// sequence (nothing is silently replaced), or if the file cannot be read.
TextFile read_text_file(const std::filesystem::path& path);

/// Throws DataError "<where>:line:column: invalid UTF-8 ..." if `text` (a file's) is not valid
/// UTF-8.
void check_utf8(std::string_view text, const std::string& where);

/// The same for one text given on the command line or read from a stdin line (`where`: the
/// option, or "<stdin>:N"): DataError "<where>: invalid UTF-8 at byte K (0xNN)...". A text that is
/// not UTF-8 cannot be tokenized, nor echoed in JSON output.
void check_text_utf8(std::string_view text, const std::string& where);

/// A line read from stdin and its 1-based number there.
struct StdinLine {
  int64_t number = 0;
  std::string text;
};

/// The non-empty lines of `in` (stdin, read to its end) without "\n" / "\r\n", each checked with
/// check_text_utf8 as "<stdin>:N", with their numbers (which count the empty lines skipped).
std::vector<StdinLine> read_stdin_lines(std::istream& in);

/// One line of a file without its "\n" / "\r\n", with its 1-based number.
struct Line {
  int64_t number = 0;
  std::string_view text;
};

/// Splits into lines; a final line without newline counts, an empty last one does not.
std::vector<Line> split_lines(std::string_view text);

/// Whether `line` holds nothing but spaces, tabs and carriage returns (a blank line: no text).
inline bool is_blank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

/// Whitespace-separated fields (spaces and tabs) of one line, as CoNLL files use them.
std::vector<std::string_view> split_fields(std::string_view line);

/// Parses JSON text; DataError "<where>: not valid JSON: ..." otherwise.
nlohmann::json parse_json(std::string_view text, const std::string& where);

/// JSON lines: calls `fn(object, line, where)` for the JSON object on each non-blank line of
/// `file` in order, `where` being "<file>:<line>"; a line that is not JSON or not an object is
/// a DataError naming it. One line parsed at a time (a corpus may be larger than memory twice).
void for_each_json_line(
    const TextFile& file,
    const std::function<void(nlohmann::json&& object, const Line& line, const std::string& where)>&
        fn);

/// Reads and parses a whole JSON file; a syntax error is a DataError naming file and line.
nlohmann::json read_json_file(const std::filesystem::path& path);

}  // namespace bert::data
