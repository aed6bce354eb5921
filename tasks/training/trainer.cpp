#include "tasks/training/trainer.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <cmath>
#include <numeric>
#include <random>

#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bert/checkpoint/load.h"
#include "bert/checkpoint/safetensors.h"
#include "bert/common/file_util.h"
#include "bert/common/log.h"
#include "tasks/training/optimizer.h"
#include "tasks/training/schedule.h"

namespace bert {
const std::vector<std::pair<const char*, tasks::Precision>>& EnumNames<tasks::Precision>::get() {
  static const std::vector<std::pair<const char*, tasks::Precision>> names = {{"fp32", tasks::Precision::kFp32},
                                                                             {"bf16", tasks::Precision::kBf16}};
  return names;
}
}  // namespace bert

namespace bert::tasks {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

/// bf16 autocast for the scope's forward passes on `device`.
class AutocastScope {
 public:
  AutocastScope(bool enabled, const torch::Device& device) : enabled_(enabled), cuda_(device.is_cuda()) {
    if (!enabled_) return;
    if (cuda_) {
      at::autocast::set_enabled(true);
      at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
    } else {
      at::autocast::set_cpu_enabled(true);
      at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    }
  }
  ~AutocastScope() {
    if (!enabled_) return;
    at::autocast::clear_cache();
    if (cuda_) {
      at::autocast::set_enabled(false);
    } else {
      at::autocast::set_cpu_enabled(false);
    }
  }

 private:
  bool enabled_, cuda_;
};

void append_jsonl(const std::filesystem::path& dir, const json& record) {
  if (dir.empty()) return;
  std::filesystem::create_directories(dir);
  std::ofstream out(dir / "metrics.jsonl", std::ios::app);
  out << record.dump() << '\n';
}

json metrics_json(const Evaluation& ev) {
  json j = json::object();
  for (const auto& [k, v] : ev.metrics) j[k] = v;
  return j;
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
  if (warmup_ratio < 0 || warmup_ratio > 1) errors.add(reader.where("warmup_ratio") + ": must be in [0, 1]");
  if (adam_beta1 < 0 || adam_beta1 >= 1) errors.add(reader.where("adam_beta1") + ": must be in [0, 1)");
  if (adam_beta2 < 0 || adam_beta2 >= 1) errors.add(reader.where("adam_beta2") + ": must be in [0, 1)");
  if (max_grad_norm < 0) errors.add(reader.where("max_grad_norm") + ": must be >= 0");
  try {
    torch::Device d(device);
    (void)d;
  } catch (const std::exception&) {
    errors.add(fmt::format("{}: unknown device '{}'; expected cpu, cuda or cuda:N", reader.where("device"), device));
  }
}

std::vector<std::vector<int64_t>> Trainer::epoch_batches(const FeatureSet& features, int64_t batch_size, uint64_t seed,
                                                         bool group_by_length) {
  std::vector<int64_t> order(features.features.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  if (group_by_length) {
    const size_t chunk = static_cast<size_t>(batch_size) * 50;
    for (size_t start = 0; start < order.size(); start += chunk) {
      const auto end = order.begin() + static_cast<long>(std::min(order.size(), start + chunk));
      std::stable_sort(order.begin() + static_cast<long>(start), end, [&](int64_t a, int64_t b) {
        return features.features[static_cast<size_t>(a)].length() > features.features[static_cast<size_t>(b)].length();
      });
    }
  }
  std::vector<std::vector<int64_t>> batches;
  for (size_t start = 0; start < order.size(); start += static_cast<size_t>(batch_size))
    batches.emplace_back(order.begin() + static_cast<long>(start),
                         order.begin() + static_cast<long>(std::min(order.size(), start + static_cast<size_t>(batch_size))));
  if (group_by_length) std::shuffle(batches.begin(), batches.end(), rng);
  return batches;
}

std::vector<torch::Tensor> Trainer::predict(const TaskAdapter& adapter, TaskModel model, const FeatureSet& features) const {
  const torch::Device device(options_.device);
  model->eval();
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> outputs(features.features.size());
  // Sorted by length so that each batch pads little.
  std::vector<int64_t> order(features.features.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return features.features[static_cast<size_t>(a)].length() < features.features[static_cast<size_t>(b)].length();
  });
  for (size_t start = 0; start < order.size(); start += static_cast<size_t>(options_.eval_batch_size)) {
    const std::vector<int64_t> indices(order.begin() + static_cast<long>(start),
                                       order.begin() + static_cast<long>(std::min(order.size(), start + static_cast<size_t>(options_.eval_batch_size))));
    const auto batch = adapter.collate(features, indices).to(device);
    torch::Tensor logits;
    {
      AutocastScope autocast(options_.precision == Precision::kBf16, device);
      logits = model->forward(batch);
    }
    adapter.gather(batch, logits.to(torch::kFloat), outputs);
  }
  return outputs;
}

Evaluation Trainer::evaluate(const TaskAdapter& adapter, TaskModel model, const FeatureSet& features) const {
  return adapter.evaluate(features, predict(adapter, model, features));
}

TrainResult Trainer::fit(const TaskAdapter& adapter, TaskModel model, const FeatureSet& train, const FeatureSet* dev,
                         const std::filesystem::path& output_dir) {
  TORCH_CHECK(!train.features.empty(), "fit: no training features");
  const torch::Device device(options_.device);
  model->to(device);
  const auto& o = options_;
  const int64_t batches_per_epoch = (static_cast<int64_t>(train.features.size()) + o.batch_size - 1) / o.batch_size;
  const int64_t steps_per_epoch = (batches_per_epoch + o.gradient_accumulation_steps - 1) / o.gradient_accumulation_steps;
  const int64_t total_steps = steps_per_epoch * o.epochs;
  const LinearSchedule schedule(o.learning_rate, warmup_steps_for(total_steps, o.warmup_ratio, o.warmup_steps), total_steps);
  AdamWSettings adamw{o.learning_rate, o.weight_decay, o.adam_beta1, o.adam_beta2, o.adam_epsilon};
  auto optimizer = make_adamw(*model, adamw);
  std::vector<torch::Tensor> parameters;
  for (const auto& p : model->parameters())
    if (p.requires_grad()) parameters.push_back(p);

  log::info("[train] {} features, {} epochs x {} steps (batch {} x {} accumulation), warm-up {} steps, {} on {}",
            train.features.size(), o.epochs, steps_per_epoch, o.batch_size, o.gradient_accumulation_steps,
            schedule.warmup_steps(), enum_name(o.precision), device.str());

  TrainResult result;
  bool have_best = false;
  TensorMap best_weights;
  int64_t evaluations_without_gain = 0;
  const auto run_evaluation = [&](int64_t step, double epoch) {
    if (!dev) return;
    auto ev = evaluate(adapter, model, *dev);
    model->train();
    const double score = ev.main();
    const bool improved = !have_best || score > result.best.main();
    json record = {{"step", step}, {"epoch", epoch}, {"split", "dev"}, {"is_best", improved}};
    record["metrics"] = metrics_json(ev);
    append_jsonl(output_dir, record);
    log::info("[eval] step {} | {} {:.4f}{}", step, ev.main_metric, score, improved ? " (best)" : "");
    if (improved) {
      have_best = true;
      result.best = std::move(ev);
      result.best_step = step;
      evaluations_without_gain = 0;
      best_weights.clear();
      for (const auto& [name, tensor] : state_dict(*model)) best_weights[name] = tensor.detach().to(torch::kCPU).clone();
      if (!output_dir.empty()) save_safetensors(output_dir / "best" / "model.safetensors", best_weights);
    } else {
      ++evaluations_without_gain;
    }
  };

  const auto patience_exhausted = [&] {
    if (o.early_stopping_patience <= 0 || evaluations_without_gain < o.early_stopping_patience) return false;
    result.stopped_early = true;
    log::info("[train] early stopping: {} evaluations without improvement", evaluations_without_gain);
    return true;
  };

  model->train();
  int64_t step = 0;
  double interval_loss = 0;
  int64_t interval_batches = 0;
  auto interval_start = Clock::now();
  int64_t interval_examples = 0;
  for (int64_t epoch = 0; epoch < o.epochs && !result.stopped_early; ++epoch) {
    const auto batches = epoch_batches(train, o.batch_size, static_cast<uint64_t>(o.seed) * 1000003ULL + static_cast<uint64_t>(epoch),
                                       o.group_by_length);
    for (size_t b = 0; b < batches.size(); ++b) {
      const auto batch = adapter.collate(train, batches[b]).to(device);
      torch::Tensor loss;
      {
        AutocastScope autocast(o.precision == Precision::kBf16, device);
        loss = adapter.loss(model->forward(batch), batch);
      }
      (loss / static_cast<double>(o.gradient_accumulation_steps)).backward();
      interval_loss += loss.item<double>();
      ++interval_batches;
      interval_examples += batch.size();
      const bool last_of_epoch = b + 1 == batches.size();
      if ((static_cast<int64_t>(b) + 1) % o.gradient_accumulation_steps != 0 && !last_of_epoch) continue;
      if (o.max_grad_norm > 0) torch::nn::utils::clip_grad_norm_(parameters, o.max_grad_norm);
      const double lr = schedule.at(step);
      set_learning_rate(*optimizer, lr);
      optimizer->step();
      optimizer->zero_grad();
      ++step;
      if (o.log_every > 0 && (step % o.log_every == 0 || step == total_steps)) {
        const double seconds = std::chrono::duration<double>(Clock::now() - interval_start).count();
        const double mean_loss = interval_loss / static_cast<double>(std::max<int64_t>(1, interval_batches));
        result.losses.push_back(mean_loss);
        const double eta = seconds / static_cast<double>(std::max<int64_t>(1, o.log_every)) * static_cast<double>(total_steps - step);
        log::info("[train] step {:>6}/{} | epoch {:5.2f} | loss {:.4f} | lr {:.2e} | {:.1f} ex/s | eta {:.0f}s", step,
                  total_steps, static_cast<double>(step) / static_cast<double>(steps_per_epoch), mean_loss, lr,
                  static_cast<double>(interval_examples) / std::max(seconds, 1e-9), eta);
        append_jsonl(output_dir, {{"step", step}, {"split", "train"}, {"loss", mean_loss}, {"learning_rate", lr}});
        interval_loss = 0;
        interval_batches = 0;
        interval_examples = 0;
        interval_start = Clock::now();
      }
      if (o.eval_every > 0 && step % o.eval_every == 0) {
        run_evaluation(step, static_cast<double>(step) / static_cast<double>(steps_per_epoch));
        if (patience_exhausted()) break;
      }
    }
    if (o.eval_every == 0 && !result.stopped_early) {
      run_evaluation(step, static_cast<double>(epoch + 1));
      patience_exhausted();
    }
  }
  result.steps = step;
  if (have_best) {
    load_state_dict(*model, best_weights, "best weights");
  } else if (!output_dir.empty()) {
    save_safetensors(output_dir / "best" / "model.safetensors", state_dict(*model));
  }
  model->eval();
  return result;
}

}  // namespace bert::tasks
