#include "tasks/training/trainer.h"

#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <sstream>

#include "bert/checkpoint/load.h"
#include "bert/checkpoint/pretrained_dir.h"
#include "bert/checkpoint/safetensors.h"
#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/log.h"
#include "tasks/training/loss_scaler.h"
#include "tasks/training/optimizer.h"
#include "tasks/training/schedule.h"

namespace bert {
const std::vector<std::pair<const char*, tasks::Precision>>& EnumNames<tasks::Precision>::get() {
  static const std::vector<std::pair<const char*, tasks::Precision>> names = {
      {"fp32", tasks::Precision::kFp32},
      {"bf16", tasks::Precision::kBf16},
      {"fp16", tasks::Precision::kFp16}};
  return names;
}
}  // namespace bert

namespace bert::tasks {

AutocastScope::AutocastScope(Precision precision, const torch::Device& device)
    : enabled_(precision != Precision::kFp32), cuda_(device.is_cuda()) {
  if (!enabled_) return;
  if (cuda_) {
    at::autocast::set_enabled(true);
    at::autocast::set_autocast_gpu_dtype(precision == Precision::kFp16 ? at::kHalf : at::kBFloat16);
  } else {
    at::autocast::set_cpu_enabled(true);
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
  }
}

AutocastScope::~AutocastScope() {
  if (!enabled_) return;
  at::autocast::clear_cache();
  if (cuda_) {
    at::autocast::set_enabled(false);
  } else {
    at::autocast::set_cpu_enabled(false);
  }
}

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

void append_jsonl(const std::filesystem::path& dir, const json& record) {
  if (dir.empty()) return;
  std::filesystem::create_directories(dir);
  std::ofstream out(dir / "metrics.jsonl", std::ios::app);
  out << record.dump() << '\n';
}

}  // namespace

void TrainerOptions::validate(const YamlReader& reader, ErrorList& errors) const {
  const auto positive = [&](const char* key, double value) {
    if (!(value > 0)) errors.add(fmt::format("{}: must be > 0, got {}", reader.where(key), value));
  };
  positive("epochs", static_cast<double>(epochs));
  positive("batch_size", static_cast<double>(batch_size));
  positive("eval_batch_size", static_cast<double>(eval_batch_size));
  positive("learning_rate", learning_rate);
  positive("adam_epsilon", adam_epsilon);
  positive("gradient_accumulation_steps", static_cast<double>(gradient_accumulation_steps));
  if (weight_decay < 0) errors.add(reader.where("weight_decay") + ": must be >= 0");
  if (warmup_ratio < 0 || warmup_ratio > 1)
    errors.add(reader.where("warmup_ratio") + ": must be in [0, 1]");
  if (adam_beta1 < 0 || adam_beta1 >= 1)
    errors.add(reader.where("adam_beta1") + ": must be in [0, 1)");
  if (adam_beta2 < 0 || adam_beta2 >= 1)
    errors.add(reader.where("adam_beta2") + ": must be in [0, 1)");
  if (max_grad_norm < 0) errors.add(reader.where("max_grad_norm") + ": must be >= 0");
  try {
    const torch::Device d(device);
    if (precision == Precision::kFp16 && !d.is_cuda())
      errors.add(
          fmt::format("{}: fp16 needs a CUDA device (loss-scaled half precision); on CPU use bf16",
                      reader.where("precision")));
  } catch (const std::exception&) {
    errors.add(fmt::format("{}: unknown device '{}'; expected cpu, cuda or cuda:N",
                           reader.where("device"), device));
  }
}

std::vector<std::vector<int64_t>> Trainer::epoch_batches(const FeatureSet& features,
                                                         int64_t batch_size,
                                                         uint64_t seed,
                                                         bool group_by_length) {
  std::vector<int64_t> order(features.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  if (group_by_length) {
    const size_t chunk = static_cast<size_t>(batch_size) * 50;
    for (size_t start = 0; start < order.size(); start += chunk) {
      const auto end = order.begin() + static_cast<long>(std::min(order.size(), start + chunk));
      std::stable_sort(order.begin() + static_cast<long>(start), end, [&](int64_t a, int64_t b) {
        return features.length(static_cast<size_t>(a)) > features.length(static_cast<size_t>(b));
      });
    }
  }
  std::vector<std::vector<int64_t>> batches;
  for (size_t start = 0; start < order.size(); start += static_cast<size_t>(batch_size))
    batches.emplace_back(
        order.begin() + static_cast<long>(start),
        order.begin() +
            static_cast<long>(std::min(order.size(), start + static_cast<size_t>(batch_size))));
  if (group_by_length) std::shuffle(batches.begin(), batches.end(), rng);
  return batches;
}

std::vector<torch::Tensor> Trainer::predict(const TaskAdapter& adapter,
                                            TaskModel model,
                                            const FeatureSet& features) const {
  const torch::Device device(options_.device);
  model->to(device);
  model->eval();
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> outputs(features.size());
  // Sorted by length so that each batch pads little.
  std::vector<int64_t> order(features.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return features.length(static_cast<size_t>(a)) < features.length(static_cast<size_t>(b));
  });
  for (size_t start = 0; start < order.size();
       start += static_cast<size_t>(options_.eval_batch_size)) {
    const std::vector<int64_t> indices(
        order.begin() + static_cast<long>(start),
        order.begin() + static_cast<long>(std::min(
                            order.size(), start + static_cast<size_t>(options_.eval_batch_size))));
    const auto batch = adapter.collate(features, indices).to(device);
    torch::Tensor logits;
    {
      AutocastScope autocast(options_.precision, device);
      logits = model->forward(batch);
    }
    adapter.gather(batch, logits.to(torch::kFloat), outputs);
  }
  return outputs;
}

Evaluation Trainer::evaluate(const TaskAdapter& adapter,
                             TaskModel model,
                             const FeatureSet& features) const {
  return adapter.evaluate(features, predict(adapter, model, features));
}

namespace {

namespace fs = std::filesystem;

/// Where a run stands between two optimizer steps: enough to continue it exactly.
struct TrainState {
  int64_t step = 0;
  int64_t epoch = 0;       ///< epoch of the next batch
  int64_t next_batch = 0;  ///< index of the next batch in that epoch's order
  bool have_best = false;
  int64_t best_step = 0;
  int64_t evaluations_without_gain = 0;
  json best_metrics = json::object();
  std::string main_metric;
  std::vector<double> losses;
  double loss_scale = 0;  ///< fp16 only
  int64_t scale_clean_steps = 0;
};

/// The default generators whose state a checkpoint keeps (dropout draws from them).
std::vector<at::Generator> generators(const torch::Device& device) {
  std::vector<at::Generator> out = {at::detail::getDefaultCPUGenerator()};
  if (device.is_cuda()) out.push_back(at::globalContext().defaultGenerator(device));
  return out;
}

std::string step_dir_name(int64_t step) {
  return fmt::format("step-{:08d}", step);
}

/// Newest complete checkpoint under output_dir/checkpoints (named by the `latest` pointer).
fs::path latest_checkpoint(const fs::path& output_dir) {
  const auto pointer = output_dir / "checkpoints" / "latest";
  if (output_dir.empty() || !fs::exists(pointer)) return {};
  auto name = read_file(pointer);
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  const auto dir = output_dir / "checkpoints" / name;
  if (!fs::exists(dir / "state.json"))
    throw CheckpointError(pointer.string() + ": names a missing checkpoint " + dir.string());
  return dir;
}

/// Keeps the records of metrics.jsonl up to `step` (those of the run being resumed), so that a
/// resumed run does not log steps twice.
void truncate_log(const fs::path& output_dir, int64_t step) {
  const auto path = output_dir / "metrics.jsonl";
  if (!fs::exists(path)) return;
  std::istringstream in(read_file(path));
  std::string kept, line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      if (json::parse(line).value("step", int64_t{0}) > step) continue;
    } catch (const json::exception&) {
      continue;  // a line cut short by the interruption
    }
    kept += line + '\n';
  }
  write_file_atomic(path, kept);
}

/// Progress on a terminal: one rewritten line with a bar; elsewhere plain log lines.
class Progress {
 public:
  explicit Progress(int64_t total)
      : total_(total), tty_(isatty(fileno(stderr)) != 0 && log::enabled(log::Level::kInfo)) {}
  bool tty() const { return tty_; }
  void update(
      int64_t step, double epoch, double loss, double lr, double examples_per_s, double eta) {
    if (!tty_) return;
    constexpr int kWidth = 24;
    const int filled = static_cast<int>(kWidth * static_cast<double>(step) /
                                        static_cast<double>(std::max<int64_t>(1, total_)));
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, '.');
    fmt::print(stderr, "\r[{}] {}/{} ep {:.2f} loss {:.4f} lr {:.2e} {:.1f} ex/s eta {}  ", bar,
               step, total_, epoch, loss, lr, examples_per_s, format_eta(eta));
    std::fflush(stderr);
    open_ = true;
  }
  /// Ends the bar's line before other output.
  void finish_line() {
    if (!open_) return;
    fmt::print(stderr, "\n");
    open_ = false;
  }

 private:
  static std::string format_eta(double seconds) {
    const auto s = static_cast<int64_t>(std::max(0.0, seconds));
    return s >= 3600 ? fmt::format("{}h{:02d}m", s / 3600, (s / 60) % 60)
                     : fmt::format("{}m{:02d}s", s / 60, s % 60);
  }
  int64_t total_;
  bool tty_;
  bool open_ = false;
};

}  // namespace

TrainResult Trainer::fit(const TaskAdapter& adapter,
                         TaskModel model,
                         const FeatureSet& train,
                         const FeatureSet* dev,
                         const std::filesystem::path& output_dir) {
  TORCH_CHECK(train.size() > 0, "fit: no training features");
  const torch::Device device(options_.device);
  model->to(device);
  const auto& o = options_;
  const int64_t batches_per_epoch =
      (static_cast<int64_t>(train.size()) + o.batch_size - 1) / o.batch_size;
  const int64_t steps_per_epoch =
      (batches_per_epoch + o.gradient_accumulation_steps - 1) / o.gradient_accumulation_steps;
  const int64_t total_steps = steps_per_epoch * o.epochs;
  const LinearSchedule schedule(
      o.learning_rate, warmup_steps_for(total_steps, o.warmup_ratio, o.warmup_steps), total_steps);
  AdamWSettings adamw{o.learning_rate, o.weight_decay, o.adam_beta1, o.adam_beta2, o.adam_epsilon};
  auto optimizer = make_adamw(*model, adamw);
  std::vector<torch::Tensor> parameters;
  for (const auto& p : model->parameters())
    if (p.requires_grad()) parameters.push_back(p);

  TrainResult result;
  TrainState state;
  TensorMap best_weights;
  const auto snapshot = [&] {
    best_weights.clear();
    for (const auto& [name, tensor] : state_dict(*model))
      best_weights[name] = tensor.detach().to(torch::kCPU).clone();
  };

  // Resume from the newest checkpoint: weights, optimizer moments, RNG, position, best so far.
  if (const auto checkpoint = latest_checkpoint(output_dir); !checkpoint.empty()) {
    const auto j = json::parse(read_file(checkpoint / "state.json"));
    if (j.at("total_steps").get<int64_t>() != total_steps ||
        j.at("train_features").get<size_t>() != train.size())
      throw CheckpointError(fmt::format(
          "{}: was written by a run with {} steps over {} features, this one has {} over {}; "
          "use a fresh output directory",
          checkpoint.string(), j.at("total_steps").get<int64_t>(),
          j.at("train_features").get<size_t>(), total_steps, train.size()));
    state.step = j.at("step");
    state.epoch = j.at("epoch");
    state.next_batch = j.at("next_batch");
    state.have_best = j.at("have_best");
    state.best_step = j.at("best_step");
    state.evaluations_without_gain = j.at("evaluations_without_gain");
    state.best_metrics = j.at("best_metrics");
    state.main_metric = j.at("main_metric");
    state.losses = j.at("losses").get<std::vector<double>>();
    state.loss_scale = j.value("loss_scale", 0.0);
    state.scale_clean_steps = j.value("scale_clean_steps", int64_t{0});
    load_state_dict(*model, read_weights(checkpoint / "model.safetensors"),
                    (checkpoint / "model.safetensors").string());
    torch::load(*optimizer, (checkpoint / "optimizer.pt").string());
    std::vector<torch::Tensor> rng;
    torch::load(rng, (checkpoint / "rng.pt").string());
    auto gens = generators(device);
    TORCH_CHECK(rng.size() == gens.size(), checkpoint.string(), ": RNG state of another device");
    for (size_t i = 0; i < gens.size(); ++i) gens[i].set_state(rng[i]);
    if (state.have_best) {
      best_weights = read_weights(output_dir / "best" / "model.safetensors");
      result.best.metrics = state.best_metrics.get<std::map<std::string, double>>();
      result.best.main_metric = state.main_metric;
    }
    truncate_log(output_dir, state.step);
    result.resumed_from = state.step;
    log::info("[train] resumed from {} (step {}/{})", checkpoint.string(), state.step, total_steps);
  }
  result.losses = state.losses;
  const bool fp16 = o.precision == Precision::kFp16;
  LossScaler scaler;
  if (state.loss_scale > 0) scaler.restore(state.loss_scale, state.scale_clean_steps);
  int64_t skipped_steps = 0;

  log::info(
      "[train] {} features, {} epochs x {} steps (batch {} x {} accumulation), warm-up {} steps, "
      "{} on {}",
      train.size(), o.epochs, steps_per_epoch, o.batch_size, o.gradient_accumulation_steps,
      schedule.warmup_steps(), enum_name(o.precision), device.str());

  const auto save_checkpoint = [&] {
    if (output_dir.empty()) return;
    const auto root = output_dir / "checkpoints";
    const auto name = step_dir_name(state.step);
    const auto tmp = root / (".tmp-" + name);
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    save_safetensors(tmp / "model.safetensors", state_dict(*model));
    torch::save(*optimizer, (tmp / "optimizer.pt").string());
    std::vector<torch::Tensor> rng;
    for (auto& g : generators(device)) rng.push_back(g.get_state());
    torch::save(rng, (tmp / "rng.pt").string());
    const json j = {{"step", state.step},
                    {"epoch", state.epoch},
                    {"next_batch", state.next_batch},
                    {"have_best", state.have_best},
                    {"best_step", state.best_step},
                    {"evaluations_without_gain", state.evaluations_without_gain},
                    {"best_metrics", state.best_metrics},
                    {"main_metric", state.main_metric},
                    {"losses", result.losses},
                    {"total_steps", total_steps},
                    {"loss_scale", scaler.scale()},
                    {"scale_clean_steps", scaler.clean_steps()},
                    {"train_features", train.size()}};
    write_file_atomic(tmp / "state.json", j.dump(1));
    fs::remove_all(root / name);
    fs::rename(tmp, root / name);
    write_file_atomic(root / "latest", name + "\n");
    // Keep the newest keep_checkpoints.
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(root)) {
      const auto n = entry.path().filename().string();
      if (entry.is_directory() && n.rfind("step-", 0) == 0) names.push_back(n);
    }
    std::sort(names.begin(), names.end());
    const auto keep = static_cast<size_t>(std::max<int64_t>(1, o.keep_checkpoints));
    for (size_t i = 0; i + keep < names.size(); ++i) fs::remove_all(root / names[i]);
  };

  Progress progress(total_steps);
  const auto run_evaluation = [&](int64_t step, double epoch) {
    if (!dev) return;
    auto ev = evaluate(adapter, model, *dev);
    model->train();
    const double score = ev.main();
    const bool improved = !state.have_best || score > result.best.main();
    json record = {{"step", step}, {"epoch", epoch}, {"split", "dev"}, {"is_best", improved}};
    record["metrics"] = json(ev.metrics);
    append_jsonl(output_dir, record);
    progress.finish_line();
    log::info("[eval] step {} | {} {:.4f}{}", step, ev.main_metric, score,
              improved ? " (best)" : "");
    if (improved) {
      state.have_best = true;
      state.best_step = step;
      state.best_metrics = json(ev.metrics);
      state.main_metric = ev.main_metric;
      state.evaluations_without_gain = 0;
      result.best = std::move(ev);
      snapshot();
      if (!output_dir.empty())
        save_safetensors(output_dir / "best" / "model.safetensors", best_weights);
    } else {
      ++state.evaluations_without_gain;
    }
  };

  const auto patience_exhausted = [&] {
    if (o.early_stopping_patience <= 0 ||
        state.evaluations_without_gain < o.early_stopping_patience)
      return false;
    result.stopped_early = true;
    log::info("[train] early stopping: {} evaluations without improvement",
              state.evaluations_without_gain);
    return true;
  };
  // After a checkpoint: true when the interrupt hook asks to stop.
  const auto interrupted = [&] {
    if (!interrupt_ || !interrupt_(state.step)) return false;
    result.interrupted = true;
    progress.finish_line();
    log::info("[train] interrupted after step {}", state.step);
    return true;
  };

  model->train();
  double interval_loss = 0;
  int64_t interval_batches = 0, interval_examples = 0, interval_steps = 0;
  auto interval_start = Clock::now();
  // Early stopping can have ended the run whose checkpoint this is.
  if (patience_exhausted()) state.epoch = o.epochs;
  while (state.epoch < o.epochs && !result.stopped_early) {
    const int64_t epoch = state.epoch;
    const auto batches =
        epoch_batches(train, o.batch_size,
                      static_cast<uint64_t>(o.seed) * 1000003ULL + static_cast<uint64_t>(epoch),
                      o.group_by_length);
    for (auto b = static_cast<size_t>(state.next_batch); b < batches.size(); ++b) {
      const auto batch = adapter.collate(train, batches[b]).to(device);
      torch::Tensor loss;
      {
        AutocastScope autocast(o.precision, device);
        loss = adapter.loss(model->forward(batch), batch);
      }
      (loss * ((fp16 ? scaler.scale() : 1.0) / static_cast<double>(o.gradient_accumulation_steps)))
          .backward();
      interval_loss += loss.item<double>();
      ++interval_batches;
      interval_examples += batch.size();
      const bool last_of_epoch = b + 1 == batches.size();
      if ((static_cast<int64_t>(b) + 1) % o.gradient_accumulation_steps != 0 && !last_of_epoch)
        continue;
      const double lr = schedule.at(state.step);
      // fp16: gradients back to true scale; a step with inf/NaN is skipped (the schedule still
      // advances, as HF's Trainer does).
      const bool finite = !fp16 || scaler.unscale(parameters);
      if (finite) {
        if (o.max_grad_norm > 0) torch::nn::utils::clip_grad_norm_(parameters, o.max_grad_norm);
        set_learning_rate(*optimizer, lr);
        optimizer->step();
      } else {
        ++skipped_steps;
        log::debug("[train] step {}: inf/NaN gradients at loss scale {}; step skipped",
                   state.step + 1, scaler.scale());
      }
      if (fp16) scaler.update(finite);
      optimizer->zero_grad();
      ++state.step;
      ++interval_steps;
      state.next_batch = static_cast<int64_t>(b) + 1;
      const int64_t step = state.step;
      const double seconds = std::chrono::duration<double>(Clock::now() - interval_start).count();
      const double mean_loss =
          interval_loss / static_cast<double>(std::max<int64_t>(1, interval_batches));
      const double throughput = static_cast<double>(interval_examples) / std::max(seconds, 1e-9);
      const double eta = seconds / static_cast<double>(std::max<int64_t>(1, interval_steps)) *
                         static_cast<double>(total_steps - step);
      const double epoch_f = static_cast<double>(step) / static_cast<double>(steps_per_epoch);
      progress.update(step, epoch_f, mean_loss, lr, throughput, eta);
      if (o.log_every > 0 && (step % o.log_every == 0 || step == total_steps)) {
        result.losses.push_back(mean_loss);
        if (!progress.tty())
          log::info(
              "[train] step {:>6}/{} | epoch {:5.2f} | loss {:.4f} | lr {:.2e} | {:.1f} ex/s | eta "
              "{:.0f}s",
              step, total_steps, epoch_f, mean_loss, lr, throughput, eta);
        append_jsonl(output_dir, {{"step", step},
                                  {"split", "train"},
                                  {"loss", mean_loss},
                                  {"learning_rate", lr},
                                  {"examples_per_second", throughput}});
        interval_loss = 0;
        interval_batches = interval_examples = interval_steps = 0;
        interval_start = Clock::now();
      }
      if (last_of_epoch) break;  // the epoch's end is handled below
      bool evaluated = false;
      if (o.eval_every > 0 && step % o.eval_every == 0) {
        run_evaluation(step, epoch_f);
        evaluated = true;
      }
      const bool stop = evaluated && patience_exhausted();
      if ((o.save_every > 0 && step % o.save_every == 0) || (o.save_every == 0 && evaluated) ||
          stop) {
        save_checkpoint();
        if (interrupted()) return result;
      }
      if (stop) break;
    }
    if (result.stopped_early) break;
    // End of the epoch: evaluate if due, then checkpoint the position at the next epoch.
    // (the last step of the run is always evaluated, so the best checkpoint sees the end)
    const bool due = o.eval_every == 0 || o.eval_each_epoch || state.step % o.eval_every == 0 ||
                     epoch + 1 == o.epochs;
    if (due) run_evaluation(state.step, static_cast<double>(epoch + 1));
    const bool stop = due && patience_exhausted();
    state.epoch = epoch + 1;
    state.next_batch = 0;
    save_checkpoint();
    if (interrupted()) return result;
    if (stop) break;
  }
  progress.finish_line();
  if (skipped_steps > 0)
    log::info("[train] fp16: {} steps skipped for inf/NaN gradients; final loss scale {}",
              skipped_steps, scaler.scale());
  result.steps = state.step;
  result.best_step = state.best_step;
  if (state.have_best) {
    load_state_dict(*model, best_weights, "best weights");
  } else if (!output_dir.empty()) {
    save_safetensors(output_dir / "best" / "model.safetensors", state_dict(*model));
  }
  model->eval();
  return result;
}

}  // namespace bert::tasks
