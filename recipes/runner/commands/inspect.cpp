// `bertft inspect`.
#include <fmt/format.h>

#include "bert/checkpoint/family_keys.h"
#include "bert/checkpoint/load.h"
#include "bert/checkpoint/pretrained_dir.h"
#include "bert/common/log.h"
#include "bert/common/strings.h"
#include "bert/model/pretraining.h"
#include "bert/tokenizer/factory.h"
#include "recipes/runner/command.h"
#include "recipes/runner/export.h"
#include "recipes/runner/run_dir.h"
#include "tasks/registry.h"

namespace bert::recipes {
namespace {

bool has_prefix_key(const TensorMap& tensors, const std::string& prefix) {
  for (const auto& [k, v] : tensors) {
    const auto base = base_prefix_of(k);  // "bert.", "roberta.", ...
    if (starts_with(base ? k.substr(base->size()) : k, prefix)) return true;
  }
  return false;
}

int run_inspect(const std::string& model_dir, bool strict) {
  const auto dir = PretrainedDir::find(model_dir);
  const auto config = read_model_config(dir);
  const TensorMap tensors = read_weights(dir.weights);
  LoadOptions options;
  options.strict = strict;
  LoadReport report;
  std::string architecture;
  const auto* task =
      config.architectures().empty()
          ? nullptr
          : tasks::TaskRegistry::global().find_by_architecture(config.architectures().front());
  // The task model config.json names (another family's XxxForMaskedLM is the pretraining
  // task's model too; BERT's pre-training checkpoints are read as BertForPreTraining below).
  if (task && (task->name != "pretraining" || config.family() != ModelFamily::kBert)) {
    architecture = config.architectures().front();
    if (const auto problem = config.problem_type()) architecture += " (" + *problem + ")";
    const auto adapter = task_of_model_dir(dir, config);
    auto model = adapter->build_model(config);
    options.tied_aliases = BertForPreTrainingImpl::tied_aliases();
    report = load_state_dict(*model, tensors, dir.weights.string(), options);
  } else if (has_prefix_key(tensors, "cls.")) {
    architecture = "BertForPreTraining";
    BertForPreTraining model(config);
    options.tied_aliases = BertForPreTrainingImpl::tied_aliases();
    report = load_state_dict(*model, tensors, dir.weights.string(), options);
  } else {
    architecture = family_class_stem(config.family()) + "Model" +
                   (has_prefix_key(tensors, "pooler.") ? "" : " (no pooler)");
    BertModel model(config, has_prefix_key(tensors, "pooler."));
    report = load_state_dict(*model, tensors, dir.weights.string(), options);
  }
  int64_t params = 0;
  for (const auto& [k, t] : tensors) params += t.numel();
  fmt::print("model      {}\n", dir.dir.string());
  fmt::print("weights    {} ({} tensors, {:.2f} M values)\n", dir.weights.filename().string(),
             tensors.size(), params / 1e6);
  fmt::print(
      "config     vocab {} | hidden {} | layers {} | heads {} | intermediate {} | act {} | "
      "max positions {} | labels {}\n",
      config.vocab_size(), config.hidden_size(), config.num_hidden_layers(),
      config.num_attention_heads(), config.intermediate_size(),
      activation_name(config.hidden_act()), config.max_position_embeddings(), config.num_labels());
  fmt::print("loaded as  {}\n", architecture);
  fmt::print("report     {}\n", report.summary());
  for (const auto& name : report.unexpected) fmt::print("  unexpected {}\n", name);
  for (const auto& name : report.missing) fmt::print("  missing    {}\n", name);
  for (const auto& what : report.mismatched) fmt::print("  mismatched {}\n", what);
  for (const auto& what : report.renamed) fmt::print("  renamed    {}\n", what);
  for (const auto& name : report.ignored) fmt::print("  ignored    {}\n", name);
  if (const auto file = tok::tokenizer_file(dir)) {
    const auto tokenizer = tok::load_tokenizer(dir, config.vocab_size());
    fmt::print("tokenizer  {} ({} entries; [CLS]={} [SEP]={} [PAD]={} [UNK]={} [MASK]={})\n",
               tok::tokenizer_kind(*tokenizer), tokenizer->vocab_size(),
               tokenizer->special_tokens().cls_id, tokenizer->special_tokens().sep_id,
               tokenizer->special_tokens().pad_id, tokenizer->special_tokens().unk_id,
               tokenizer->special_tokens().mask_id);
    const auto missing = tok::missing_input_tokens(tokenizer->special_tokens());
    for (const auto& token : missing)
      log::error("{}: no special token {} in the vocabulary", file->string(), token);
    if (!missing.empty()) return code(ExitCode::kFailed);
  }
  return code(ExitCode::kOk);
}
}  // namespace

CommandRun setup_inspect(CLI::App& app, const GlobalOptions&) {
  auto dir = std::make_shared<std::string>();
  auto strict = std::make_shared<bool>(false);
  app.add_option("model,--model", *dir, "Model directory (or as --model, like predict's)")
      ->required()
      ->check(CLI::ExistingDirectory);
  app.add_flag("--strict", *strict, "Fail on missing or unexpected keys");
  return [dir, strict] { return run_inspect(*dir, *strict); };
}

}  // namespace bert::recipes
