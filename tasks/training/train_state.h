#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace bert::tasks {

/// Where a run stands between two optimizer steps: enough, with the weights, the optimizer and
/// the RNG, to continue it exactly. visit() is its one field list; it drives state.json both
/// ways.
struct TrainState {
  int64_t step = 0;         ///< optimizer steps done
  int64_t epoch = 0;        ///< epoch of the next batch
  int64_t next_batch = 0;   ///< index of the next batch in that epoch's order
  int64_t total_steps = 0;  ///< of the whole run (a resumed run must plan the same)
  int64_t train_features = 0;
  bool have_best = false;
  int64_t best_step = 0;
  std::map<std::string, double> best_metrics;
  std::string main_metric;
  int64_t evaluations_without_gain = 0;
  std::vector<double> losses;  ///< mean training loss per logged interval
  double loss_scale = 0;       ///< fp16 only: LossScaler's state
  int64_t scale_clean_steps = 0;
  std::string precision;  ///< what the run trains in (a resumed `auto` run keeps it); "" = unknown

  template <class Self, class Visitor>
  static void visit(Self& self, Visitor&& field) {
    field("step", self.step);
    field("epoch", self.epoch);
    field("next_batch", self.next_batch);
    field("total_steps", self.total_steps);
    field("train_features", self.train_features);
    field("have_best", self.have_best);
    field("best_step", self.best_step);
    field("best_metrics", self.best_metrics);
    field("main_metric", self.main_metric);
    field("evaluations_without_gain", self.evaluations_without_gain);
    field("losses", self.losses);
    field("loss_scale", self.loss_scale);
    field("scale_clean_steps", self.scale_clean_steps);
    field("precision", self.precision);
  }

  nlohmann::json to_json() const;
  /// Fields absent from `j` keep their defaults; a field of the wrong type is a
  /// CheckpointError naming `source`.
  static TrainState from_json(const nlohmann::json& j, const std::string& source);
};

/// The states of the default generators of `device` (dropout draws from them): CPU, then CUDA.
std::vector<torch::Tensor> generator_states(const torch::Device& device);
/// Sets the default generators of `device` from generator_states()'s output.
void set_generator_states(const std::vector<torch::Tensor>& states, const torch::Device& device);

/// Seeds the default generators of a rank > 0 of a data-parallel run (dropout differs between
/// ranks, reproducibly): from the run's seed, the rank and the step it starts at. Rank 0 keeps
/// the stream a single-process run has.
void seed_rank_generators(int64_t seed, int rank, int64_t step, const torch::Device& device);

/// Writes a resumable checkpoint into the new directory `dir`: state.json, the model's weights,
/// the optimizer's state and `rng`: generator_states() of every rank, rank after rank.
void save_checkpoint(const std::filesystem::path& dir,
                     const TrainState& state,
                     const torch::nn::Module& model,
                     torch::optim::Optimizer& optimizer,
                     const std::vector<torch::Tensor>& rng);

/// What load_checkpoint() restored besides the model and optimizer.
struct LoadedCheckpoint {
  TrainState state;
  std::vector<torch::Tensor> rng;  ///< generator states of every rank that saved it
};

/// Restores what save_checkpoint() wrote into `model` and `optimizer`; returns the state and the
/// generator states (the caller picks its own). Throws CheckpointError naming the file that is
/// missing or damaged.
LoadedCheckpoint load_checkpoint(const std::filesystem::path& dir,
                                 torch::nn::Module& model,
                                 torch::optim::Optimizer& optimizer);

}  // namespace bert::tasks
