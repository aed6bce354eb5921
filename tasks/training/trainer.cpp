#include "tasks/training/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <numeric>
#include <random>

#include "bert/common/device.h"
#include "bert/common/error.h"
#include "bert/common/log.h"
#include "bert/common/threads.h"
#include "bert/model/encoder.h"
#include "bert/model/onednn_linear.h"
#include "tasks/training/callbacks.h"
#include "tasks/training/optimizer.h"
#include "tasks/training/schedule.h"

namespace bert::tasks {
namespace {

using Clock = std::chrono::steady_clock;

/// The training loss and throughput of the current logging interval.
class Interval {
 public:
  /// One optimizer step: its batch's loss and examples (all ranks).
  void add(double loss, int64_t examples) {
    loss_ += loss;
    ++steps_;
    examples_ += examples;
  }
  StepStats stats(const TrainContext& run, double lr) const {
    const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    StepStats s;
    s.step = run.state.step;
    s.epoch = run.epoch_position();
    s.loss = loss_ / static_cast<double>(std::max<int64_t>(1, steps_));
    s.learning_rate = lr;
    s.examples_per_second = static_cast<double>(examples_) / std::max(seconds, 1e-9);
    s.eta_seconds = seconds / static_cast<double>(std::max<int64_t>(1, steps_)) *
                    static_cast<double>(run.total_steps - run.state.step);
    return s;
  }
  void reset() { *this = Interval(); }

 private:
  double loss_ = 0;
  int64_t steps_ = 0, examples_ = 0;
  Clock::time_point start_ = Clock::now();
};

}  // namespace

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
  const torch::Device device = usable_device(options_.device, "training.device");
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
  // Data-parallel: batch k goes to rank k % world (the batches a single process would make, so
  // the outputs are the same), then every rank gets every output.
  const size_t world = group_ ? static_cast<size_t>(group_->world_size()) : 1;
  const size_t rank = group_ ? static_cast<size_t>(group_->rank()) : 0;
  const auto batch_size = static_cast<size_t>(options_.eval_batch_size);
  std::vector<int64_t> mine;
  for (size_t start = 0, k = 0; start < order.size(); start += batch_size, ++k) {
    if (k % world != rank) continue;
    const std::vector<int64_t> indices(
        order.begin() + static_cast<long>(start),
        order.begin() + static_cast<long>(std::min(order.size(), start + batch_size)));
    const auto batch = adapter.collate(features, indices).to(device);
    torch::Tensor logits;
    {
      AutocastScope autocast(precision(), device);
      logits = model->forward(batch);
    }
    adapter.gather(batch, logits.to(torch::kFloat), outputs);
    mine.insert(mine.end(), indices.begin(), indices.end());
  }
  if (group_) group_->all_gather_outputs(outputs, mine);
  return outputs;
}

Precision Trainer::precision() const {
  if (!precision_)
    precision_ =
        resolve_precision(options_.precision, usable_device(options_.device, "training.device"))
            .precision;
  return *precision_;
}

Evaluation Trainer::evaluate(const TaskAdapter& adapter,
                             TaskModel model,
                             const FeatureSet& features) const {
  return adapter.evaluate(features, predict(adapter, model, features));
}

std::vector<int64_t> batch_part(const std::vector<int64_t>& batch, int64_t part, int64_t parts) {
  const auto n = static_cast<int64_t>(batch.size());
  const auto begin = part * (n / parts) + std::min(part, n % parts);
  const auto length = n / parts + (part < n % parts ? 1 : 0);
  return {batch.begin() + begin, batch.begin() + begin + length};
}

torch::Tensor smoothed_loss(const torch::Tensor& loss,
                            const torch::Tensor& logits,
                            const torch::Tensor& labels,
                            double epsilon) {
  const auto uniform = -torch::log_softmax(logits.to(torch::kFloat), -1).mean(-1);  // [...]
  return (1 - epsilon) * loss + epsilon * uniform.masked_select(labels.ne(kIgnoreIndex)).mean();
}

TrainerCallbacks Trainer::standard_callbacks(const TrainingDir& dir) const {
  const bool lead = !group_ || group_->rank() == 0;  // rank 0 writes files and prints
  TrainerCallbacks parts;
  if (!dir.empty()) parts.push_back(std::make_shared<Checkpoints>(dir, options_.keep_checkpoints));
  parts.push_back(std::make_shared<BestWeights>(
      dir.empty() ? std::filesystem::path() : dir.best_weights(), lead));
  if (!dir.empty() && lead) parts.push_back(std::make_shared<MetricsLog>(dir.metrics_log()));
  if (lead) parts.push_back(std::make_shared<ProgressBar>());
  parts.push_back(std::make_shared<EarlyStopping>(options_.early_stopping_patience));
  if (interrupt_) parts.push_back(std::make_shared<InterruptHook>(interrupt_));
  parts.insert(parts.end(), extra_.begin(), extra_.end());
  return parts;
}

TrainResult Trainer::fit(const TaskAdapter& adapter,
                         TaskModel model,
                         const FeatureSet& train,
                         const FeatureSet* dev,
                         const std::filesystem::path& output_dir) {
  return fit(adapter, std::move(model), train, dev, standard_callbacks(TrainingDir(output_dir)));
}

TrainResult Trainer::fit(const TaskAdapter& adapter,
                         TaskModel model,
                         const FeatureSet& train,
                         const FeatureSet* dev,
                         const TrainerCallbacks& parts) {
  TORCH_CHECK(train.size() > 0, "fit: no training features");
  TORCH_CHECK(options_.label_smoothing == 0 || adapter.supports_label_smoothing(), adapter.type(),
              ": label_smoothing applies to classification losses only");
  const auto& o = options_;
  const torch::Device device = usable_device(o.device, "training.device");
  model->to(device);
  if (o.activation_checkpointing) {
    const int64_t encoders = set_activation_checkpointing(*model, true);
    log::info("[train] activation checkpointing: {} encoder(s) recompute their layers in backward",
              encoders);
  }
  // One optimizer step per batch of batch_size examples (split over accumulation and ranks).
  const int64_t steps_per_epoch =
      (static_cast<int64_t>(train.size()) + o.batch_size - 1) / o.batch_size;
  const int64_t total_steps = o.max_steps > 0 ? o.max_steps : steps_per_epoch * o.epochs;
  const LrSchedule schedule(o.lr_scheduler_type, o.learning_rate,
                            warmup_steps_for(total_steps, o.warmup_ratio, o.warmup_steps),
                            total_steps, o.schedule_shape());
  auto optimizer =
      make_optimizer(o.optimizer, *model,
                     {o.learning_rate, o.weight_decay, o.adam_beta1, o.adam_beta2, o.adam_epsilon});
  LossScaler scaler;
  TrainContext run{o, adapter, model, *optimizer, scaler, device};
  run.group = group_.get();
  run.steps_per_epoch = steps_per_epoch;
  run.total_steps = total_steps;
  run.epochs = (total_steps + steps_per_epoch - 1) / steps_per_epoch;
  run.state.total_steps = total_steps;
  run.state.train_features = static_cast<int64_t>(train.size());
  run.result.goal = adapter.main_metric_goal();
  std::vector<torch::Tensor> parameters;
  for (const auto& p : model->parameters())
    if (p.requires_grad()) parameters.push_back(p);
  if (group_) seed_rank_generators(o.seed, group_->rank(), 0, device);  // a resume overrides

  auto choice = resolve_precision(o.precision, device);
  if (group_) {  // every rank trains alike: bf16 only when every rank's probe chose it
    auto votes = torch::tensor({choice.precision == Precision::kBf16 ? 1.0 : 0.0}, torch::kDouble);
    group_->all_reduce_sum(votes);
    if (o.precision == Precision::kAuto && votes.item<double>() < group_->world_size())
      choice = {Precision::kFp32, "fp32: not every rank's probe chose bf16"};
  }
  precision_ = run.precision = choice.precision;
  if (o.precision == Precision::kAuto) log::info("[train] precision auto: {}", choice.reason);
  if (precision_ == Precision::kFp32 && device.is_cpu())
    log::info("[train] {}", fp32_gemm().reason);
  if (const std::string core = openblas_core(); device.is_cpu() && !core.empty()) {
    const char* coretype = std::getenv("OPENBLAS_CORETYPE");
    log::info("[train] OpenBLAS core: {}{}", core,
              coretype != nullptr ? fmt::format(" (OPENBLAS_CORETYPE={})", coretype) : "");
  }

  TrainControl control;
  for (const auto& part : parts) part->on_train_begin(run, control);
  // A resumed run goes on in the precision it started in (auto's probe may differ now).
  if (o.precision == Precision::kAuto && !run.state.precision.empty() &&
      run.state.precision != enum_name(run.precision)) {
    if (const auto kept = parse_enum<Precision>(run.state.precision)) {
      log::info("[train] precision auto: {} as when the run started (the probe says {} now)",
                run.state.precision, enum_name(run.precision));
      precision_ = run.precision = *kept;
    }
  }
  run.state.precision = enum_name(run.precision);
  if (run.state.have_best) run.result.best = {run.state.best_metrics, run.state.main_metric, {}};
  if (group_) group_->broadcast_module(*model);
  const auto sync = group_ ? group_->sync_gradients(parameters) : nullptr;
  log::info(
      "[train] {} features, {} steps ({} epochs x {}; batch {} = {} process(es) x {} "
      "accumulation), warm-up {} steps, {} {} schedule, {} on {}",
      train.size(), total_steps, run.epochs, steps_per_epoch, o.batch_size, run.world_size(),
      o.gradient_accumulation_steps, schedule.warmup_steps(), o.optimizer,
      enum_name(o.lr_scheduler_type), enum_name(run.precision), device.str());

  model->train();
  Interval interval;
  try {
    while (!control.stop && run.state.epoch < run.epochs && run.state.step < total_steps) {
      const int64_t epoch = run.state.epoch;
      const auto batches =
          epoch_batches(train, o.batch_size,
                        static_cast<uint64_t>(o.seed) * 1000003ULL + static_cast<uint64_t>(epoch),
                        o.group_by_length);
      for (auto b = static_cast<size_t>(run.state.next_batch);
           b < batches.size() && !control.stop && run.state.step < total_steps; ++b) {
        const auto [loss, stop_requested] = accumulate(run, train, batches[b], sync.get());
        interval.add(loss, static_cast<int64_t>(batches[b].size()));
        const double lr = schedule.at(run.state.step);
        optimizer_step(run, parameters, lr);
        const bool epoch_end = b + 1 == batches.size();
        ++run.state.step;
        run.state.epoch = epoch_end ? epoch + 1 : epoch;
        run.state.next_batch = epoch_end ? 0 : static_cast<int64_t>(b) + 1;
        control = due(run, epoch_end);
        if (stop_requested) control.stop = run.result.interrupted = true;
        const auto stats = interval.stats(run, lr);
        for (const auto& part : parts) part->on_step_end(run, stats, control);
        if (control.log) {
          run.state.losses.push_back(stats.loss);
          for (const auto& part : parts) part->on_log(run, stats);
          interval.reset();
        }
        if (control.evaluate && dev) evaluate_and_report(run, *dev, parts, control);
        if (control.stop) control.save = true;  // a stopped run can always be resumed
        if (control.save)
          for (const auto& part : parts) part->on_save(run, control);
      }
    }
    for (const auto& part : parts) part->on_train_end(run);
  } catch (const DistributedError&) {
    throw;
  } catch (const std::exception& e) {
    if (group_) group_->report_failure(message_of(e));  // the others then name this rank
    throw;
  }
  if (run.skipped_steps > 0)
    log::info("[train] fp16: {} steps skipped for inf/NaN gradients; final loss scale {}",
              run.skipped_steps, scaler.scale());
  if (group_)
    log::info("[train] {:.1f} s waiting for gradient all-reduces not hidden behind backward",
              run.communication_seconds);
  if (run.result.interrupted) log::info("[train] interrupted after step {}", run.state.step);
  run.result.steps = run.state.step;
  run.result.best_step = run.state.best_step;
  run.result.losses = run.state.losses;
  run.result.communication_seconds = run.communication_seconds;
  model->eval();
  return std::move(run.result);
}

std::pair<double, bool> Trainer::accumulate(TrainContext& run,
                                            const FeatureSet& train,
                                            const std::vector<int64_t>& batch,
                                            GradientSync* sync) const {
  // Micro-step a of rank r takes part a * world + r of the batch; weighting each part's mean
  // loss by its share makes the summed gradients those of the whole batch's mean loss.
  const int64_t micro_steps = options_.gradient_accumulation_steps;
  const int64_t world = run.world_size(), rank = run.rank();
  double loss = 0;
  for (int64_t a = 0; a < micro_steps; ++a) {
    const auto part = batch_part(batch, a * world + rank, micro_steps * world);
    if (sync) sync->set_sync(a + 1 == micro_steps);
    if (part.empty()) continue;  // a short last batch: this rank only takes part in the sums
    const double weight = static_cast<double>(part.size()) / static_cast<double>(batch.size());
    loss += weight * backward(run, run.adapter.collate(train, part).to(run.device), weight);
  }
  const bool stop = stop_request_ && stop_request_();
  if (!run.group) return {loss, stop};
  // Gradients first (their all-reduces were launched during backward), then the step's loss
  // and any rank's stop request: the same collectives in the same order on every rank.
  run.communication_seconds += sync->finish();
  auto agreed = torch::tensor({loss, stop ? 1.0 : 0.0}, torch::kDouble);
  run.group->all_reduce_sum(agreed);
  return {agreed[0].item<double>(), agreed[1].item<double>() > 0};
}

double Trainer::backward(TrainContext& run, const Batch& batch, double weight) const {
  const auto& o = options_;
  torch::Tensor loss;
  {
    AutocastScope autocast(run.precision, run.device);
    const auto logits = run.model->forward(batch);
    loss = run.adapter.loss(logits, batch);
    if (o.label_smoothing > 0) loss = smoothed_loss(loss, logits, batch.labels, o.label_smoothing);
  }
  const bool fp16 = run.precision == Precision::kFp16;
  (loss * ((fp16 ? run.scaler.scale() : 1.0) * weight)).backward();
  return loss.item<double>();
}

void Trainer::optimizer_step(TrainContext& run,
                             const std::vector<torch::Tensor>& parameters,
                             double lr) const {
  // fp16: gradients back to true scale; a step with inf/NaN is skipped (the schedule still
  // advances, as HF's Trainer does).
  const bool fp16 = run.precision == Precision::kFp16;
  const bool finite = !fp16 || run.scaler.unscale(parameters);
  if (finite) {
    if (options_.max_grad_norm > 0)
      clip_gradients(run.optimizer, parameters, options_.max_grad_norm);
    set_learning_rate(run.optimizer, lr);
    run.optimizer.step();
  } else {
    ++run.skipped_steps;
    log::debug("[train] step {}: inf/NaN gradients at loss scale {}; step skipped",
               run.state.step + 1, run.scaler.scale());
  }
  if (fp16) run.scaler.update(finite);
  if (!run.group) {
    release_gradients(parameters);
    return;
  }
  // In place: data-parallel gradients are views of the all-reduce buckets (which
  // Optimizer::zero_grad's detach_() refuses).
  torch::NoGradGuard no_grad;
  for (const auto& p : parameters)
    if (p.grad().defined()) p.mutable_grad().zero_();
}

TrainControl Trainer::due(const TrainContext& run, bool epoch_end) const {
  const auto& o = options_;
  const int64_t step = run.state.step;
  const bool run_end = step == run.total_steps;  // always evaluated, so best/ sees the end
  TrainControl c;
  c.log = o.log_every > 0 && (step % o.log_every == 0 || run_end);
  c.evaluate = (o.eval_every > 0 && step % o.eval_every == 0) || run_end ||
               (epoch_end && (o.eval_every == 0 || o.eval_each_epoch));
  c.save = epoch_end || run_end || (o.save_every > 0 ? step % o.save_every == 0 : c.evaluate);
  return c;
}

void Trainer::evaluate_and_report(TrainContext& run,
                                  const FeatureSet& dev,
                                  const TrainerCallbacks& parts,
                                  TrainControl& control) const {
  auto ev = evaluate(run.adapter, run.model, dev);
  run.model->train();
  auto& s = run.state;
  const bool improved =
      !s.have_best || metrics::improves(run.result.goal, ev.main(), run.result.best.main());
  if (improved) {
    s.have_best = true;
    s.best_step = s.step;
    s.best_metrics = ev.metrics;
    s.main_metric = ev.main_metric;
    s.evaluations_without_gain = 0;
  } else {
    ++s.evaluations_without_gain;
  }
  for (const auto& part : parts) part->on_evaluate(run, ev, improved, control);
  if (improved) run.result.best = std::move(ev);
}

}  // namespace bert::tasks
