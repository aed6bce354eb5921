// `bertft score`'s prediction readers: one label or JSON object per line (classification,
// multiple choice), and SQuAD's {id: answer} / {id: no-answer probability} JSON objects.
#include "bert/common/error.h"
#include "data/text_file.h"
#include "fuzz/fuzz_input.h"
#include "tasks/scoring.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const bert::fuzz::InputFile file(data, size);
  try {
    const auto predictions = bert::tasks::read_line_predictions(file.path());
    std::vector<std::string> ids, wheres;
    for (size_t i = 0; i < predictions.size(); ++i) {
      ids.push_back(std::to_string(i));
      wheres.push_back("example " + std::to_string(i));
    }
    (void)bert::tasks::align_predictions(ids, wheres, predictions, file.path());
  } catch (const bert::Error&) {
  }
  try {
    const auto j = bert::data::read_json_file(file.path());
    (void)j.dump();
  } catch (const bert::Error&) {
  }
  return 0;
}
