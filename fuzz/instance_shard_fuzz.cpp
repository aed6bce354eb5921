// A pre-training instance shard (tasks/pretraining/instances.h): the streaming reader, then the
// in-memory decoder the trainer runs over memory-mapped shards, record after record.
#include "bert/common/error.h"
#include "fuzz/fuzz_input.h"
#include "tasks/pretraining/instances.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const bert::fuzz::InputFile file(data, size);
  bert::tasks::PretrainingInstance instance;
  try {
    bert::tasks::InstanceReader reader(file.path());
    while (reader.next(instance)) {
    }
  } catch (const bert::Error&) {  // a refusal with a message: the expected outcome
  }
  const char* bytes = reinterpret_cast<const char*>(data);
  try {
    if (bert::tasks::shard_instance_count(bytes, size, file.path()) < 0) return 0;
  } catch (const bert::Error&) {
    return 0;
  }
  for (size_t at = bert::tasks::kShardHeaderBytes; at < size;) {
    const size_t used = bert::tasks::decode_instance(bytes + at, size - at, &instance);
    if (used == 0) break;
    at += used;
  }
  return 0;
}
