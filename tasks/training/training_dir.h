#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace bert::tasks {

/// The layout of the directory a Trainer writes (a trial directory of a sweep, or `bertft train
/// --out`): the one place that spells its file names. An empty TrainingDir writes nothing.
class TrainingDir {
 public:
  TrainingDir() = default;
  explicit TrainingDir(std::filesystem::path root) : root_(std::move(root)) {}

  bool empty() const { return root_.empty(); }
  const std::filesystem::path& root() const { return root_; }

  /// metrics.jsonl: one JSON object per logged interval ("split": "train") and per evaluation
  /// ("split": "dev").
  std::filesystem::path metrics_log() const;
  /// best/model.safetensors: the best weights so far (the last ones when there is no dev set).
  std::filesystem::path best_weights() const;
  /// checkpoints/: resumable checkpoints, one directory each (checkpoint()).
  std::filesystem::path checkpoints() const;
  /// checkpoints/latest: names the newest complete checkpoint.
  std::filesystem::path latest_pointer() const;
  /// checkpoints/step-NNNNNNNN for optimizer step `step`.
  std::filesystem::path checkpoint(int64_t step) const;
  /// The step of a checkpoint directory's name, or nullopt for other names.
  static std::optional<int64_t> checkpoint_step(const std::string& name);

 private:
  std::filesystem::path root_;
};

/// The files of one resumable checkpoint directory.
struct CheckpointFiles {
  std::filesystem::path dir;
  std::filesystem::path weights() const;    ///< model.safetensors
  std::filesystem::path optimizer() const;  ///< optimizer.pt (torch::serialize)
  std::filesystem::path rng() const;        ///< rng.pt: generator states (CPU, then CUDA)
  std::filesystem::path state() const;      ///< state.json: TrainState
};

}  // namespace bert::tasks
