// `bertft extend-vocab`.
#include <fmt/format.h>

#include <set>

#include "bert/checkpoint/pretrained_dir.h"
#include "bert/checkpoint/resize_vocab.h"
#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/log.h"
#include "bert/tokenizer/factory.h"
#include "recipes/runner/command.h"

namespace bert::recipes {
namespace {

namespace fs = std::filesystem;

/// `bertft extend-vocab`: appends tokens to a WordPiece checkpoint's vocabulary (BERT, DistilBERT,
/// ELECTRA; for continued pre-training on a domain), growing the embeddings and MLM bias as HF's
/// resize_token_embeddings.
int run_extend_vocab(const std::string& model,
                     const std::string& tokens_file,
                     const std::string& out_dir) {
  const auto dir = PretrainedDir::find(model);
  if (!dir.vocab && !dir.bpe_vocab && !dir.sentencepiece)
    throw ConfigError(fmt::format(
        "{}: no vocab.txt; extend-vocab appends to a WordPiece vocab.txt (BERT, DistilBERT, "
        "ELECTRA)",
        model));
  if (!dir.vocab)
    throw ConfigError(fmt::format(
        "{}: extend-vocab appends to a WordPiece vocab.txt (BERT, DistilBERT, ELECTRA); this "
        "model's tokenizer is {}, whose vocabulary it does not extend",
        model, dir.bpe_vocab ? "byte-level BPE (vocab.json)" : "SentencePiece"));
  auto config = BertConfig::from_file(dir.config);
  auto vocab = tok::read_vocab_file(*dir.vocab);
  if (const auto current = tok::load_tokenizer(dir, 0)->vocab_size();
      current > static_cast<int64_t>(vocab.size()))
    throw ConfigError(fmt::format(
        "{}: the tokenizer has {} added tokens (added_tokens.json, tokenizer.json) numbered after "
        "vocab.txt's {} lines; appending to vocab.txt would renumber them. Extend a model "
        "without added tokens (HF's add_tokens can add them again afterwards)",
        model, current - static_cast<int64_t>(vocab.size()), vocab.size()));
  if (static_cast<int64_t>(vocab.size()) != config.vocab_size())
    throw ConfigError(fmt::format("{}: {} entries but config.json says vocab_size {}",
                                  dir.vocab->string(), vocab.size(), config.vocab_size()));
  std::set<std::string> known(vocab.begin(), vocab.end());
  size_t added = 0, present = 0;
  for (auto line : tok::read_vocab_file(tokens_file)) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.pop_back();
    if (line.empty()) continue;
    if (!known.insert(line).second) {
      ++present;
      continue;
    }
    vocab.push_back(line);
    ++added;
  }
  TensorMap weights = read_weights(dir.weights);
  grow_vocabulary(weights, config.vocab_size(), static_cast<int64_t>(vocab.size()));
  config.vocab_size(static_cast<int64_t>(vocab.size()));
  const fs::path out(out_dir);
  fs::create_directories(out);
  std::string text;
  for (const auto& token : vocab) text += token + "\n";
  write_file_atomic(out / "vocab.txt", text);
  for (const auto* file : {"tokenizer_config.json", "special_tokens_map.json"})
    if (fs::exists(dir.dir / file) && fs::absolute(dir.dir) != fs::absolute(out))
      fs::copy_file(dir.dir / file, out / file, fs::copy_options::overwrite_existing);
  fs::remove(out / "tokenizer.json");  // stale; written again below
  save_weights(out, weights);
  save_config(
      out, config,
      config.architectures().empty() ? "BertForPreTraining" : config.architectures().front());
  tok::load_tokenizer(PretrainedDir::find(out), config.vocab_size())->save(out);
  log::info("[extend-vocab] {}: {} tokens added ({} already present), vocabulary {} -> {}",
            out.string(), added, present, vocab.size() - added, vocab.size());
  return 0;
}
}  // namespace

CommandRun setup_extend_vocab(CLI::App& app, const GlobalOptions&) {
  struct Args {
    std::string model, tokens, out;
  };
  auto a = std::make_shared<Args>();
  app.add_option("--model", a->model, "Model directory")->required()->check(CLI::ExistingDirectory);
  app.add_option("--tokens", a->tokens,
                 "One token per line (e.g. a vocab.txt from `bertft vocab`; tokens already "
                 "present are skipped)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--out", a->out, "Output directory")->required();
  return [a] { return run_extend_vocab(a->model, a->tokens, a->out); };
}

}  // namespace bert::recipes
