#include "tasks/training/training_dir.h"

#include <fmt/format.h>

#include "bert/checkpoint/pretrained_dir.h"

namespace bert::tasks {
namespace {

constexpr const char* kStepPrefix = "step-";

}  // namespace

std::filesystem::path TrainingDir::metrics_log() const {
  return root_ / "metrics.jsonl";
}

std::filesystem::path TrainingDir::best_weights() const {
  return root_ / "best" / kSafetensorsWeightsFile;
}

std::filesystem::path TrainingDir::checkpoints() const {
  return root_ / "checkpoints";
}

std::filesystem::path TrainingDir::latest_pointer() const {
  return checkpoints() / "latest";
}

std::filesystem::path TrainingDir::checkpoint(int64_t step) const {
  return checkpoints() / fmt::format("{}{:08d}", kStepPrefix, step);
}

std::optional<int64_t> TrainingDir::checkpoint_step(const std::string& name) {
  const std::string prefix = kStepPrefix;
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return {};
  int64_t step = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return {};
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

std::filesystem::path CheckpointFiles::weights() const {
  return dir / kSafetensorsWeightsFile;
}
std::filesystem::path CheckpointFiles::optimizer() const {
  return dir / "optimizer.pt";
}
std::filesystem::path CheckpointFiles::rng() const {
  return dir / "rng.pt";
}
std::filesystem::path CheckpointFiles::state() const {
  return dir / "state.json";
}

}  // namespace bert::tasks
