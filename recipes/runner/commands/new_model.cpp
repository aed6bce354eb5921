// `bertft new-model`.
#include "recipes/runner/new_model.h"

#include "bert/checkpoint/pretrained_dir.h"
#include "bert/common/log.h"
#include "recipes/runner/command.h"

namespace bert::recipes {
namespace {

struct NewModelArgs {
  std::string vocab, out;
  bool lowercase = false;
  int64_t hidden = 128, layers = 2, heads = 2, intermediate = 512, max_positions = 512;
  uint64_t seed = 0;
};

/// A randomly initialised BertForPreTraining (HF's init) in HF layout: the start of a model
/// trained from scratch, and the tiny models of tests and the quickstart. Never over a model
/// already there (a pretrained one's weights would become random) nor over a file; written
/// whole or not at all.
int run_new_model(const NewModelArgs& a) {
  check_out_holds_no_model(a.out, "new-model writes random weights");
  const auto tokenizer = tok::WordPieceTokenizer::from_file(
      a.vocab, wordpiece_options(a.lowercase, tok::CasingCheck::kOff));
  BertConfig config;
  config.vocab_size(tokenizer->vocab_size())
      .hidden_size(a.hidden)
      .num_hidden_layers(a.layers)
      .num_attention_heads(a.heads)
      .intermediate_size(a.intermediate)
      .max_position_embeddings(a.max_positions);
  int64_t params = 0;
  write_model_dir(a.out, [&](const std::filesystem::path& dir) {
    write_random_model(dir, config, *tokenizer, a.seed);
    for (const auto& [name, t] : read_weights(PretrainedDir::find(dir).weights))
      params += t.numel();
  });
  log::info("[new-model] {}: vocab {} | hidden {} | layers {} | heads {} | {:.2f} M parameters",
            a.out, config.vocab_size(), a.hidden, a.layers, a.heads,
            static_cast<double>(params) / 1e6);
  return 0;
}
}  // namespace

CommandRun setup_new_model(CLI::App& app, const GlobalOptions&) {
  auto a = std::make_shared<NewModelArgs>();
  app.add_option("--vocab", a->vocab, "WordPiece vocab.txt")->required()->check(CLI::ExistingFile);
  app.add_option("--out", a->out, "Output directory")->required();
  app.add_flag("--lowercase", a->lowercase, "Uncased tokenizer (lower-case, strip accents)");
  app.add_option("--hidden", a->hidden, "hidden_size")->check(positive());
  app.add_option("--layers", a->layers, "num_hidden_layers")->check(positive());
  app.add_option("--heads", a->heads, "num_attention_heads")->check(positive());
  app.add_option("--intermediate", a->intermediate, "intermediate_size")->check(positive());
  app.add_option("--max-positions", a->max_positions, "max_position_embeddings")->check(positive());
  app.add_option("--seed", a->seed, "Initialisation seed");
  return [a] { return run_new_model(*a); };
}

}  // namespace bert::recipes
