#include "tasks/training/callbacks.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

#include "bert/checkpoint/load.h"
#include "bert/checkpoint/pretrained_dir.h"
#include "bert/checkpoint/safetensors.h"
#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/log.h"

namespace bert::tasks {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

TensorMap cpu_copy(const torch::nn::Module& model) {
  TensorMap out;
  for (const auto& [name, tensor] : state_dict(model))
    out[name] = tensor.detach().to(torch::kCPU).clone();
  return out;
}

}  // namespace

// ---- ProgressBar ---------------------------------------------------------------------------

ProgressBar::ProgressBar() : tty_(isatty(fileno(stderr)) != 0 && log::enabled(log::Level::kInfo)) {}

void ProgressBar::on_step_end(TrainContext& run, const StepStats& s, TrainControl&) {
  if (!tty_) return;
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(kWidth * static_cast<double>(s.step) /
                                      static_cast<double>(std::max<int64_t>(1, run.total_steps)));
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  fmt::print(stderr, "\r[{}] {}/{} ep {:.2f} loss {:.4f} lr {:.2e} {:.1f} ex/s eta {}  ", bar,
             s.step, run.total_steps, s.epoch, s.loss, s.learning_rate, s.examples_per_second,
             log::format_duration(s.eta_seconds));
  std::fflush(stderr);
  open_ = true;
}

void ProgressBar::on_log(TrainContext& run, const StepStats& s) {
  if (tty_) return;
  log::info(
      "[train] step {:>6}/{} | epoch {:5.2f} | loss {:.4f} | lr {:.2e} | {:.1f} ex/s | eta {:.0f}s",
      s.step, run.total_steps, s.epoch, s.loss, s.learning_rate, s.examples_per_second,
      s.eta_seconds);
}

void ProgressBar::on_evaluate(TrainContext& run,
                              const Evaluation& ev,
                              bool improved,
                              TrainControl&) {
  finish_line();
  log::info("[eval] step {} | {} {:.4f}{}", run.state.step, ev.main_metric, ev.main(),
            improved ? " (best)" : "");
}

void ProgressBar::finish_line() {
  if (!open_) return;
  fmt::print(stderr, "\n");
  open_ = false;
}

// ---- MetricsLog ----------------------------------------------------------------------------

void MetricsLog::on_train_begin(TrainContext& run, TrainControl&) {
  if (run.state.step == 0 || !fs::exists(path_)) return;
  std::istringstream in(read_file(path_));
  std::string kept, line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      if (json::parse(line).value("step", int64_t{0}) > run.state.step) continue;
    } catch (const json::exception&) {
      continue;  // a line cut short by the interruption
    }
    kept += line + '\n';
  }
  write_file_atomic(path_, kept);
}

void MetricsLog::on_log(TrainContext&, const StepStats& s) {
  append({{"step", s.step},
          {"split", "train"},
          {"loss", s.loss},
          {"learning_rate", s.learning_rate},
          {"examples_per_second", s.examples_per_second}});
}

void MetricsLog::on_evaluate(TrainContext& run,
                             const Evaluation& ev,
                             bool improved,
                             TrainControl&) {
  append({{"step", run.state.step},
          {"epoch", run.epoch_position()},
          {"split", "dev"},
          {"is_best", improved},
          {"metrics", json(ev.metrics)}});
}

void MetricsLog::append(const json& record) const {
  fs::create_directories(path_.parent_path());
  std::ofstream out(path_, std::ios::app);
  out << record.dump() << '\n';
}

// ---- Checkpoints ---------------------------------------------------------------------------

fs::path Checkpoints::latest() const {
  const auto pointer = dir_.latest_pointer();
  if (!fs::exists(pointer)) return {};
  auto name = read_file(pointer);
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  const auto checkpoint = dir_.checkpoints() / name;
  if (!fs::exists(CheckpointFiles{checkpoint}.state()))
    throw CheckpointError(pointer.string() + ": names a missing checkpoint " + checkpoint.string());
  return checkpoint;
}

void Checkpoints::on_train_begin(TrainContext& run, TrainControl&) {
  const auto checkpoint = latest();
  if (checkpoint.empty()) return;
  auto loaded = load_checkpoint(checkpoint, *run.model, run.optimizer);
  auto& state = loaded.state;
  if (state.total_steps != run.state.total_steps ||
      state.train_features != run.state.train_features)
    throw CheckpointError(fmt::format(
        "{}: was written by a run with {} steps over {} features, this one has {} over {}; "
        "use a fresh output directory",
        checkpoint.string(), state.total_steps, state.train_features, run.state.total_steps,
        run.state.train_features));
  // Generator states: each rank its own when the world size is the same; otherwise rank 0
  // takes the first and the others start fresh streams from the seed (position kept in global
  // batches, so any world size can resume).
  const size_t per_rank = generator_states(run.device).size();
  if (loaded.rng.empty() || loaded.rng.size() % per_rank != 0)
    throw CheckpointError(CheckpointFiles{checkpoint}.rng().string() +
                          ": RNG state of another device");
  const auto saved_ranks = static_cast<int>(loaded.rng.size() / per_rank);
  const auto block = saved_ranks == run.world_size() ? run.rank() : 0;
  if (saved_ranks == run.world_size() || run.rank() == 0) {
    set_generator_states({loaded.rng.begin() + static_cast<long>(block * per_rank),
                          loaded.rng.begin() + static_cast<long>((block + 1) * per_rank)},
                         run.device);
  } else {
    seed_rank_generators(run.options.seed, run.rank(), state.step, run.device);
  }
  run.state = std::move(state);
  if (run.state.loss_scale > 0)
    run.scaler.restore(run.state.loss_scale, run.state.scale_clean_steps);
  run.result.resumed_from = run.state.step;
  log::info(
      "[train] resumed from {} (step {}/{}{})", checkpoint.string(), run.state.step,
      run.total_steps,
      saved_ranks == run.world_size()
          ? ""
          : fmt::format("; saved by {} process(es), resumed by {}", saved_ranks, run.world_size()));
}

void Checkpoints::on_save(TrainContext& run, TrainControl&) {
  run.state.loss_scale = run.scaler.scale();
  run.state.scale_clean_steps = run.scaler.clean_steps();
  // Every rank's generator states, gathered on every rank (one collective per generator).
  std::vector<torch::Tensor> rng;
  const auto mine = generator_states(run.device);
  if (run.group) {
    std::vector<std::vector<torch::Tensor>> by_generator;
    for (const auto& state : mine) by_generator.push_back(run.group->all_gather(state));
    for (int r = 0; r < run.world_size(); ++r)
      for (const auto& states : by_generator) rng.push_back(states[static_cast<size_t>(r)]);
  } else {
    rng = mine;
  }
  if (!run.lead()) return;  // rank 0 writes
  const auto target = dir_.checkpoint(run.state.step);
  const auto tmp = target.parent_path() / (".tmp-" + target.filename().string());
  remove_tree(tmp);
  save_checkpoint(tmp, run.state, *run.model, run.optimizer, rng);
  remove_tree(target);
  fs::rename(tmp, target);
  write_file_atomic(dir_.latest_pointer(), target.filename().string() + "\n");
  // Keep the newest keep_ of them.
  std::vector<int64_t> steps;
  for (const auto& entry : fs::directory_iterator(dir_.checkpoints()))
    if (const auto step = TrainingDir::checkpoint_step(entry.path().filename().string());
        step && entry.is_directory())
      steps.push_back(*step);
  std::sort(steps.begin(), steps.end());
  const auto keep = static_cast<size_t>(std::max<int64_t>(1, keep_));
  for (size_t i = 0; i + keep < steps.size(); ++i) remove_tree(dir_.checkpoint(steps[i]));
}

// ---- BestWeights ---------------------------------------------------------------------------

void BestWeights::on_train_begin(TrainContext& run, TrainControl&) {
  if (run.state.have_best && !file_.empty()) best_ = read_weights(file_);
}

void BestWeights::on_evaluate(TrainContext& run, const Evaluation&, bool improved, TrainControl&) {
  if (!improved) return;
  best_ = cpu_copy(*run.model);
  if (write_ && !file_.empty()) save_safetensors(file_, best_);
}

void BestWeights::on_train_end(TrainContext& run) {
  if (run.result.interrupted) return;
  if (run.state.have_best) {
    TORCH_CHECK(!best_.empty(), "fit: the best weights of step ", run.state.best_step,
                " were not kept");
    load_state_dict(*run.model, best_, "best weights");
  } else if (write_ && !file_.empty()) {
    save_safetensors(file_, state_dict(*run.model));
  }
}

// ---- EarlyStopping -------------------------------------------------------------------------

bool EarlyStopping::exhausted(TrainContext& run, TrainControl& control) const {
  if (patience_ <= 0 || run.state.evaluations_without_gain < patience_) return false;
  control.stop = true;
  run.result.stopped_early = true;
  log::info("[train] early stopping: {} evaluations without improvement",
            run.state.evaluations_without_gain);
  return true;
}

void EarlyStopping::on_train_begin(TrainContext& run, TrainControl& control) {
  exhausted(run, control);  // early stopping can have ended the run whose checkpoint this is
}

void EarlyStopping::on_evaluate(TrainContext& run, const Evaluation&, bool, TrainControl& control) {
  exhausted(run, control);
}

// ---- InterruptHook -------------------------------------------------------------------------

void InterruptHook::on_save(TrainContext& run, TrainControl& control) {
  if (!should_stop_ || !should_stop_(run.state.step)) return;
  control.stop = true;
  run.result.interrupted = true;
}

}  // namespace bert::tasks
