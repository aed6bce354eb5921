// `bertft extend-vocab`.
#include <fmt/format.h>

#include <functional>
#include <memory>
#include <set>

#include "bert/checkpoint/pretrained_dir.h"
#include "bert/checkpoint/resize_vocab.h"
#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/log.h"
#include "bert/tokenizer/byte_level_bpe.h"
#include "bert/tokenizer/factory.h"
#include "bert/tokenizer/sentencepiece_model.h"
#include "recipes/runner/command.h"

namespace bert::recipes {
namespace {

namespace fs = std::filesystem;

/// The lines of `tokens_file` without trailing blanks; empty lines left out.
std::vector<std::string> token_lines(const std::string& tokens_file) {
  std::vector<std::string> out;
  for (auto line : tok::read_vocab_file(tokens_file)) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.pop_back();
    if (!line.empty()) out.push_back(std::move(line));
  }
  return out;
}

/// Writes the grown checkpoint, whole or not at all: weights, config.json (vocab_size
/// `new_size`), then the tokenizer's files (`write_tokenizer`, given the staging directory, which
/// by then holds the weights and config.json).
void write_grown(const PretrainedDir& dir,
                 BertConfig config,
                 int64_t new_size,
                 const std::function<void(const fs::path& staging)>& write_tokenizer,
                 const fs::path& out) {
  TensorMap weights = read_weights(dir.weights);
  grow_vocabulary(weights, config.vocab_size(), new_size);
  config.vocab_size(new_size);
  write_model_dir(out, [&](const fs::path& staging) {
    save_weights(staging, weights);
    save_config(
        staging, config,
        config.architectures().empty() ? "BertForPreTraining" : config.architectures().front(),
        torch_dtype_name(weights));
    write_tokenizer(staging);
  });
}

/// A checkpoint whose tokenizer takes added tokens beside its vocabulary file (byte-level BPE:
/// RoBERTa; SentencePiece with fairseq's ids: XLM-R): the new tokens become added tokens, as
/// HF's `tokenizer.add_tokens` makes them (matched whole in the text; numbered after the
/// vocabulary and the added tokens already there; a token the vocabulary has keeps its id and
/// grows nothing). The vocabulary files are unchanged: neither BPE merges nor a Unigram model
/// can take a new whole token. `rebuild` makes the tokenizer with the given added tokens.
int extend_with_added_tokens(
    const PretrainedDir& dir,
    const std::string& model,
    const tok::Tokenizer& tokenizer,
    const std::vector<tok::AddedToken>& current,
    const std::string& tokens_file,
    const fs::path& out,
    const std::function<std::unique_ptr<tok::Tokenizer>(std::vector<tok::AddedToken>)>& rebuild) {
  const auto config = BertConfig::from_file(dir.config);
  if (tokenizer.vocab_size() != config.vocab_size())
    throw ConfigError(fmt::format(
        "{}: the tokenizer has {} tokens but config.json says vocab_size {}; extend-vocab "
        "numbers new tokens after the tokenizer's (as HF's add_tokens), which needs the two equal",
        model, tokenizer.vocab_size(), config.vocab_size()));
  const auto& special = tokenizer.special_tokens();
  std::set<std::string> known = {special.unk, special.cls, special.sep, special.pad, special.mask};
  auto added = current;
  for (const auto& t : added) known.insert(t.content);
  size_t lines = 0;
  for (auto& line : token_lines(tokens_file)) {
    ++lines;
    if (!known.insert(line).second) continue;
    tok::AddedToken token;  // add_tokens' defaults: not special, normalized, no strip
    token.content = std::move(line);
    added.push_back(std::move(token));
  }
  const auto grown = rebuild(std::move(added));
  grown->set_model_max_length(tokenizer.model_max_length());
  const int64_t old_size = config.vocab_size(), new_size = grown->vocab_size();
  write_grown(
      dir, config, new_size, [&](const fs::path& staging) { grown->save(staging); }, out);
  const auto count = static_cast<size_t>(new_size - old_size);
  log::info(
      "[extend-vocab] {}: {} tokens added ({} already present), vocabulary {} -> {} (added "
      "tokens; the vocabulary files unchanged)",
      out.string(), count, lines - count, old_size, new_size);
  return 0;
}

/// `bertft extend-vocab`: appends tokens to a checkpoint's vocabulary (for continued
/// pre-training on a domain), growing the embeddings and MLM bias as HF's
/// resize_token_embeddings: WordPiece (BERT, DistilBERT, ELECTRA) appends them to vocab.txt,
/// byte-level BPE (RoBERTa) and XLM-R's SentencePiece add them as added tokens.
int run_extend_vocab(const std::string& model,
                     const std::string& tokens_file,
                     const std::string& out_dir) {
  // Never over a model (its own directory included): the grown one is written beside it.
  check_out_holds_no_model(out_dir, "extend-vocab writes the grown model");
  const auto dir = PretrainedDir::find(model);
  if (!dir.vocab && !dir.bpe_vocab && !dir.sentencepiece)
    throw ConfigError(fmt::format(
        "{}: no vocab.txt; extend-vocab appends to a WordPiece vocab.txt (BERT, DistilBERT, "
        "ELECTRA) or adds tokens to a byte-level BPE (RoBERTa) or XLM-R tokenizer",
        model));
  if (!dir.vocab) {
    const auto loaded = tok::load_tokenizer(dir, 0);
    if (const auto* bpe = dynamic_cast<const tok::ByteLevelBpeTokenizer*>(loaded.get()))
      return extend_with_added_tokens(
          dir, model, *bpe, bpe->added_tokens(), tokens_file, out_dir,
          [&](std::vector<tok::AddedToken> added) -> std::unique_ptr<tok::Tokenizer> {
            tok::ByteLevelBpeTokenizer::Options options;
            const auto& s = bpe->special_tokens();
            options.special = {s.unk, s.cls, s.sep, s.pad, s.mask};
            options.added_tokens = std::move(added);
            return tok::ByteLevelBpeTokenizer::from_files(*dir.bpe_vocab, *dir.bpe_merges,
                                                          std::move(options));
          });
    const auto* spm = dynamic_cast<const tok::SentencePieceTokenizer*>(loaded.get());
    if (spm != nullptr && spm->roberta_template())  // fairseq's ids: XLM-R
      return extend_with_added_tokens(
          dir, model, *spm, spm->added_tokens(), tokens_file, out_dir,
          [&](std::vector<tok::AddedToken> added) -> std::unique_ptr<tok::Tokenizer> {
            return std::make_unique<tok::SentencePieceTokenizer>(
                *dir.sentencepiece, tok::SentencePieceIds::kFairseq, std::move(added));
          });
    throw ConfigError(fmt::format(
        "{}: this model's tokenizer is SentencePiece with the model's own ids, whose vocabulary "
        "extend-vocab does not extend (it extends WordPiece's vocab.txt and the added tokens "
        "of byte-level BPE and of XLM-R's SentencePiece)",
        model));
  }
  const auto config = BertConfig::from_file(dir.config);
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
  for (auto& line : token_lines(tokens_file)) {
    if (!known.insert(line).second) {
      ++present;
      continue;
    }
    vocab.push_back(line);
    ++added;
  }
  const auto new_size = static_cast<int64_t>(vocab.size());
  write_grown(
      dir, config, new_size,
      [&](const fs::path& staging) {
        std::string text;
        for (const auto& token : vocab) text += token + "\n";
        write_file_atomic(staging / "vocab.txt", text);
        for (const auto* file : {"tokenizer_config.json", "special_tokens_map.json"})
          if (fs::exists(dir.dir / file)) fs::copy_file(dir.dir / file, staging / file);
        tok::load_tokenizer(PretrainedDir::find(staging), new_size)->save(staging);
      },
      out_dir);
  log::info("[extend-vocab] {}: {} tokens added ({} already present), vocabulary {} -> {}", out_dir,
            added, present, vocab.size() - added, vocab.size());
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
  app.add_option("--out", a->out,
                 "New output directory (not a model's; the grown model goes there)")
      ->required();
  return [a] { return run_extend_vocab(a->model, a->tokens, a->out); };
}

}  // namespace bert::recipes
