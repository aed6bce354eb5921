// `bertft vocab`.
#include "bert/common/log.h"
#include "bert/tokenizer/sentencepiece_model.h"
#include "bert/tokenizer/vocab_trainer.h"
#include "data/corpus.h"
#include "recipes/runner/command.h"

namespace bert::recipes {
namespace {

namespace fs = std::filesystem;

struct VocabArgs {
  std::vector<std::string> inputs;
  std::string out, type = "wordpiece", model_type = "unigram";
  int64_t vocab_size = 30522, min_frequency = 2;
  bool lowercase = false;
};

/// `bertft vocab`: a WordPiece vocab.txt or a SentencePiece model trained on corpus files (never
/// into a model's directory: its weights index the vocabulary there), its files written as one
/// set by write_model_dir.
int run_vocab(const VocabArgs& a) {
  check_out_holds_no_model(a.out, "vocab writes a new vocabulary");
  // Before the training (write_model_dir checks again with what was written).
  const bool sentencepiece = a.type == "sentencepiece";
  check_no_other_tokenizer(a.out, [&](const std::string& name) {
    return name == "tokenizer_config.json" ||
           (sentencepiece ? name == "spiece.model" || name == "spiece.vocab"
                          : name == "vocab.txt" || name == "special_tokens_map.json" ||
                                name == "tokenizer.json");
  });
  if (sentencepiece) {
    std::vector<fs::path> inputs(a.inputs.begin(), a.inputs.end());
    int64_t pieces = 0;
    write_model_dir(a.out, [&](const fs::path& dir) {
      tok::train_sentencepiece(inputs, (dir / "spiece").string(), a.vocab_size, a.model_type);
      const tok::SentencePieceTokenizer tokenizer(dir / "spiece.model");
      tokenizer.save(dir);
      pieces = tokenizer.vocab_size();
    });
    log::info("[vocab] {}: {} pieces", (fs::path(a.out) / "spiece.model").string(), pieces);
    return 0;
  }
  std::vector<std::string> texts;
  for (const auto& input : a.inputs)
    for (const auto& doc : data::read_corpus(input))
      texts.insert(texts.end(), doc.sentences.begin(), doc.sentences.end());
  tok::WordPieceTrainerOptions options;
  options.vocab_size = a.vocab_size;
  options.min_frequency = a.min_frequency;
  options.lowercase = a.lowercase;
  auto vocab = tok::train_wordpiece(texts, options);
  const tok::WordPieceTokenizer tokenizer(
      std::move(vocab), wordpiece_options(a.lowercase, tok::CasingCheck::kOff), "trained vocab");
  write_model_dir(a.out, [&](const fs::path& dir) { tokenizer.save(dir); });
  log::info("[vocab] {}: {} entries", (fs::path(a.out) / "vocab.txt").string(),
            tokenizer.vocab_size());
  return 0;
}
}  // namespace

CommandRun setup_vocab(CLI::App& app, const GlobalOptions&) {
  auto a = std::make_shared<VocabArgs>();
  app.add_option("inputs", a->inputs,
                 "Corpus files (as pretrain-data reads them; SentencePiece: one sentence per line)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--out", a->out, "Output directory (vocab.txt or spiece.model, tokenizer files)")
      ->required();
  app.add_option("--type", a->type, "wordpiece | sentencepiece")
      ->check(CLI::IsMember({"wordpiece", "sentencepiece"}));
  app.add_option("--model-type", a->model_type, "SentencePiece: unigram | bpe")
      ->check(CLI::IsMember({"unigram", "bpe"}));
  app.add_option("--vocab-size", a->vocab_size, "Entries, special tokens included")
      ->check(positive());
  app.add_option("--min-frequency", a->min_frequency, "WordPiece: least count of a merged pair")
      ->check(non_negative());
  app.add_flag("--lowercase", a->lowercase, "WordPiece: uncased (lower-case, strip accents)");
  return [a] { return run_vocab(*a); };
}

}  // namespace bert::recipes
