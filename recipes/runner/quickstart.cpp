#include "recipes/runner/quickstart.h"

#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/log.h"
#include "bert/common/threads.h"
#include "bert/tokenizer/wordpiece.h"
#include "data/corpus.h"
#include "data/text_file.h"
#include "recipes/runner/export.h"
#include "recipes/runner/new_model.h"
#include "recipes/runner/recipe.h"
#include "recipes/runner/run_dir.h"
#include "recipes/runner/sweep.h"
#include "recipes/runner/trial.h"
#include "tasks/pretraining/instances.h"

namespace bert::recipes {
namespace {

namespace fs = std::filesystem;

const std::string kConsonants = "bdfgklmnprstvz", kVowels = "aeiou";

/// A lower-case vocabulary made only from syllables: specials, single characters (plain and
/// "##"), and every consonant-vowel syllable (plain and "##").
std::vector<std::string> generated_vocab() {
  std::vector<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (char c = 'a'; c <= 'z'; ++c) vocab.push_back(std::string(1, c));
  for (char c : std::string(".,!?'-0123456789")) vocab.push_back(std::string(1, c));
  for (char c = 'a'; c <= 'z'; ++c) vocab.push_back("##" + std::string(1, c));
  for (char c : kConsonants)
    for (char v : kVowels) {
      vocab.push_back(std::string{c, v});
      vocab.push_back("##" + std::string{c, v});
    }
  return vocab;
}

/// A made-up language: words of 1-3 syllables. The label of a sentence is whether it holds
/// one of the "pos" cue words or one of the "neg" ones (exactly one cue per sentence), so a
/// model must find the cue among filler words, wherever it is.
struct GeneratedTask {
  explicit GeneratedTask(uint32_t seed) : rng(seed) {
    for (int i = 0; i < 4; ++i) positive.push_back(word(2));
    for (int i = 0; i < 4; ++i) negative.push_back(word(2));
  }
  std::string word(int syllables) {
    std::string w;
    for (int k = 0; k < syllables; ++k) {
      w += kConsonants[rng() % kConsonants.size()];
      w += kVowels[rng() % kVowels.size()];
    }
    return w;
  }
  /// "sentence\tlabel" rows with a header.
  std::string tsv(int rows) {
    std::string out = "sentence\tlabel\n";
    for (int r = 0; r < rows; ++r) {
      const bool pos = rng() % 2;
      std::vector<std::string> words;
      const int n = 3 + static_cast<int>(rng() % 6);
      for (int i = 0; i < n; ++i) {
        std::string w = word(1 + static_cast<int>(rng() % 3));
        while (std::find(positive.begin(), positive.end(), w) != positive.end() ||
               std::find(negative.begin(), negative.end(), w) != negative.end())
          w = word(3);
        words.push_back(w);
      }
      const auto& cues = pos ? positive : negative;
      words.insert(words.begin() + static_cast<long>(rng() % (words.size() + 1)),
                   cues[rng() % cues.size()]);
      std::string sentence;
      for (const auto& w : words) sentence += (sentence.empty() ? "" : " ") + w;
      sentence[0] = static_cast<char>(sentence[0] - 32);
      out += sentence + (rng() % 2 ? "." : "!") + "\t" + (pos ? "pos" : "neg") + "\n";
    }
    return out;
  }
  std::mt19937 rng;
  std::vector<std::string> positive, negative;
};

/// What an earlier quickstart in `out` must have been run with for this one to go on there:
/// its finished trials are skipped as done, so another seed's (other data, another model)
/// would be taken for this one's. Throws ConfigError where `out` is a file, holds files no
/// quickstart wrote, or another quickstart's; else writes quickstart.json with the options.
void claim_output(const fs::path& out, const QuickstartOptions& options) {
  const auto marker = out / "quickstart.json";
  const nlohmann::json mine = {{"seed", options.seed}, {"pretrain", options.pretrain}};
  if (fs::exists(out) && !fs::is_directory(out))
    throw ConfigError(
        fmt::format("--out {}: is a file; quickstart writes a directory there", out.string()));
  if (fs::exists(out) && !fs::is_empty(out)) {
    if (!fs::exists(marker))
      throw ConfigError(fmt::format(
          "--out {}: holds files that no quickstart wrote ({}); quickstart writes data, a "
          "model and a recipe there, so give a new or empty directory",
          out.string(), foreign_entries(out, [](const std::string&) { return true; })));
    nlohmann::json theirs;
    try {
      theirs = nlohmann::json::parse(read_file(marker));
    } catch (const nlohmann::json::exception&) {
    }
    if (theirs != mine)
      throw ConfigError(fmt::format(
          "--out {}: holds the quickstart of {}; its finished trials would be taken for this "
          "one's ({}), so give another --out or delete it",
          out.string(), clip(theirs.dump()), mine.dump()));
  }
  write_file_atomic(marker, mine.dump() + "\n");
}

}  // namespace

int run_quickstart(const QuickstartOptions& options) {
  const int threads = configure_threads(options.threads);
  const fs::path out = fs::absolute(options.out);
  claim_output(out, options);
  log::info("[quickstart] threads {} | seed {} | output {}", threads, options.seed, out.string());

  // 1. Data and vocabulary, generated from the seed.
  GeneratedTask task(static_cast<uint32_t>(options.seed));
  fs::create_directories(out / "data");
  write_file_atomic(out / "data" / "train.tsv", task.tsv(400));
  write_file_atomic(out / "data" / "dev.tsv", task.tsv(100));
  write_file_atomic(out / "data" / "test.tsv", task.tsv(100));

  // 2. A small BERT from scratch (uncased WordPiece over the generated vocabulary).
  tok::WordPieceOptions tok_options;
  tok::WordPieceTokenizer tokenizer(generated_vocab(), tok_options, "generated vocab");
  BertConfig config;
  config.vocab_size(tokenizer.vocab_size())
      .hidden_size(64)
      .num_hidden_layers(2)
      .num_attention_heads(4)
      .intermediate_size(128)
      .max_position_embeddings(64);
  write_random_model(out / "model", config, tokenizer, static_cast<uint64_t>(options.seed));
  fs::path model_dir = out / "model";

  // 2b. Optionally pre-train it (MLM + NSP) on generated documents of the same language.
  if (options.pretrain) {
    const auto corpus = [&](int documents) {
      std::string text;
      for (int d = 0; d < documents; ++d) {
        const auto rows = task.tsv(6 + d % 5);
        for (const auto& line : data::split_lines(rows)) {
          if (line.number == 1) continue;  // header
          text += std::string(line.text.substr(0, line.text.find('\t'))) + "\n";
        }
        text += "\n";
      }
      return text;
    };
    write_file_atomic(out / "data" / "corpus.txt", corpus(300));
    write_file_atomic(out / "data" / "corpus_heldout.txt", corpus(30));
    tasks::PretrainingDataOptions data_options;
    data_options.max_seq_length = 64;
    data_options.max_predictions_per_seq = 10;
    data_options.dupe_factor = 3;
    for (const auto* split : {"corpus", "corpus_heldout"}) {
      const auto documents = tasks::tokenize_corpus(
          data::read_corpus(out / "data" / (std::string(split) + ".txt")), tokenizer);
      const auto instances = tasks::create_instances(
          documents, data_options, tokenizer.special_tokens(), tokenizer.vocab_size());
      tasks::write_instance_shards(instances, out / "pretrain" / split, data_options,
                                   tokenizer.special_tokens().mask_id);
    }
    const auto pretrain_recipe = out / "pretrain.yaml";
    write_file_atomic(
        pretrain_recipe,
        fmt::format(
            "# Written by `bertft quickstart --pretrain`: MLM + NSP on generated documents.\n"
            "name: quickstart-pretrain\n"
            "model:\n  pretrained: {0}/model\n"
            "task:\n  type: pretraining\n"
            "data:\n  train: {0}/pretrain/corpus\n  dev: {0}/pretrain/corpus_heldout\n"
            "training:\n  epochs: 6\n  batch_size: 32\n  learning_rate: 5.0e-3\n  warmup_ratio: "
            "0.05\n  log_every: 20\n"
            "output:\n  dir: {0}/pretrain\n",
            out.string()));
    const auto recipe = load_recipe(pretrain_recipe);
    const TrialDir run(out / "pretrain" / "run");
    if (!keep_resolved_recipe(run.root(), recipe))
      throw ConfigError(run.recipe().string() + ": holds a different recipe; use another --out");
    run_trial(recipe, run, {}, "pretrain");
    const auto result = *TrialResult::read(run);
    log::info("[quickstart] pre-trained: held-out MLM accuracy {:.3f}, NSP accuracy {:.3f}",
              result.metrics.at("mlm_accuracy"), result.metrics.at("nsp_accuracy"));
    export_model(run.root(), out / "pretrained");
    model_dir = out / "pretrained";
  }

  // 3. The recipe: a 2 x 2 sweep with two seeds per setting.
  const auto recipe_path = out / "recipe.yaml";
  write_file_atomic(
      recipe_path, fmt::format("# Written by `bertft quickstart`: a generated cue-word task on a "
                               "small BERT from scratch.\n"
                               "name: quickstart\n"
                               "model:\n  pretrained: {1}\n"
                               "task:\n  type: sequence_classification\n  max_seq_length: 48\n"
                               "data:\n  train: {0}/data/train.tsv\n  dev: {0}/data/dev.tsv\n"
                               "training:\n  batch_size: 16\n  warmup_ratio: 0.1\n  log_every: 10\n"
                               "sweep:\n  grid:\n    learning_rate: [1.0e-3, 3.0e-4]\n    epochs: "
                               "[4, 8]\n  seeds: [1, 2]\n"
                               "output:\n  dir: {0}\n",
                               out.string(), model_dir.string()));
  const auto recipe = load_recipe(recipe_path);
  SweepOptions sweep;
  sweep.jobs = options.jobs;
  sweep.threads = threads;
  const int sweep_rc = run_sweep(recipe, sweep);
  const SweepDir sweep_dir(recipe.output.dir);
  std::cout << "\n" << read_file(sweep_dir.leaderboard("md")) << "\n";
  if (!fs::exists(sweep_dir.best_model())) {
    log::error("[quickstart] no exported model; see {}", sweep_dir.leaderboard("md").string());
    return 1;
  }

  // 4. Predict the held-out file with the exported model.
  PredictOptions predict;
  predict.model = sweep_dir.best_model().string();
  predict.data = (out / "data" / "test.tsv").string();
  predict.out = (out / "predictions.jsonl").string();
  run_predict(predict);
  const auto lines = read_file(predict.out);
  size_t end = 0;
  for (int i = 0; i < 3 && end != std::string::npos; ++i) end = lines.find('\n', end + (i > 0));
  fmt::print("first predictions ({}):\n{}\n", predict.out, lines.substr(0, end));
  fmt::print(
      "\nexported model: {} (load it with bertft predict --model, or transformers' "
      "AutoModelForSequenceClassification)\nleaderboard:    {}\n",
      predict.model, sweep_dir.leaderboard("md").string());
  return sweep_rc;
}

}  // namespace bert::recipes
