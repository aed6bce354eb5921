// Two parsers of raw user input that reach no model: an embeddings `.npy` file (`bertft similar
// --index`) and `predict --text` on an NER model short of the model: the word splitter, the
// sub-tokens of the words and every aggregation strategy over made-up probabilities.
// BERTFT_FUZZ_RAW picks one.
#include "bert/common/error.h"
#include "bert/tokenizer/wordpiece.h"
#include "fuzz/fuzz_input.h"
#include "recipes/runner/embed.h"
#include "recipes/runner/export.h"

namespace {

/// An uncased WordPiece tokenizer of a few letters and pieces (most fuzz words become [UNK]).
const bert::tok::Tokenizer& tokenizer() {
  static const auto t = [] {
    bert::tok::WordPieceOptions options;
    options.normalizer.lowercase = true;
    options.normalizer.strip_accents = true;
    return std::make_unique<bert::tok::WordPieceTokenizer>(
        std::vector<std::string>{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "##a",
                                 "##b", "ab", ".", "'", "##s", "s"},
        options);
  }();
  return *t;
}

/// Entities must lie in the text, in order, each non-empty, with a score that is a probability.
void check_entities(const nlohmann::json& entities, int64_t length) {
  int64_t previous_end = 0;
  for (const auto& e : entities) {
    const auto start = e["start"].get<int64_t>(), end = e["end"].get<int64_t>();
    const auto score = e["score"].get<double>();
    if (start < previous_end || end <= start || end > length || !(score >= 0 && score <= 1))
      __builtin_trap();
    previous_end = end;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
#if BERTFT_FUZZ_RAW_NPY
  const bert::fuzz::InputFile file(data, size);
  try {
    const auto vectors = bert::recipes::read_npy(file.path());
    if (vectors.dim() != 2 || vectors.numel() * 4 > static_cast<int64_t>(size))
      __builtin_trap();  // a shape the data cannot hold was accepted
  } catch (const bert::Error&) {
  }
#else
  const std::string text(bert::fuzz::as_text(data, size));
  try {
    int64_t previous_end = 0;
    const auto words = bert::recipes::split_words(text);
    for (const auto& word : words) {
      if (word.start < previous_end || word.end <= word.start || word.text.empty())
        __builtin_trap();  // words are non-empty, in order, without overlap
      previous_end = word.end;
    }
    // Three labels; each sub-token's probabilities from the input's bytes.
    auto tokens = bert::recipes::raw_text_tokens(words, tokenizer());
    for (size_t k = 0; k < tokens.size(); ++k) {
      const auto byte = [&](size_t i) { return static_cast<float>(data[(k * 3 + i) % size]) + 1; };
      const float sum = byte(0) + byte(1) + byte(2);
      tokens[k].probabilities = {byte(0) / sum, byte(1) / sum, byte(2) / sum};
    }
    for (const auto strategy : {bert::tasks::Aggregation::kNone, bert::tasks::Aggregation::kSimple,
                                bert::tasks::Aggregation::kFirst,
                                bert::tasks::Aggregation::kAverage, bert::tasks::Aggregation::kMax})
      check_entities(
          bert::tasks::aggregate_entities(tokens, {"O", "B-X", "I-X"}, strategy, "O", tokenizer()),
          previous_end);
  } catch (const bert::Error&) {
  }
#endif
  return 0;
}
