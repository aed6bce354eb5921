// A whole pytorch_model.bin: the zip container (central directory, records) and its pickle.
#include "bert/checkpoint/torch_pickle.h"
#include "bert/common/error.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const bert::fuzz::InputFile file(data, size);
  try {
    const auto tensors = bert::load_torch_state_dict(file.path());
    (void)tensors;
  } catch (const bert::Error&) {
  }
  return 0;
}
