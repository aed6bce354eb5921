#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace bert::data {

/// One document of a pre-training corpus: its sentences (or lines) in order.
struct RawDocument {
  std::vector<std::string> sentences;
  std::string where;  ///< "file:line" of its first sentence
};

/// Reads a pre-training corpus as Google's BERT expects it: one sentence per line, a blank line
/// between documents; or, for `.jsonl` files, one document per line as {"text": "..."} whose
/// lines are its sentences. Empty documents are dropped. Throws DataError naming file:line
/// (invalid UTF-8, bad JSON, a JSON line without a string "text").
std::vector<RawDocument> read_corpus(const std::filesystem::path& path);

}  // namespace bert::data
