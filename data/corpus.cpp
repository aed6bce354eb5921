#include "data/corpus.h"

#include <fmt/format.h>

#include "bert/common/error.h"
#include "bert/common/strings.h"
#include "data/text_file.h"

namespace bert::data {
std::vector<RawDocument> read_corpus(const std::filesystem::path& path) {
  const auto file = read_text_file(path);
  const bool jsonl = ends_with(path.string(), ".jsonl");
  std::vector<RawDocument> documents;
  RawDocument current;
  const auto flush = [&] {
    if (!current.sentences.empty()) documents.push_back(std::move(current));
    current = RawDocument{};
  };
  if (jsonl) {  // a document per line, its text's lines the sentences
    for_each_json_line(file, [&](nlohmann::json&& j, const Line&, const std::string& where) {
      if (!j.contains("text") || !j["text"].is_string())
        throw DataError(where + ": a corpus JSON line needs a string \"text\"");
      current.where = where;
      for (const auto& sentence : split_lines(j["text"].get<std::string>()))
        if (!is_blank(sentence.text)) current.sentences.emplace_back(sentence.text);
      flush();
    });
    return documents;
  }
  for (const auto& line : split_lines(file.text)) {  // a sentence per line, documents by blanks
    if (is_blank(line.text)) {
      flush();
      continue;
    }
    if (current.sentences.empty()) current.where = fmt::format("{}:{}", file.name, line.number);
    current.sentences.emplace_back(line.text);
  }
  flush();
  return documents;
}

}  // namespace bert::data
