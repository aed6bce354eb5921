// `bertft pretrain-data`.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "bert/checkpoint/pretrained_dir.h"
#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/log.h"
#include "bert/tokenizer/factory.h"
#include "data/corpus.h"
#include "recipes/runner/command.h"
#include "tasks/pretraining/instances.h"

namespace bert::recipes {
namespace {

struct PretrainDataArgs {
  std::vector<std::string> inputs;
  std::string model, vocab, out;
  bool lowercase = false;
  int tokenizer_threads = 0;
  tasks::PretrainingDataOptions options;
};

namespace fs = std::filesystem;

/// Whether `name` is a file pretrain-data writes (the trainer reads every instances-*.bin of
/// a directory, so stale shards of an earlier corpus would be trained on too).
bool written_by_pretrain_data(const std::string& name) {
  return name == "stats.json" || (name.rfind("instances-", 0) == 0 && name.size() > 14 &&
                                  name.compare(name.size() - 4, 4, ".bin") == 0);
}

/// Throws ConfigError where the shards may not replace `out` whole: a file, or a directory
/// with anything pretrain-data did not write (named, the first three).
void check_shard_target(const fs::path& out) {
  if (!fs::exists(out)) return;
  if (!fs::is_directory(out))
    throw ConfigError(fmt::format("--out {}: is a file; pretrain-data writes a directory of shards",
                                  out.string()));
  const auto listed =
      foreign_entries(out, [](const std::string& name) { return !written_by_pretrain_data(name); });
  if (listed.empty()) return;
  throw ConfigError(fmt::format(
      "--out {}: holds files that pretrain-data did not write ({}); the shards replace their "
      "directory whole, so give a new or empty directory (or one of earlier shards)",
      out.string(), listed));
}

/// `bertft pretrain-data`: corpus files -> instance shards + stats.json, replacing `out`
/// whole (an earlier run's shards would otherwise stay beside the new ones) once all are
/// written in a staging directory beside it.
int run_pretrain_data(const PretrainDataArgs& a) {
  const auto out = directory_path(a.out);
  check_shard_target(out);
  std::unique_ptr<tok::Tokenizer> tokenizer;
  if (a.model.empty() == a.vocab.empty())
    throw ConfigError("pretrain-data: give exactly one of --model and --vocab");
  if (!a.model.empty()) {
    const auto dir = PretrainedDir::find(a.model);
    tokenizer = tok::load_tokenizer(dir, BertConfig::from_file(dir.config).vocab_size());
  } else {
    tokenizer = tok::WordPieceTokenizer::from_file(
        a.vocab, wordpiece_options(a.lowercase, tok::CasingCheck::kError));
  }
  std::vector<data::RawDocument> raw;
  for (const auto& input : a.inputs) {
    auto docs = data::read_corpus(input);
    log::info("[pretrain-data] {}: {} documents", input, docs.size());
    raw.insert(raw.end(), std::make_move_iterator(docs.begin()),
               std::make_move_iterator(docs.end()));
  }
  const auto documents = tasks::tokenize_corpus(raw, *tokenizer, a.tokenizer_threads);
  if (documents.empty()) throw DataError("pretrain-data: the corpus has no text");
  const auto instances = tasks::create_instances(documents, a.options, tokenizer->special_tokens(),
                                                 tokenizer->vocab_size());
  tasks::InstanceStats stats;
  const auto staging = write_staged(out, [&](const fs::path& dir) {
    stats = tasks::write_instance_shards(instances, dir, a.options,
                                         tokenizer->special_tokens().mask_id);
  });
  check_shard_target(out);  // again: the user may have put something there meanwhile
  remove_tree(out);
  fs::rename(staging, out);
  fmt::print("{}\n", stats.to_json().dump(1));
  return 0;
}
}  // namespace

CommandRun setup_pretrain_data(CLI::App& app, const GlobalOptions&) {
  auto a = std::make_shared<PretrainDataArgs>();
  app.add_option("inputs", a->inputs,
                 "Corpus files: one sentence per line, blank line between documents; or .jsonl "
                 "with one {\"text\": ...} document per line")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--model", a->model, "Model directory whose tokenizer to use")
      ->check(CLI::ExistingDirectory);
  app.add_option("--vocab", a->vocab, "WordPiece vocab.txt")->check(CLI::ExistingFile);
  app.add_flag("--lowercase", a->lowercase, "With --vocab: uncased");
  app.add_option("--out", a->out,
                 "Output directory (replaced whole: new, empty, or earlier shards)")
      ->required();
  app.add_option("--tokenizer-threads", a->tokenizer_threads, "Tokenizer threads (0 = all)");
  auto& po = a->options;
  app.add_option("--max-seq-length", po.max_seq_length, "Tokens per instance");
  app.add_option("--max-predictions-per-seq", po.max_predictions_per_seq, "Most masked positions");
  app.add_option("--masked-lm-prob", po.masked_lm_prob, "Share of tokens to predict");
  app.add_option("--short-seq-prob", po.short_seq_prob, "Share of shorter instances");
  app.add_option("--random-next-prob", po.random_next_prob, "Share of NotNext pairs");
  app.add_option("--dupe-factor", po.dupe_factor, "Passes with fresh pairs and masks");
  app.add_flag("--whole-word-mask", po.whole_word_mask, "Mask whole words");
  app.add_flag("--static-masking,!--dynamic-masking", po.static_masking,
               "Store unmasked instances; the trainer masks on the fly");
  app.add_option("--seed", po.seed, "Random seed");
  app.add_option("--instances-per-shard", po.instances_per_shard, "Instances per shard file");
  app.add_option("--packing", po.packing,
                 "pairs: BERT's sentence pairs with NSP labels; full_sentences: RoBERTa's packing "
                 "(whole sentences across documents, [SEP] between documents, no NSP label)")
      ->check(CLI::IsMember({"pairs", "full_sentences"}));
  return [a] { return run_pretrain_data(*a); };
}

}  // namespace bert::recipes
