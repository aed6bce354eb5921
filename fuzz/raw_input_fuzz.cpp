// Two parsers of raw user input that reach no model: an embeddings `.npy` file (`bertft similar
// --index`) and `predict --text` on an NER model short of the model: the text's sub-tokens and
// words (text_subtokens; the first byte picks WordPiece, whose "##" marks sub-words, or byte-level
// BPE, grouped by HF's space heuristic) and every aggregation strategy over made-up
// probabilities. BERTFT_FUZZ_RAW_NPY picks the first.
#include "bert/common/error.h"
#include "bert/tokenizer/byte_level_bpe.h"
#include "bert/tokenizer/unicode.h"
#include "bert/tokenizer/wordpiece.h"
#include "fuzz/fuzz_input.h"
#include "recipes/runner/embed.h"
#include "tasks/token_classification/entities.h"

namespace {

/// An uncased WordPiece tokenizer of a few letters and pieces (most fuzz words become [UNK]), or
/// RoBERTa's byte-level BPE with the 256 byte symbols and a few merges.
[[maybe_unused]] const bert::tok::Tokenizer& tokenizer(bool bpe) {
  static const auto wordpiece = [] {
    bert::tok::WordPieceOptions options;
    options.normalizer.lowercase = true;
    options.normalizer.strip_accents = true;
    return std::make_unique<bert::tok::WordPieceTokenizer>(
        std::vector<std::string>{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "##a",
                                 "##b", "ab", ".", "'", "##s", "s"},
        options);
  }();
  static const auto byte_level = [] {
    using bert::tok::byte_symbol;
    std::vector<std::string> vocab = {"<s>", "<pad>", "</s>", "<unk>"};
    for (int b = 0; b < 256; ++b) vocab.push_back(byte_symbol(static_cast<unsigned char>(b)));
    const std::vector<std::pair<std::string, std::string>> merges = {
        {byte_symbol(' '), "a"}, {"a", "b"}, {"'", "s"}};
    for (const auto& [a, b] : merges) vocab.push_back(a + b);
    vocab.push_back("<mask>");
    return std::make_unique<bert::tok::ByteLevelBpeTokenizer>(
        vocab, merges, bert::tok::ByteLevelBpeTokenizer::Options());
  }();
  if (bpe) return *byte_level;
  return *wordpiece;
}

/// Entities must lie in the text, in order of their starts, with a score that is a probability
/// (byte-level BPE's tokens of one character share its span, as HF's offsets give them, so
/// neighbours may overlap; a token of spaces alone has an empty span after HF's trimming).
[[maybe_unused]] void check_entities(const nlohmann::json& entities, int64_t length) {
  int64_t previous_start = 0;
  for (const auto& e : entities) {
    const auto start = e["start"].get<int64_t>(), end = e["end"].get<int64_t>();
    const auto score = e["score"].get<double>();
    if (start < previous_start || end < start || end > length || !(score >= 0 && score <= 1))
      __builtin_trap();
    previous_start = start;
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
  if (size == 0) return 0;
  const auto& tok = tokenizer(data[0] & 1);
  const std::string text(bert::fuzz::as_text(data + 1, size - 1));
  try {
    auto tokens = bert::tasks::text_subtokens(text, tok);
    const auto length = bert::tok::unicode::code_point_count(text);
    for (size_t k = 0; k < tokens.size(); ++k) {
      const auto& t = tokens[k];
      // Sub-tokens in order of their starts, inside the text; words numbered from 0, one after
      // another.
      const bool word_ok =
          k == 0 ? t.word == 0 : t.word == tokens[k - 1].word || t.word == tokens[k - 1].word + 1;
      if ((k > 0 && t.start < tokens[k - 1].start) || t.end < t.start || t.end > length ||
          t.index != static_cast<int64_t>(k) + 1 || !word_ok)
        __builtin_trap();
    }
    // Three labels; each sub-token's probabilities from the input's bytes.
    for (size_t k = 0; k < tokens.size(); ++k) {
      const auto byte = [&](size_t i) { return static_cast<float>(data[(k * 3 + i) % size]) + 1; };
      const float sum = byte(0) + byte(1) + byte(2);
      tokens[k].probabilities = {byte(0) / sum, byte(1) / sum, byte(2) / sum};
    }
    for (const auto strategy : {bert::tasks::Aggregation::kNone, bert::tasks::Aggregation::kSimple,
                                bert::tasks::Aggregation::kFirst,
                                bert::tasks::Aggregation::kAverage, bert::tasks::Aggregation::kMax})
      check_entities(
          bert::tasks::aggregate_entities(tokens, {"O", "B-X", "I-X"}, strategy, "O", tok), length);
  } catch (const bert::Error&) {
  }
#endif
  return 0;
}
