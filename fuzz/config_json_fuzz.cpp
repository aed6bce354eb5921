// config.json: read, validated, written back (every key kept), as `bertft inspect` does.
#include "bert/common/error.h"
#include "bert/model/bert_config.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const bert::fuzz::InputFile file(data, size);
  try {
    const auto config = bert::BertConfig::from_file(file.path());
    const auto text = config.to_json().dump();
    (void)config.encoder_parameters();
    (void)text;
  } catch (const bert::Error&) {
  }
  return 0;
}
