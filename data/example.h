#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

/// Raw examples as the readers produce them: text, no tokens, no tensors (layer 1).
/// Every example keeps `where` ("file:line") so later stages can name it in messages.
namespace bert::data {

/// One text or text pair with an optional label (classification or regression score, kept as
/// the file's text: "1", "entailment", "3.800").
struct TextExample {
  std::string id;
  std::string text_a;
  std::optional<std::string> text_b;
  std::optional<std::string> label;  ///< absent in unlabelled (test) files
  std::string where;
};

/// A context with several candidate continuations (SWAG): each choice is encoded as the pair
/// (context, choices[i]).
struct ChoiceExample {
  std::string id;
  std::string context;
  std::vector<std::string> choices;
  std::optional<int64_t> label;  ///< index into choices
  std::string where;
};

/// A SQuAD answer: its text and where it starts in the context, in characters (Unicode code
/// points, as the official JSON counts them) and in UTF-8 bytes.
struct QaAnswer {
  std::string text;
  int64_t char_start = 0;
  int64_t byte_start = 0;
};

/// A SQuAD question over one context paragraph. v2.0 questions may be unanswerable.
struct QaExample {
  std::string id;
  std::string title;
  std::string question;
  std::string context;
  std::vector<QaAnswer> answers;  ///< all gold answers (training uses the first)
  bool is_impossible = false;
  std::string where;
};

/// One sentence of a tagged corpus (CoNLL): words and their tags, with the document it came
/// from (for document context) and its position there.
struct TaggedSentence {
  std::string id;
  std::vector<std::string> words;
  std::vector<std::string> tags;  ///< empty for untagged input
  int64_t document = 0;           ///< index of the -DOCSTART- document (0 if none)
  std::string where;              ///< "file:line" of the first word
  /// Raw text (`predict --text`), tokenized whole as HF's token-classification pipeline does
  /// (tasks/token_classification/entities.h: text_subtokens); `words` are then its words.
  std::string raw_text;
};

}  // namespace bert::data
