#include "recipes/runner/trial.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cstdlib>

#include "bert/checkpoint/load.h"
#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/log.h"
#include "bert/common/strings.h"
#include "bert/model/pretraining.h"
#include "bert/tokenizer/factory.h"
#include "tasks/common/feature_cache.h"
#include "tasks/registry.h"
#include "tasks/training/trainer.h"

namespace bert::recipes {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string hash_file(const fs::path& path) {
  return fmt::format("{:016x}", fnv1a64(read_file(path)));
}

std::string tokenizer_fingerprint(const PretrainedDir& dir, const BertConfig& config) {
  std::string out = fmt::format("vocab_size={}", config.vocab_size());
  for (const auto& file : {dir.vocab, dir.sentencepiece, dir.tokenizer_config})
    if (file) out += "|" + file->filename().string() + "=" + hash_file(*file);
  return out;
}

std::string spec_fingerprint(const data::DataSpec& spec) {
  YAML::Emitter e;
  e << write_struct(spec);
  return std::string(e.c_str()) + "|bytes=" + hash_file(spec.path);
}

}  // namespace

PreparedTask prepare_task(const Recipe& recipe, const fs::path& cache_dir) {
  PreparedTask p;
  p.dir = PretrainedDir::find(recipe.model.pretrained);
  p.config = BertConfig::from_file(p.dir.config);
  p.tokenizer = tok::load_tokenizer(p.dir, p.config.vocab_size());
  const YamlReader task_reader(recipe.task, recipe.file.string(), "task");
  task_reader.allow("type");
  p.adapter = tasks::TaskRegistry::global().create(recipe.task_type, task_reader);
  if (const auto length = p.adapter->options()["max_seq_length"];
      length && length.as<int64_t>() > p.config.max_position_embeddings())
    throw ConfigError(fmt::format(
        "{}: task.max_seq_length {} exceeds the model's max_position_embeddings {} ({})",
        recipe.file.string(), length.as<int64_t>(), p.config.max_position_embeddings(),
        p.dir.config.string()));
  const auto train_examples = p.adapter->read(recipe.data.train);
  const auto dev_examples = p.adapter->read(recipe.data.dev);
  p.adapter->fit_labels(*train_examples);
  if (cache_dir.empty() || !p.adapter->cacheable_features()) {
    p.train = p.adapter->featurize(train_examples, *p.tokenizer, true);
    p.dev = p.adapter->featurize(dev_examples, *p.tokenizer, false);
    return p;
  }
  YAML::Emitter options;
  options << p.adapter->options();
  const std::string common =
      fmt::format("bertft-features-v1|{}|{}|labels={}|{}", recipe.task_type, options.c_str(),
                  fmt::join(p.adapter->labels(), "\x1f"), tokenizer_fingerprint(p.dir, p.config));
  p.train = tasks::cached_featurize(*p.adapter, train_examples, *p.tokenizer, true, cache_dir,
                                    common + "|train|" + spec_fingerprint(recipe.data.train));
  p.dev = tasks::cached_featurize(*p.adapter, dev_examples, *p.tokenizer, false, cache_dir,
                                  common + "|eval|" + spec_fingerprint(recipe.data.dev));
  return p;
}

tasks::TaskModel build_pretrained_model(const PreparedTask& prepared) {
  auto model = prepared.adapter->build_model(prepared.config);
  LoadOptions options;
  options.strict = false;
  options.tied_aliases = BertForPreTrainingImpl::tied_aliases();
  const auto source = prepared.dir.weights.string();
  const auto report = load_state_dict(*model, read_weights(prepared.dir.weights), source, options);
  std::vector<std::string> problems, fresh;
  for (const auto& key : report.missing)
    (starts_with(key, "bert.") && !starts_with(key, "bert.pooler.") ? problems : fresh)
        .push_back("missing " + key);
  for (const auto& what : report.mismatched)
    (starts_with(what, "bert.") ? problems : fresh).push_back("mismatched " + what);
  if (!problems.empty())
    throw CheckpointError(
        fmt::format("{}: the encoder does not fit the config ({} problems):\n  {}", source,
                    problems.size(), fmt::join(problems, "\n  ")));
  log::info("[model] {} tensors from {}; newly initialised: {}; unused: {}", report.loaded, source,
            fresh.empty() ? "none" : fmt::format("{}", fmt::join(fresh, ", ")),
            report.unexpected.size());
  return model;
}

json read_result(const fs::path& trial_dir) {
  const auto path = trial_dir / "result.json";
  if (!fs::exists(path)) return nullptr;
  try {
    return json::parse(read_file(path));
  } catch (const std::exception&) {
    return nullptr;
  }
}

int run_trial(const Recipe& recipe,
              const fs::path& out,
              const fs::path& cache_dir,
              const std::string& trial_name) {
  const auto start = std::chrono::steady_clock::now();
  fs::create_directories(out);
  fs::remove(out / "result.json");  // a failure of an earlier attempt; written anew below
  try {
    const auto prepared = prepare_task(recipe, cache_dir);
    torch::manual_seed(static_cast<uint64_t>(recipe.training.seed));
    auto model = build_pretrained_model(prepared);
    tasks::Trainer trainer(recipe.training);
    if (const char* hook = std::getenv("BERTFT_INTERRUPT")) {
      const std::string spec = hook;
      const auto colon = spec.rfind(':');
      if (colon != std::string::npos && spec.substr(0, colon) == trial_name) {
        const int64_t at = std::stoll(spec.substr(colon + 1));
        trainer.set_interrupt_hook([at](int64_t step) { return step >= at; });
      }
    }
    const auto result =
        trainer.fit(*prepared.adapter, model, *prepared.train, prepared.dev.get(), out);
    if (result.interrupted) return 3;
    const json record = {
        {"status", "done"},
        {"trial", trial_name},
        {"task", recipe.task_type},
        {"main_metric", result.best.main_metric},
        {"main", result.best.main()},
        {"metrics", result.best.metrics},
        {"best_step", result.best_step},
        {"steps", result.steps},
        {"stopped_early", result.stopped_early},
        {"losses", result.losses},
        {"labels", prepared.adapter->labels()},
        {"train_features", prepared.train->features.size()},
        {"dev_features", prepared.dev->features.size()},
        {"seconds",
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()}};
    write_file_atomic(out / "result.json", record.dump(1) + "\n");
    log::info("[trial] {}: {} {:.4f} at step {}", trial_name, result.best.main_metric,
              result.best.main(), result.best_step);
    return 0;
  } catch (const std::exception& e) {
    const json record = {{"status", "failed"}, {"trial", trial_name}, {"error", e.what()}};
    write_file_atomic(out / "result.json", record.dump(1) + "\n");
    throw;
  }
}

}  // namespace bert::recipes
