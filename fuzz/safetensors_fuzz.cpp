// A safetensors file: header length, JSON header, tensor data (bert/checkpoint/safetensors.h).
#include "bert/checkpoint/safetensors.h"
#include "bert/common/error.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const bert::fuzz::InputFile file(data, size);
  try {
    const bert::SafetensorsReader reader(file.path());
    const auto tensors = reader.read_all();
    (void)tensors;
  } catch (const bert::Error&) {  // a refusal with a message: the expected outcome
  }
  return 0;
}
