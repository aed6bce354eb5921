// Two parsers of raw user input that reach no model: an embeddings `.npy` file (`bertft similar
// --index`) and the word splitter of `predict --text` on an NER model. BERTFT_FUZZ_RAW picks one.
#include "bert/common/error.h"
#include "fuzz/fuzz_input.h"
#include "recipes/runner/embed.h"
#include "recipes/runner/export.h"

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
    for (const auto& word : bert::recipes::split_words(text)) {
      if (word.start < previous_end || word.end <= word.start || word.text.empty())
        __builtin_trap();  // words are non-empty, in order, without overlap
      previous_end = word.end;
    }
  } catch (const bert::Error&) {
  }
#endif
  return 0;
}
