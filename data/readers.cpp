#include "data/readers.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "bert/common/error.h"
#include "bert/common/log.h"
#include "bert/common/strings.h"
#include "bert/tokenizer/unicode.h"
#include "data/glue.h"
#include "data/table.h"
#include "data/text_file.h"

namespace bert::data {
namespace {

using json = nlohmann::json;

std::string example_id(const Table& table, size_t row, int id_column) {
  if (id_column >= 0 && table.rows[row][id_column]) return *table.rows[row][id_column];
  return std::to_string(row);
}

template <class T>
void apply_limit(std::vector<T>& v, int64_t limit) {
  if (limit > 0 && static_cast<int64_t>(v.size()) > limit) v.resize(static_cast<size_t>(limit));
}

TableFormat generic_table_format(const DataSpec& spec, DataFormat format) {
  switch (format) {
    case DataFormat::kTsv:
      return TableFormat::kTsv;
    case DataFormat::kCsv:
    case DataFormat::kSwag:
      return TableFormat::kCsv;
    case DataFormat::kJsonl:
      return TableFormat::kJsonl;
    default:
      throw ConfigError(fmt::format("{}: format '{}' cannot be read as a table", spec.path.string(),
                                    enum_name(format)));
  }
}

std::vector<TextExample> read_glue(const DataSpec& spec) {
  const std::string name =
      spec.glue_task.empty() ? spec.path.parent_path().filename().string() : spec.glue_task;
  const auto task = find_glue_task(name);
  if (!task)
    throw ConfigError(
        fmt::format("{}: '{}' is not a GLUE task (known: {}); set glue_task or use "
                    "format tsv with columns",
                    spec.path.string(), name, glue_task_names()));
  // CoLA's train/dev have no header; its test file does ("index sentence").
  bool header = task->header;
  std::string text_a = task->text_a, label = task->label, id = task->id;
  if (!header) {
    std::string start(6, '\0');  // only the first bytes: read_table() reads the file once
    std::ifstream(spec.path, std::ios::binary).read(start.data(), 6);
    if (start == "index\t") {
      header = true;
      text_a = "sentence";
      id = "index";
      label = "";
    }
  }
  const auto table = read_table(spec.path, TableFormat::kTsv, header, spec.skip_malformed);
  const int a = table.column(text_a);
  const int b = task->text_b.empty() ? -1 : table.column(task->text_b);
  const int l = label.empty() ? -1 : table.column(label, /*required=*/false);
  const int i = id.empty() ? -1 : table.column(id, false);
  std::vector<TextExample> out;
  out.reserve(table.rows.size());
  for (size_t r = 0; r < table.rows.size(); ++r) {
    TextExample e;
    e.id = example_id(table, r, i);
    e.text_a = table.at(r, a);
    if (b >= 0) e.text_b = table.at(r, b);
    if (l >= 0) e.label = table.at(r, l);
    e.where = table.where(r);
    out.push_back(std::move(e));
  }
  return out;
}

/// The columns a comma-separated list names (roles endings, labels); DataError for one the
/// table lacks.
std::vector<int> listed_columns(const Table& table, const std::string& list) {
  std::vector<int> columns;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    columns.push_back(table.column(list.substr(start, comma - start)));
    start = comma + 1;
  }
  return columns;
}

/// A multi-label example's labels from one 0/1 column per label (role labels: "a,b,c", as HF's
/// multi-label tutorial data comes): the names of the columns set, as a JSON list. A cell other
/// than 0 / 1 / true / false is a DataError naming the row and the column.
std::string label_set_of_columns(const Table& table, size_t row, const std::vector<int>& columns) {
  nlohmann::json set = nlohmann::json::array();
  for (const int c : columns) {
    const auto& cell = table.at(row, c);
    const auto value = parse_double(cell);
    if (cell == "true" || (value && *value == 1)) {
      set.push_back(table.header[static_cast<size_t>(c)]);
    } else if (!(cell == "false" || (value && *value == 0))) {
      throw DataError(
          fmt::format("{}: column '{}' holds '{}'; a label column holds 0 or 1 "
                      "(true or false)",
                      table.where(row), table.header[static_cast<size_t>(c)], cell));
    }
  }
  return set.dump();
}

}  // namespace

DataFormat resolve_format(const DataSpec& spec, DataFormat task_default) {
  if (spec.format != DataFormat::kAuto) return spec.format;
  const auto ext = spec.path.extension().string();
  if (task_default == DataFormat::kGlue || task_default == DataFormat::kTsv) {
    if (ext == ".tsv" && spec.columns.empty() &&
        (!spec.glue_task.empty() || find_glue_task(spec.path.parent_path().filename().string())))
      return DataFormat::kGlue;
    if (const auto f = table_format_from_extension(spec.path)) {
      switch (*f) {
        case TableFormat::kTsv:
          return DataFormat::kTsv;
        case TableFormat::kCsv:
          return DataFormat::kCsv;
        case TableFormat::kJsonl:
          return DataFormat::kJsonl;
      }
    }
  }
  if (task_default == DataFormat::kSwag) {
    if (ext == ".jsonl") return DataFormat::kJsonl;
    if (ext == ".tsv") return DataFormat::kTsv;
    return DataFormat::kSwag;
  }
  return task_default;  // squad, conll
}

std::vector<TextExample> read_text_examples(const DataSpec& spec) {
  const auto format = resolve_format(spec, DataFormat::kTsv);
  std::vector<TextExample> out;
  if (format == DataFormat::kGlue) {
    out = read_glue(spec);
  } else {
    check_column_roles(spec, {"text_a", "text_b", "label", "labels", "id"});
    if (spec.columns.count("label") && spec.columns.count("labels"))
      throw ConfigError(fmt::format(
          "{}: columns: label names the label column, labels the 0/1 columns of a multi-label "
          "set; give one",
          spec.path.string()));
    const auto table =
        read_table(spec.path, generic_table_format(spec, format), spec.header, spec.skip_malformed);
    const int a = resolve_column(spec, table, "text_a", text_a_names());
    if (a < 0)
      throw DataError(
          fmt::format("{}: no text column ({}); name it with columns: {{text_a: <column>}} (on "
                      "the command line --column text_a=<column>)",
                      spec.path.string(), fmt::join(text_a_names(), " | ")));
    const int b = resolve_column(spec, table, "text_b", text_b_names());
    const auto multi_hot = spec.columns.find("labels");
    const auto label_columns = multi_hot == spec.columns.end()
                                   ? std::vector<int>()
                                   : listed_columns(table, multi_hot->second);
    const int l = label_columns.empty() ? resolve_column(spec, table, "label", label_names()) : -1;
    const int i = resolve_column(spec, table, "id", id_names());
    if (generic_table_format(spec, format) == TableFormat::kJsonl)  // a field nobody reads
      for (int c = 0; c < static_cast<int>(table.header.size()); ++c)
        if (c != a && c != b && c != l && c != i &&
            std::find(label_columns.begin(), label_columns.end(), c) == label_columns.end())
          throw DataError(fmt::format(
              "{}: unknown field '{}' (text: {}; pair: {}; label: {}; id: {}); map it with "
              "columns: {{text_b: {}}} (on the command line --column text_b={}) or remove it",
              spec.path.string(), table.header[c], fmt::join(text_a_names(), " | "),
              fmt::join(text_b_names(), " | "), fmt::join(label_names(), " | "),
              fmt::join(id_names(), " | "), table.header[c], table.header[c]));
    for (size_t r = 0; r < table.rows.size(); ++r) {
      TextExample e;
      e.id = example_id(table, r, i);
      e.text_a = table.at(r, a);
      if (b >= 0 && table.rows[r][b]) e.text_b = *table.rows[r][b];  // JSONL may omit it per row
      if (l >= 0 && table.rows[r][l]) e.label = *table.rows[r][l];
      if (!label_columns.empty()) e.label = label_set_of_columns(table, r, label_columns);
      e.where = table.where(r);
      out.push_back(std::move(e));
    }
  }
  apply_limit(out, spec.limit);
  return out;
}

std::vector<ChoiceExample> read_choice_examples(const DataSpec& spec) {
  const auto format = resolve_format(spec, DataFormat::kSwag);
  check_column_roles(spec, {"context", "prefix", "endings", "label", "id"});
  const auto table =
      read_table(spec.path, generic_table_format(spec, format), spec.header, spec.skip_malformed);
  const bool swag = format == DataFormat::kSwag;
  const int context = resolve_column(
      spec, table, "context",
      swag ? std::vector<std::string>{"sent1"} : std::vector<std::string>{"context", "sent1"});
  if (context < 0)
    throw DataError(fmt::format("{}: no context column (SWAG: 'sent1')", spec.path.string()));
  const int prefix = resolve_column(spec, table, "prefix", {"sent2", "prefix"});
  const int label = resolve_column(spec, table, "label", {"label"});
  const int id = resolve_column(spec, table, "id", {"id"});
  const int video = table.column("video-id", false), fold = table.column("fold-ind", false);
  std::vector<int> endings;
  if (const auto it = spec.columns.find("endings"); it != spec.columns.end()) {
    endings = listed_columns(table, it->second);
  } else {
    for (int k = 0;; ++k) {
      const int c = table.column("ending" + std::to_string(k), false);
      if (c < 0) break;
      endings.push_back(c);
    }
  }
  if (endings.size() < 2)
    throw DataError(
        fmt::format("{}: need at least two ending columns (ending0, ending1, ... or "
                    "columns: {{endings: \"a,b\"}})",
                    spec.path.string()));
  std::vector<ChoiceExample> out;
  for (size_t r = 0; r < table.rows.size(); ++r) {
    ChoiceExample e;
    if (id >= 0) {
      e.id = table.at(r, id);
    } else if (video >= 0 && fold >= 0) {
      e.id = table.at(r, video) + "/" + table.at(r, fold);
    } else {
      e.id = std::to_string(r);
    }
    e.context = table.at(r, context);
    const std::string head = prefix >= 0 ? table.at(r, prefix) : std::string();
    for (int c : endings)
      e.choices.push_back(head.empty() ? table.at(r, c) : head + " " + table.at(r, c));
    if (label >= 0 && table.rows[r][label]) {
      const auto& text = *table.rows[r][label];
      int64_t value = -1;
      try {
        size_t used = 0;
        value = std::stoll(text, &used);
        if (used != text.size()) value = -1;
      } catch (const std::exception&) {
      }
      if (value < 0 || value >= static_cast<int64_t>(endings.size()))
        throw DataError(fmt::format("{}: label '{}' is not a choice index 0..{}", table.where(r),
                                    text, endings.size() - 1));
      e.label = value;
    }
    e.where = table.where(r);
    out.push_back(std::move(e));
  }
  apply_limit(out, spec.limit);
  return out;
}

std::vector<QaExample> read_squad(const DataSpec& spec, std::string* version) {
  if (!spec.columns.empty() || !spec.header)  // a table's settings, which would be ignored
    throw ConfigError(fmt::format(
        "{}: {}: SQuAD JSON has no columns (its keys are SQuAD's: context, question, answers, "
        "id)",
        spec.path.string(), spec.columns.empty() ? "header" : "columns"));
  const json doc = read_json_file(spec.path);
  const std::string file_name = spec.path.string();
  const auto fail = [&](const std::string& path, const std::string& what) {
    throw DataError(fmt::format("{}: {}: {}", file_name, path, what));
  };
  const auto string_at = [&](const json& j, const char* key,
                             const std::string& path) -> std::string {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_string()) fail(path, fmt::format("missing string '{}'", key));
    return it->get<std::string>();
  };
  const auto optional_string = [&](const json& j, const char* key, const std::string& path) {
    const auto it = j.is_object() ? j.find(key) : j.end();
    if (it == j.end() || it->is_null()) return std::string();
    if (!it->is_string()) fail(path, fmt::format("'{}' must be a string", key));
    return it->get<std::string>();
  };
  if (!doc.is_object() || !doc.contains("data") || !doc["data"].is_array())
    fail("(top level)", "expected an object with a 'data' list (SQuAD format)");
  if (version) *version = optional_string(doc, "version", "(top level)");
  std::vector<QaExample> out;
  size_t mismatched = 0;
  std::vector<char32_t> code_points;
  std::vector<uint32_t> offsets;
  for (size_t a = 0; a < doc["data"].size(); ++a) {
    const auto& article = doc["data"][a];
    const auto apath = fmt::format("data[{}]", a);
    const std::string title = optional_string(article, "title", apath);
    if (!article.contains("paragraphs") || !article["paragraphs"].is_array())
      fail(apath, "missing 'paragraphs' list");
    for (size_t p = 0; p < article["paragraphs"].size(); ++p) {
      const auto& paragraph = article["paragraphs"][p];
      const auto ppath = fmt::format("{}.paragraphs[{}]", apath, p);
      const std::string context = string_at(paragraph, "context", ppath);
      tok::unicode::decode_utf8(context, code_points, offsets);  // offsets: byte of each character
      const int64_t num_chars = static_cast<int64_t>(offsets.size()) - 1;
      if (!paragraph.contains("qas") || !paragraph["qas"].is_array())
        fail(ppath, "missing 'qas' list");
      for (size_t q = 0; q < paragraph["qas"].size(); ++q) {
        const auto& qa = paragraph["qas"][q];
        const auto qpath = fmt::format("{}.qas[{}]", ppath, q);
        QaExample e;
        e.id = string_at(qa, "id", qpath);
        e.title = title;
        e.question = string_at(qa, "question", qpath);
        e.context = context;
        if (const auto it = qa.find("is_impossible"); it != qa.end() && !it->is_null()) {
          if (!it->is_boolean()) fail(qpath, "'is_impossible' must be true or false");
          e.is_impossible = it->get<bool>();
        }
        e.where = fmt::format("{}: {} (id {})", file_name, qpath, e.id);
        if (qa.contains("answers")) {
          if (!qa["answers"].is_array()) fail(qpath, "'answers' must be a list");
          for (size_t k = 0; k < qa["answers"].size(); ++k) {
            const auto& ans = qa["answers"][k];
            const auto kpath = fmt::format("{}.answers[{}]", qpath, k);
            QaAnswer answer;
            answer.text = string_at(ans, "text", kpath);
            if (!ans.contains("answer_start") || !ans["answer_start"].is_number_integer())
              fail(kpath, "missing integer 'answer_start'");
            answer.char_start = ans["answer_start"].get<int64_t>();
            if (answer.char_start < 0 || answer.char_start > num_chars)
              fail(kpath, fmt::format("answer_start {} outside the context ({} characters)",
                                      answer.char_start, num_chars));
            answer.byte_start = offsets[static_cast<size_t>(answer.char_start)];
            if (context.compare(static_cast<size_t>(answer.byte_start), answer.text.size(),
                                answer.text) != 0)
              ++mismatched;
            e.answers.push_back(std::move(answer));
          }
        }
        out.push_back(std::move(e));
      }
    }
  }
  if (mismatched)
    log::warn("[data] {}: {} answers whose text differs from the context at answer_start",
              file_name, mismatched);
  apply_limit(out, spec.limit);
  return out;
}

std::vector<TaggedSentence> read_conll(const DataSpec& spec) {
  check_column_roles(spec, {"token", "tag"});
  const auto file = read_text_file(spec.path);
  std::vector<TaggedSentence> out;
  int64_t document = 0;
  bool any_docstart = false;
  size_t num_columns = 0;
  int token_column = 0, tag_column = -1;
  const auto parse_index = [&](const char* role, int fallback) {
    const auto it = spec.columns.find(role);
    if (it == spec.columns.end()) return fallback;
    try {
      return std::stoi(it->second);
    } catch (const std::exception&) {
      throw ConfigError(fmt::format("{}: columns.{}: expected a column number, got '{}'",
                                    spec.path.string(), role, it->second));
    }
  };
  TaggedSentence current;
  const auto finish = [&] {
    if (!current.words.empty()) {
      current.id = std::to_string(out.size());
      current.document = document;
      out.push_back(std::move(current));
    }
    current = TaggedSentence();
  };
  for (const auto& line : split_lines(file.text)) {
    const auto fields = split_fields(line.text);
    if (fields.empty()) {
      finish();
      continue;
    }
    if (fields[0] == "-DOCSTART-") {
      finish();
      if (any_docstart || !out.empty()) ++document;
      any_docstart = true;
      continue;
    }
    if (num_columns == 0) {
      num_columns = fields.size();
      token_column = parse_index("token", 0);
      tag_column = parse_index("tag", num_columns > 1 ? static_cast<int>(num_columns) - 1 : -1);
      if (token_column < 0 || token_column >= static_cast<int>(num_columns) ||
          tag_column >= static_cast<int>(num_columns))
        throw ConfigError(
            fmt::format("{}:{}: columns token={} tag={} do not exist in a line of {} columns",
                        file.name, line.number, token_column, tag_column, num_columns));
    }
    if (fields.size() != num_columns)
      throw DataError(fmt::format("{}:{}: expected {} columns (as the first line), got {}",
                                  file.name, line.number, num_columns, fields.size()));
    if (current.words.empty()) current.where = fmt::format("{}:{}", file.name, line.number);
    current.words.emplace_back(fields[static_cast<size_t>(token_column)]);
    if (tag_column >= 0) current.tags.emplace_back(fields[static_cast<size_t>(tag_column)]);
  }
  finish();
  apply_limit(out, spec.limit);
  return out;
}

namespace {

/// read_tagged's JSON lines.
std::vector<TaggedSentence> read_tagged_jsonl(const DataSpec& spec) {
  check_column_roles(spec, {"token", "tag", "id"});
  const auto file = read_text_file(spec.path);
  // The field that holds `role` in `j`: the mapped one, else the first default present ("").
  const auto key_of = [&](const json& j, const char* role,
                          std::initializer_list<const char*> defaults) -> std::string {
    if (const auto it = spec.columns.find(role); it != spec.columns.end()) return it->second;
    for (const char* d : defaults)
      if (j.contains(d)) return d;
    return "";
  };
  std::vector<TaggedSentence> out;
  for_each_json_line(file, [&](json&& j, const Line&, const std::string& where) {
    const auto tokens_key = key_of(j, "token", {"tokens", "words"});
    const auto tags_key = key_of(j, "tag", {"ner_tags", "tags"});
    const auto id_key = key_of(j, "id", {"id"});
    for (const auto& [key, value] : j.items()) {
      if (key == tokens_key || key == tags_key || key == id_key) continue;
      if (key == "pos_tags" || key == "chunk_tags") continue;  // HF's CoNLL-2003 export
      throw DataError(fmt::format(
          "{}: unknown field '{}' (words: tokens | words; tags: ner_tags | tags; id); map it "
          "with columns: {{tag: {}}} (on the command line --column tag={}) or remove it",
          where, key, key, key));
    }
    const json* tokens = j.contains(tokens_key) ? &j.at(tokens_key) : nullptr;
    const json* tags = j.contains(tags_key) ? &j.at(tags_key) : nullptr;
    const json* id = j.contains(id_key) ? &j.at(id_key) : nullptr;
    if (!tokens)
      throw DataError(fmt::format("{}: no words (a list under {})", where,
                                  spec.columns.count("token")
                                      ? "'" + spec.columns.at("token") + "'"
                                      : std::string("\"tokens\" or \"words\"")));
    TaggedSentence s;
    s.where = where;
    s.id = !id || id->is_null() ? std::to_string(out.size())
                                : (id->is_string() ? id->get<std::string>() : id->dump());
    if (!tokens->is_array()) throw DataError(where + ": the words must be a list of strings");
    for (const auto& t : *tokens) {
      if (!t.is_string())
        throw DataError(
            fmt::format("{}: word {} is not a string: {}", where, s.words.size() + 1, t.dump()));
      s.words.push_back(t.get<std::string>());
    }
    if (tags && !tags->is_null()) {
      if (!tags->is_array()) throw DataError(where + ": the tags must be a list");
      for (const auto& t : *tags) {
        if (t.is_string())
          s.tags.push_back(t.get<std::string>());
        else if (t.is_number_integer())
          s.tags.push_back(t.dump());  // a class id: its decimal text, as run_ner.py's labels
        else
          throw DataError(fmt::format("{}: tag {} is neither a name nor an integer: {}", where,
                                      s.tags.size() + 1, t.dump()));
      }
      if (s.tags.size() != s.words.size())
        throw DataError(
            fmt::format("{}: {} words but {} tags", where, s.words.size(), s.tags.size()));
    }
    if (s.words.empty()) return;  // no word: no sentence, as a blank line in CoNLL
    // Tags on some lines only would make a dev file silently unscored (or a training file fail
    // far from the cause): every sentence has them or none does, as CoNLL's fixed columns.
    if (!out.empty() && out.front().tags.empty() != s.tags.empty()) {
      const auto& first = out.front();
      throw DataError(fmt::format(
          "{}: this sentence has {} but the first one ({}) has {}; every line has tags or none "
          "does",
          where, s.tags.empty() ? "no tags" : "tags", first.where,
          first.tags.empty() ? "none" : "them"));
    }
    out.push_back(std::move(s));
  });
  apply_limit(out, spec.limit);
  return out;
}

}  // namespace

std::vector<TaggedSentence> read_tagged(const DataSpec& spec) {
  auto format = spec.format;
  if (format == DataFormat::kAuto) {
    const auto ext = spec.path.extension().string();
    format = ext == ".jsonl" || ext == ".json" ? DataFormat::kJsonl : DataFormat::kConll;
  }
  switch (format) {
    case DataFormat::kConll:
    case DataFormat::kTsv:  // CoNLL columns separated by tabs
      return read_conll(spec);
    case DataFormat::kJsonl:
      return read_tagged_jsonl(spec);
    default:
      throw ConfigError(fmt::format(
          "{}: format {}: token classification reads CoNLL columns (conll) or JSON lines "
          "(jsonl)",
          spec.path.string(), enum_name(format)));
  }
}

}  // namespace bert::data
