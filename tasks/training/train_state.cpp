#include "tasks/training/train_state.h"

#include <fmt/format.h>

#include <mutex>

#include "bert/checkpoint/load.h"
#include "bert/checkpoint/pretrained_dir.h"
#include "bert/checkpoint/safetensors.h"
#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/json_util.h"
#include "tasks/training/training_dir.h"

namespace bert::tasks {
namespace {

using json = nlohmann::json;

/// The default generators whose state a checkpoint keeps (dropout draws from them).
std::vector<at::Generator> generators(const torch::Device& device) {
  std::vector<at::Generator> out = {at::detail::getDefaultCPUGenerator()};
  if (device.is_cuda()) out.push_back(at::globalContext().defaultGenerator(device));
  return out;
}

}  // namespace

json TrainState::to_json() const {
  json j = json::object();
  visit(*this, [&](const char* name, const auto& value) { j[name] = value; });
  return j;
}

TrainState TrainState::from_json(const json& j, const std::string& source) {
  if (!j.is_object() || !j.contains("step"))
    throw CheckpointError(source + ": not a training state (no \"step\")");
  TrainState state;
  visit(state, [&](const char* name, auto& value) {
    if (!j.contains(name)) return;
    try {
      j.at(name).get_to(value);
    } catch (const json::exception& e) {
      throw CheckpointError(fmt::format("{}: \"{}\": {}", source, name, e.what()));
    }
  });
  return state;
}

std::vector<torch::Tensor> generator_states(const torch::Device& device) {
  std::vector<torch::Tensor> out;
  for (auto& g : generators(device)) out.push_back(g.get_state());
  return out;
}

void set_generator_states(const std::vector<torch::Tensor>& states, const torch::Device& device) {
  auto gens = generators(device);
  TORCH_CHECK(states.size() == gens.size(), "RNG state of another device");
  for (size_t i = 0; i < gens.size(); ++i) gens[i].set_state(states[i]);
}

void seed_rank_generators(int64_t seed, int rank, int64_t step, const torch::Device& device) {
  if (rank == 0) return;
  const auto mixed = static_cast<uint64_t>(seed) * 0x9E3779B97F4A7C15ULL +
                     static_cast<uint64_t>(rank) * 0xBF58476D1CE4E5B9ULL +
                     static_cast<uint64_t>(step) * 0x94D049BB133111EBULL;
  for (auto& g : generators(device)) {
    std::lock_guard<std::mutex> lock(g.mutex());
    g.set_current_seed(mixed);
  }
}

void save_checkpoint(const std::filesystem::path& dir,
                     const TrainState& state,
                     const torch::nn::Module& model,
                     torch::optim::Optimizer& optimizer,
                     const std::vector<torch::Tensor>& rng) {
  const CheckpointFiles files{dir};
  std::filesystem::create_directories(dir);
  save_safetensors(files.weights(), state_dict(model));
  torch::save(optimizer, files.optimizer().string());
  torch::save(rng, files.rng().string());
  write_file_atomic(files.state(), state.to_json().dump(1));
}

LoadedCheckpoint load_checkpoint(const std::filesystem::path& dir,
                                 torch::nn::Module& model,
                                 torch::optim::Optimizer& optimizer) {
  const CheckpointFiles files{dir};
  const auto state_text = read_file(files.state());
  json j;
  try {
    j = parse_json_limited(state_text);
  } catch (const json::exception& e) {
    throw CheckpointError(fmt::format("{}: {}", files.state().string(), e.what()));
  }
  LoadedCheckpoint out;
  out.state = TrainState::from_json(j, files.state().string());
  load_state_dict(model, read_weights(files.weights()), files.weights().string());
  torch::load(optimizer, files.optimizer().string());
  torch::load(out.rng, files.rng().string());
  return out;
}

}  // namespace bert::tasks
