// A pre-training instance shard (tasks/pretraining/instances.h): the streaming reader, then the
// trainer's own path over it (ShardFeatureSet: memory-mapped, indexed, every instance decoded).
#include "bert/common/error.h"
#include "fuzz/fuzz_input.h"
#include "tasks/pretraining/adapter.h"
#include "tasks/pretraining/instances.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const bert::fuzz::InputFile file(data, size);
  try {
    bert::tasks::InstanceReader reader(file.path());
    bert::tasks::PretrainingInstance instance;
    while (reader.next(instance)) {
    }
  } catch (const bert::Error&) {  // a refusal with a message: the expected outcome
  }
  try {
    bert::tasks::ShardFeatureSet set;
    set.open({file.path()});
    for (size_t i = 0; i < set.size(); ++i) (void)set.instance(i);
  } catch (const bert::Error&) {
  }
  return 0;
}
