// `bertft convert`.
#include "bert/checkpoint/load.h"
#include "bert/checkpoint/pretrained_dir.h"
#include "bert/common/log.h"
#include "bert/model/pretraining.h"
#include "bert/tokenizer/factory.h"
#include "recipes/runner/command.h"

namespace bert::recipes {
namespace {

namespace fs = std::filesystem;

/// `bertft convert`: any weights format -> safetensors (sharded above `shard_mb`), with the
/// config and tokenizer, into a new directory: never over a model (the source's own included:
/// two weights files there, the first found would win), written whole or not at all.
int run_convert(const std::string& model_dir, const std::string& out, double shard_mb) {
  check_out_holds_no_model(out, "convert writes the converted model");
  const auto dir = PretrainedDir::find(model_dir);
  const auto config = BertConfig::from_file(dir.config);
  TensorMap tensors = read_weights(dir.weights);
  // Tied aliases and non-persistent buffers are not written, as HF's safetensors writer does.
  for (const auto& [alias, target] : BertForPreTrainingImpl::tied_aliases())
    if (tensors.count(target)) tensors.erase(alias);
  for (auto it = tensors.begin(); it != tensors.end();)
    it = is_legacy_buffer_key(it->first) ? tensors.erase(it) : std::next(it);
  write_model_dir(out, [&](const fs::path& staging) {
    save_weights(staging, tensors, static_cast<int64_t>(shard_mb * (1 << 20)));
    const std::string architecture =
        config.architectures().empty() ? "BertModel" : config.architectures().front();
    save_config(staging, config, architecture, torch_dtype_name(tensors));
    if (dir.vocab || dir.sentencepiece)
      tok::load_tokenizer(dir, config.vocab_size())->save(staging);
  });
  log::info("[convert] {} -> {}: {} tensors", dir.weights.string(), out, tensors.size());
  return 0;
}
}  // namespace

CommandRun setup_convert(CLI::App& app, const GlobalOptions&) {
  struct Args {
    std::string dir, out;
    double shard_mb = 0;
  };
  auto a = std::make_shared<Args>();
  app.add_option("model,--model", a->dir, "Model directory (or as --model, like predict's)")
      ->required()
      ->check(CLI::ExistingDirectory);
  app.add_option("--out", a->out, "New output directory (not a model's)")->required();
  app.add_option("--shard-size", a->shard_mb, "Shard above this many MiB (0 = one file)")
      ->check(non_negative());
  return [a] { return run_convert(a->dir, a->out, a->shard_mb); };
}

}  // namespace bert::recipes
