#include "recipes/runner/trial.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <optional>

#include "bert/checkpoint/family_keys.h"
#include "bert/checkpoint/load.h"
#include "bert/checkpoint/safetensors.h"
#include "bert/common/device.h"
#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/log.h"
#include "bert/common/signals.h"
#include "bert/common/strings.h"
#include "bert/model/pretraining.h"
#include "bert/tokenizer/factory.h"
#include "tasks/common/feature_cache.h"
#include "tasks/registry.h"
#include "tasks/training/callbacks.h"
#include "tasks/training/trainer.h"

namespace bert::recipes {
namespace {

namespace fs = std::filesystem;

std::string hash_file(const fs::path& path) {
  return fmt::format("{:016x}", fnv1a64(read_file(path)));
}

std::string tokenizer_fingerprint(const PretrainedDir& dir, const BertConfig& config) {
  std::string out = fmt::format("vocab_size={}", config.vocab_size());
  // Every file the tokenizer reads: its vocabulary, settings and added tokens (whether an entry
  // of added_tokens.json is special, and so matched without normalising, is in
  // special_tokens_map.json).
  const std::optional<fs::path> json_file = dir.dir / "tokenizer.json",
                                added = dir.dir / "added_tokens.json",
                                special = dir.dir / "special_tokens_map.json";
  for (const auto& file : {dir.vocab, dir.bpe_vocab, dir.bpe_merges, dir.sentencepiece,
                           dir.tokenizer_config, json_file, added, special})
    if (file && fs::exists(*file)) out += "|" + file->filename().string() + "=" + hash_file(*file);
  return out;
}

std::string spec_fingerprint(const data::DataSpec& spec) {
  YAML::Emitter e;
  e << write_struct(spec);
  return std::string(e.c_str()) + "|bytes=" + hash_file(spec.path);
}

/// Shapes of the encoder's weights that `config` implies, against a safetensors header (names
/// with or without a model prefix such as "bert."), and the number of layers it holds.
void check_weight_shapes(const fs::path& file,
                         const BertConfig& config,
                         std::vector<std::string>& problems) {
  const SafetensorsReader reader(file);
  const int64_t h = config.hidden_size(), i = config.intermediate_size();
  const int64_t e = config.embedding_dim();
  const std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {
      {"embeddings.word_embeddings.weight", {config.vocab_size(), e}},
      {"embeddings.position_embeddings.weight", {config.max_position_embeddings(), e}},
      {"embeddings.token_type_embeddings.weight", {config.type_vocab_size(), e}},
      {"attention.self.query.weight", {h, h}},
      {"attention.self.key.weight", {h, h}},
      {"attention.self.value.weight", {h, h}},
      {"attention.output.dense.weight", {h, h}},
      {"intermediate.dense.weight", {i, h}},
      {".output.dense.weight", {h, i}},  // the layer's, not attention.output's (tested first)
  };
  int64_t layers = 0;
  for (const auto& entry : reader.entries()) {
    const std::string name = bertft_key(entry.name);  // DistilBERT's names as BERT's
    const auto at = name.find("encoder.layer.");
    if (at != std::string::npos)
      layers = std::max<int64_t>(layers, std::atoll(name.c_str() + at + 14) + 1);
    for (const auto& [suffix, shape] : expected) {
      if (!ends_with(name, suffix)) continue;
      if (entry.shape != shape)
        problems.push_back(fmt::format("{}: tensor {} has shape [{}]; config.json implies [{}]",
                                       file.string(), entry.name, fmt::join(entry.shape, ", "),
                                       fmt::join(shape, ", ")));
      break;
    }
  }
  if (layers > 0 && layers != config.num_hidden_layers())
    problems.push_back(fmt::format("{}: holds {} encoder layers; config.json says {}",
                                   file.string(), layers, config.num_hidden_layers()));
}

/// The problem with task.max_seq_length against the model's longest input, if there is one.
std::optional<std::string> max_length_problem(const Recipe& recipe,
                                              const BertConfig& config,
                                              const fs::path& config_file) {
  if (!recipe.adapter || recipe.adapter->max_seq_length() <= config.max_sequence_length())
    return std::nullopt;
  return fmt::format(
      "{}: task.max_seq_length {} exceeds the model's longest input {} (max_position_embeddings "
      "{}{}; {})",
      recipe.file.string(), recipe.adapter->max_seq_length(), config.max_sequence_length(),
      config.max_position_embeddings(),
      config.positions_after_padding() ? " less pad_token_id + 1" : "", config_file.string());
}

/// data.dev is scored at every evaluation, so each of its examples needs a gold label: said
/// here, before training, rather than by the first evaluation an epoch later. A set from the
/// feature cache lacks the first unlabelled example's place; it is featurized again to name it.
void check_dev_labelled(const Recipe& recipe,
                        const std::string& split,
                        const data::DataSpec& spec,
                        const std::shared_ptr<const tasks::ExampleSet>& examples,
                        const tasks::FeatureSet& dev,
                        const tok::Tokenizer& tokenizer) {
  if (dev.labelled || examples->size() == 0) return;
  const auto named = dev.first_unlabelled.empty()
                         ? recipe.adapter->featurize(examples, tokenizer, false)
                         : nullptr;
  const auto& set = named ? *named : dev;
  if (set.num_unlabelled == 0) return;  // no example lacks a label: nothing to name here
  throw DataError(fmt::format(
      "{}: data.{} is scored at {}, but {} of its {} examples have no gold label (the first: "
      "{}); label them or leave them out",
      spec.path.string(), split, split == "dev" ? "each evaluation" : "the end of each trial",
      set.num_unlabelled, examples->size(), set.first_unlabelled));
}

}  // namespace

PreparedTask prepare_task(const Recipe& recipe, const fs::path& cache_dir) {
  PreparedTask p;
  p.dir = PretrainedDir::find(recipe.model.pretrained);
  p.config = read_model_config(p.dir);
  p.tokenizer = tok::load_tokenizer(p.dir, p.config.vocab_size());
  p.adapter = recipe.adapter;
  TORCH_CHECK(p.adapter, recipe.file.string(), ": the recipe has no task adapter");
  if (const auto problem = max_length_problem(recipe, p.config, p.dir.config))
    throw ConfigError(*problem);
  if (recipe.training.label_smoothing > 0 && !p.adapter->supports_label_smoothing())
    throw ConfigError(fmt::format(
        "{}: training.label_smoothing applies to classification losses; task {} has none here",
        recipe.file.string(), recipe.task_type));
  const auto train_examples = p.adapter->read(recipe.data.train);
  const auto dev_examples = p.adapter->read(recipe.data.dev);
  std::vector<std::shared_ptr<const tasks::ExampleSet>> extra_examples;
  for (const auto& [name, spec] : recipe.data.extra_dev)
    extra_examples.push_back(p.adapter->read(spec));
  p.adapter->fit_labels(*train_examples);
  const bool cached = !cache_dir.empty() && p.adapter->cacheable_features();
  std::string common;
  if (cached) {
    YAML::Emitter options;
    options << p.adapter->options();
    common =
        fmt::format("bertft-features-v3|{}|{}|labels={}|{}", recipe.task_type, options.c_str(),
                    fmt::join(p.adapter->labels(), "\x1f"), tokenizer_fingerprint(p.dir, p.config));
  }
  const auto featurize = [&](const std::shared_ptr<const tasks::ExampleSet>& examples,
                             const data::DataSpec& spec, bool training) {
    if (!cached) return p.adapter->featurize(examples, *p.tokenizer, training);
    return tasks::cached_featurize(
        *p.adapter, examples, *p.tokenizer, training, cache_dir,
        common + (training ? "|train|" : "|eval|") + spec_fingerprint(spec));
  };
  p.train = featurize(train_examples, recipe.data.train, true);
  p.dev = featurize(dev_examples, recipe.data.dev, false);
  check_dev_labelled(recipe, "dev", recipe.data.dev, dev_examples, *p.dev, *p.tokenizer);
  for (size_t i = 0; i < extra_examples.size(); ++i) {
    const auto& [name, spec] = recipe.data.extra_dev[i];
    p.extra_dev.emplace_back(name, featurize(extra_examples[i], spec, false));
    check_dev_labelled(recipe, "extra_dev." + name, spec, extra_examples[i],
                       *p.extra_dev.back().second, *p.tokenizer);
  }
  return p;
}

bool try_step(std::vector<std::string>& problems, const std::function<void()>& step) {
  try {
    step();
    return true;
  } catch (const ConfigError& e) {
    for (const auto& p : e.problems()) problems.push_back(p);
  } catch (const std::exception& e) {
    problems.push_back(message_of(e));
  }
  return false;
}

std::vector<std::string> input_problems(const Recipe& recipe, bool read_data) {
  std::vector<std::string> problems;
  try_step(problems, [&] {
    usable_device(recipe.training.device, recipe.file.string() + ": training.device");
  });
  PretrainedDir dir;
  BertConfig config;
  std::unique_ptr<tok::Tokenizer> tokenizer;
  const bool model_ok =
      try_step(problems, [&] { dir = PretrainedDir::find(recipe.model.pretrained); }) &&
      try_step(problems, [&] { config = read_model_config(dir); });
  if (model_ok) {
    try_step(problems, [&] { tokenizer = tok::load_tokenizer(dir, config.vocab_size()); });
    if (tokenizer) {
      const auto file = tok::tokenizer_file(dir).value_or(dir.dir).string();
      for (const auto& token : tok::missing_input_tokens(tokenizer->special_tokens()))
        problems.push_back(fmt::format("{}: no special token {} in the vocabulary", file, token));
    }
    if (dir.format == WeightsFormat::kSafetensors)
      try_step(problems, [&] { check_weight_shapes(dir.weights, config, problems); });
    if (const auto problem = max_length_problem(recipe, config, dir.config))
      problems.push_back(*problem);
  }
  if (!read_data || !recipe.adapter) return problems;
  auto& adapter = *recipe.adapter;
  std::shared_ptr<const tasks::ExampleSet> train;
  const bool train_ok = try_step(problems, [&] { train = adapter.read(recipe.data.train); });
  // The scored splits, each needing every gold label: data.dev, then data.extra_dev's sets.
  std::vector<std::pair<std::string, const data::DataSpec*>> scored = {{"dev", &recipe.data.dev}};
  for (const auto& [name, spec] : recipe.data.extra_dev)
    scored.emplace_back("extra_dev." + name, &spec);
  std::vector<std::shared_ptr<const tasks::ExampleSet>> examples(scored.size());
  for (size_t i = 0; i < scored.size(); ++i)
    try_step(problems, [&] { examples[i] = adapter.read(*scored[i].second); });
  if (recipe.data.test) try_step(problems, [&] { adapter.read(*recipe.data.test); });
  for (const auto& [name, spec] : recipe.data.extra_test)
    try_step(problems, [&, &spec = spec] { adapter.read(spec); });
  if (!train_ok || !tokenizer || !try_step(problems, [&] { adapter.fit_labels(*train); }))
    return problems;
  try_step(problems, [&] { adapter.featurize(train, *tokenizer, true); });
  for (size_t i = 0; i < scored.size(); ++i) {
    if (!examples[i]) continue;  // its reading failed, said above
    try_step(problems, [&] {
      check_dev_labelled(recipe, scored[i].first, *scored[i].second, examples[i],
                         *adapter.featurize(examples[i], *tokenizer, false), *tokenizer);
    });
  }
  return problems;
}

tasks::TaskModel build_pretrained_model(const PreparedTask& prepared) {
  auto model = prepared.adapter->build_model(prepared.config);
  LoadOptions options;
  options.strict = false;
  options.tied_aliases = BertForPreTrainingImpl::tied_aliases();
  const auto source = prepared.dir.weights.string();
  const auto report = load_state_dict(*model, read_weights(prepared.dir.weights), source, options);
  std::vector<std::string> problems, fresh;
  const auto base = family_base_prefix(prepared.config.family()) + ".";
  for (const auto& key : report.missing)
    (starts_with(key, base) && !starts_with(key, base + "pooler.") ? problems : fresh)
        .push_back("missing " + key);
  for (const auto& what : report.mismatched)
    (starts_with(what, base) ? problems : fresh).push_back("mismatched " + what);
  if (!problems.empty())
    throw CheckpointError(
        fmt::format("{}: the encoder does not fit the config ({} problems):\n  {}", source,
                    problems.size(), fmt::join(problems, "\n  ")));
  log::info("[model] {} tensors from {}; newly initialised: {}; unused: {}", report.loaded, source,
            fresh.empty() ? "none" : fmt::format("{}", fmt::join(fresh, ", ")),
            report.unexpected.size());
  return model;
}

ExitCode run_trial(const Recipe& recipe,
                   const TrialDir& dir,
                   const fs::path& cache_dir,
                   const std::string& trial_name,
                   std::shared_ptr<tasks::DataParallel> group) {
  const auto start = std::chrono::steady_clock::now();
  const bool lead = !group || group->rank() == 0;
  std::optional<FileLock> lock;
  if (lead) {
    lock = FileLock::try_acquire(dir.lock());
    if (!lock) {
      const auto pid = FileLock::holder(dir.lock());
      throw TrialBusy(fmt::format("{}: another process{} is running this trial",
                                  dir.root().string(),
                                  pid && *pid > 0 ? fmt::format(" (pid {})", *pid) : ""));
    }
  }
  if (const auto done = TrialResult::read(dir); done && done->done()) {
    log::info("[trial] {}: done already ({} {:.4f}); delete {} to train it again", trial_name,
              done->main_metric, done->score(), dir.result().string());
    return ExitCode::kOk;
  }
  if (lead) fs::remove(dir.result());  // a failure of an earlier attempt; written anew below
  TrialResult record;
  record.trial = trial_name;
  record.task = recipe.task_type;
  try {
    // Rank 0 tokenises into the cache first; the others then read it.
    if (group && !lead) group->barrier();
    const auto prepared = prepare_task(recipe, cache_dir);
    if (group && lead) group->barrier();
    torch::manual_seed(static_cast<uint64_t>(recipe.training.seed));
    auto model = build_pretrained_model(prepared);
    tasks::Trainer trainer(recipe.training);
    trainer.set_data_parallel(group);
    trainer.set_stop_request(&stop_signalled);
    if (const char* hook = std::getenv("BERTFT_INTERRUPT")) {
      const std::string spec = hook;
      const auto colon = spec.rfind(':');
      if (colon != std::string::npos && spec.substr(0, colon) == trial_name) {
        const int64_t at = std::stoll(spec.substr(colon + 1));
        trainer.set_interrupt_hook([at](int64_t step) { return step >= at; });
      }
    }
    const auto result = trainer.fit(*prepared.adapter, model, *prepared.train, prepared.dev.get(),
                                    dir.training().root());
    if (result.interrupted) return stopped_code();
    // data.extra_dev: the best weights (the model's now) on each set, every rank taking part;
    // a line each in metrics.jsonl (split extra_dev.<name>), their metrics in result.json.
    std::map<std::string, double> extra_metrics;
    for (const auto& [name, features] : prepared.extra_dev) {
      const auto ev = trainer.evaluate(*prepared.adapter, model, *features);
      for (const auto& [metric, value] : ev.metrics) extra_metrics[metric + "_" + name] = value;
      if (!lead) continue;
      log::info("[trial] {}: data.extra_dev.{}: {} {:.4f}", trial_name, name, ev.main_metric,
                ev.main());
      tasks::MetricsLog(dir.training().metrics_log())
          .append({{"step", result.steps},
                   {"split", "extra_dev." + name},
                   {"best_step", result.best_step},
                   {"metrics", nlohmann::json(ev.metrics)}});
    }
    if (!lead) return ExitCode::kOk;
    record.status = TrialStatus::kDone;
    record.main_metric = result.best.main_metric;
    record.goal = result.goal;
    record.main = result.best.main();
    record.metrics = result.best.metrics;
    record.metrics.insert(extra_metrics.begin(), extra_metrics.end());
    record.best_step = result.best_step;
    record.steps = result.steps;
    record.stopped_early = result.stopped_early;
    record.losses = result.losses;
    record.labels = prepared.adapter->labels();
    record.train_features = static_cast<int64_t>(prepared.train->size());
    record.dev_features = static_cast<int64_t>(prepared.dev->size());
    record.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    record.write(dir);
    log::info("[trial] {}: {} {:.4f} at step {}", trial_name, record.main_metric, *record.main,
              record.best_step);
    return ExitCode::kOk;
  } catch (const std::exception& e) {
    if (group && !dynamic_cast<const tasks::DistributedError*>(&e))
      group->report_failure(message_of(e));
    if (lead) {
      record.status = TrialStatus::kFailed;
      record.error = message_of(e);
      record.write(dir);
    }
    throw;
  }
}

}  // namespace bert::recipes
