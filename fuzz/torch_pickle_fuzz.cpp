// The restricted unpickler: the input is data.pkl of a well-formed torch.save zip whose
// storages data/0 (64 bytes) and data/1 (8 bytes) exist, so that mutations reach the pickle.
#include <caffe2/serialize/inline_container.h>

#include <cstring>

#include "bert/checkpoint/torch_pickle.h"
#include "bert/common/error.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string zip;
  {
    caffe2::serialize::PyTorchStreamWriter writer([&zip](const void* bytes, size_t n) {
      zip.append(static_cast<const char*>(bytes), n);
      return n;
    });
    writer.writeRecord("data.pkl", data, size);
    const char storage[64] = {1, 2, 3, 4, 5, 6, 7, 8};
    writer.writeRecord("data/0", storage, 64);
    writer.writeRecord("data/1", storage, 8);
    writer.writeEndOfFile();
  }
  const bert::fuzz::InputFile file(reinterpret_cast<const uint8_t*>(zip.data()), zip.size());
  try {
    const auto tensors = bert::load_torch_state_dict(file.path());
    (void)tensors;
  } catch (const bert::Error&) {
  }
  return 0;
}
