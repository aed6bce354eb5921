#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bert/common/yaml.h"

namespace bert::data {

/// The on-disk format of a dataset file.
enum class DataFormat {
  kAuto,   ///< from the task and the file: GLUE directory names, .json -> SQuAD, ...
  kGlue,   ///< a GLUE TSV with that task's columns (task from `glue_task` or the directory)
  kTsv,    ///< generic tab-separated, columns named in `columns`
  kCsv,    ///< generic CSV (RFC 4180 quoting)
  kJsonl,  ///< generic JSON lines
  kSquad,  ///< SQuAD v1.1 / v2.0 JSON
  kConll,  ///< CoNLL columns: one word per line, blank line between sentences
  kSwag,   ///< SWAG CSV (sent1, sent2, ending0..3, label)
};

/// Where one split of a dataset lives and how to read it (the recipe's `data.train` etc.).
struct DataSpec {
  std::filesystem::path path;
  DataFormat format = DataFormat::kAuto;
  /// GLUE task for format glue (cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli); empty =
  /// from the directory name (CoLA, SST-2, MRPC, ...).
  std::string glue_task;
  /// Generic formats: whether the first row names the columns.
  bool header = true;
  /// Role -> column name (or 0-based number). Roles: text_a, text_b, label, id (classification;
  /// labels: "a,b,c", a multi-label set as one 0/1 column per label, instead of label);
  /// context, prefix, endings (comma-separated), label, id (multiple choice); token, tag (CoNLL,
  /// numbers; tag defaults to the last column).
  std::map<std::string, std::string> columns;
  /// TSV/CSV rows with the wrong number of fields are dropped and counted instead of an error.
  bool skip_malformed = false;
  /// Keep only the first N examples (0 = all): for quick runs and tests.
  int64_t limit = 0;

  template <class Self, class Visitor>
  static void visit(Self& self, Visitor&& field) {
    field("path", self.path, "Dataset file");
    field("format", self.format, "auto | glue | tsv | csv | jsonl | squad | conll | swag");
    field("glue_task", self.glue_task,
          "GLUE task name when format is glue (default: from the directory)");
    field("header", self.header, "Generic TSV/CSV: first row names the columns");
    field("columns", self.columns,
          "Role -> column name or number (text_a, text_b, label, id, ...)");
    field("skip_malformed", self.skip_malformed,
          "Drop (and count) rows with the wrong number of fields");
    field("limit", self.limit, "Use only the first N examples (0 = all)");
  }
};

/// The names a text example's fields go by in generic files and JSON lines (GLUE's, HF's and
/// bertft's spellings), in the order they are looked for: one set for every reader, `predict`
/// and `tokenize`.
inline const std::vector<std::string>& text_a_names() {
  static const std::vector<std::string> names = {"text_a", "text", "sentence", "sentence1"};
  return names;
}
inline const std::vector<std::string>& text_b_names() {
  static const std::vector<std::string> names = {"text_b", "text_pair", "sentence2"};
  return names;
}
inline const std::vector<std::string>& id_names() {
  static const std::vector<std::string> names = {"id", "idx"};
  return names;
}
/// "labels": a multi-label example's list (HF datasets' name for it).
inline const std::vector<std::string>& label_names() {
  static const std::vector<std::string> names = {"label", "labels"};
  return names;
}

/// Column role lookup: the spec's explicit column for `role` (must exist), else the first of
/// `defaults` present in the table, else -1.
struct Table;
int resolve_column(const DataSpec& spec,
                   const Table& table,
                   const std::string& role,
                   const std::vector<std::string>& defaults);

/// Throws ConfigError for a role in spec.columns that is not one of `roles`.
void check_column_roles(const DataSpec& spec, const std::vector<std::string>& roles);

}  // namespace bert::data

namespace bert {
template <>
struct EnumNames<data::DataFormat> {
  static const std::vector<std::pair<const char*, data::DataFormat>>& get();
};
}  // namespace bert
