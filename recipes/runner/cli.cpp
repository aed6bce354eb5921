#include "recipes/runner/cli.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <utility>
#include <vector>

#include "bert/checkpoint/pretrained_dir.h"
#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/log.h"
#include "bert/common/strings.h"
#include "bert/common/threads.h"
#include "bert/common/yaml.h"
#include "recipes/runner/command.h"
#include "recipes/runner/run_dir.h"

namespace bert::recipes {

const std::vector<Command>& command_table() {
  static const std::vector<Command> commands = {
      {"quickstart",
       "The embedded default job, offline: generated data, a small BERT from scratch, a 2x2 "
       "sweep with two seeds, leaderboard, exported model, predictions",
       &setup_quickstart},
      {"validate",
       "Check a recipe, every trial of its sweep, the model directory and every data split "
       "(read and tokenised) without training",
       &setup_validate},
      {"recipe-keys", "List every recipe key with its type, default and meaning",
       &setup_recipe_keys},
      {"train",
       "Fine-tune one trial of a recipe (its training values, no sweep); resumes from a "
       "checkpoint in --out",
       &setup_train},
      {"sweep", "Run a recipe's hyperparameter sweep: trials, leaderboard, best model exported",
       &setup_sweep},
      {"leaderboard",
       "Rebuild a sweep's leaderboard (and best_model/) from the trials finished so far",
       &setup_leaderboard},
      {"export", "Write a run's best model in Hugging Face layout", &setup_export},
      {"predict", "Predict a data file with a fine-tuned model directory", &setup_predict},
      {"eval", "Recompute a fine-tuned model's dev metrics on a recipe's data.dev", &setup_eval},
      {"score", "Score a prediction file in a dataset's official format against the gold data",
       &setup_score},
      {"new-model",
       "Write a randomly initialised BERT (HF layout, BertForPreTraining) for a vocabulary",
       &setup_new_model},
      {"pretrain-data",
       "Turn plain-text corpora into MLM + NSP pre-training instances (binary shards + "
       "stats.json)",
       &setup_pretrain_data},
      {"vocab", "Train a WordPiece vocab.txt or a SentencePiece model on corpus files",
       &setup_vocab},
      {"extend-vocab",
       "Append tokens to a checkpoint's vocabulary: WordPiece's vocab.txt, added tokens for "
       "byte-level BPE and XLM-R (embeddings grown, new rows = mean)",
       &setup_extend_vocab},
      {"tokenize",
       "Tokenize stdin (text lines, or JSONL with \"text\" and optional \"text_pair\", the "
       "readers' field names) into JSON lines with ids, tokens, offsets, token_type_ids",
       &setup_tokenize},
      {"inspect", "Load a Hugging Face BERT directory and report its config, weights and tokenizer",
       &setup_inspect},
      {"convert", "Rewrite a Hugging Face BERT directory (any weights format) as model.safetensors",
       &setup_convert},
      {"embed",
       "Sentence embeddings of a text file (cls / mean / max pooling) as .safetensors, .npy or "
       ".jsonl, ids beside the vectors",
       &setup_embed},
      {"similar", "Exact cosine top-k search of query texts over `bertft embed` vectors",
       &setup_similar},
  };
  return commands;
}

namespace {

/// The command a command line names (the first word that is not a global option), or "".
std::string command_word(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads") {
      ++i;  // its value
      continue;
    }
    if (!arg.empty() && arg[0] != '-') return arg;
  }
  return "";
}

}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{"bertft: fine-tune BERT from C++ (LibTorch)", "bertft"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "bertft 0.1.0");
  app.option_defaults()->always_capture_default();  // --help shows every default
  app.footer(
      "Exit codes: 0 done; 1 runtime or data error; 2 usage or configuration error; 130 / 143 "
      "stopped by SIGINT / SIGTERM after a checkpoint (rerun to resume).");
  GlobalOptions global;
  app.add_option("--threads", global.threads, "Intra-op threads for LibTorch (0 = all cores)")
      ->check(non_negative());
  app.add_flag("-v,--verbose", global.verbose, "Log debug messages");
  std::vector<std::pair<CLI::App*, CommandRun>> runs;
  std::vector<std::string> names;
  for (const auto& command : command_table()) {
    auto* sub = app.add_subcommand(command.name, command.help);
    runs.emplace_back(sub, command.setup(*sub, global));
    names.push_back(command.name);
  }
  if (const auto word = command_word(argc, argv);
      !word.empty() && std::find(names.begin(), names.end(), word) == names.end()) {
    const auto guess = nearest_key(word, names);
    throw ConfigError(fmt::format("unknown command '{}'{}; commands: {}", word,
                                  guess.empty() ? "" : fmt::format(" (did you mean '{}'?)", guess),
                                  fmt::join(names, ", ")));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every other parse problem is a usage error.
    return app.exit(e) == 0 ? code(ExitCode::kOk) : code(ExitCode::kConfigError);
  }
  if (global.verbose) log::set_level(log::Level::kDebug);
  configure_threads(global.threads);
  for (const auto& [sub, run] : runs)
    if (*sub) return run();
  return code(ExitCode::kOk);
}

CLI::Validator non_negative() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        if (const auto v = parse_double(value); v && *v >= 0) return "";
        return "must be a number >= 0, got '" + value + "'";
      },
      "NONNEGATIVE");
}

CLI::Validator positive() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        if (const auto v = parse_double(value); v && *v > 0) return "";
        return "must be a number > 0, got '" + value + "'";
      },
      "POSITIVE");
}

CLI::Option* add_column_options(CLI::App& app, std::vector<std::string>& columns, bool& no_header) {
  app.add_flag("--no-header", no_header,
               "TSV/CSV: the first row is data, not column names (--column by 0-based number)");
  return app.add_option("--column", columns,
                        "ROLE=COLUMN: the column (name, or 0-based number) that holds a role, "
                        "as a recipe's columns: text_a, text_b, label, id; multiple choice: "
                        "context, prefix, endings, label, id; CoNLL: token, tag (repeat)");
}

std::map<std::string, std::string> parse_columns(const std::vector<std::string>& columns) {
  std::map<std::string, std::string> roles;
  for (const auto& c : columns) {
    const auto eq = c.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == c.size())
      throw ConfigError(fmt::format("--column '{}': expected ROLE=COLUMN (e.g. text_a=review)", c));
    if (!roles.emplace(c.substr(0, eq), c.substr(eq + 1)).second)
      throw ConfigError(fmt::format("--column '{}': role '{}' given twice", c, c.substr(0, eq)));
  }
  return roles;
}

tok::WordPieceOptions wordpiece_options(bool lowercase, tok::CasingCheck check) {
  tok::WordPieceOptions options;
  options.normalizer.lowercase = lowercase;
  options.normalizer.strip_accents = lowercase;
  options.check_casing = check;
  return options;
}

void check_out_holds_no_model(const std::string& out, const std::string& writes) {
  namespace fs = std::filesystem;
  if (fs::exists(out) && !fs::is_directory(out))
    throw ConfigError(fmt::format("--out {}: is a file; {} into a directory", out, writes));
  for (const auto* file : {"config.json", "model.safetensors", "model.safetensors.index.json",
                           "pytorch_model.bin", "pytorch_model.bin.index.json"})
    if (fs::exists(fs::path(out) / file))
      throw ConfigError(fmt::format(
          "--out {}: already holds a model ({}); {}, so give a new directory", out, file, writes));
}

namespace {
/// The files a tokenizer directory may hold (PretrainedDir::find and load_tokenizer read them),
/// besides kSentencePieceFiles.
constexpr const char* kTokenizerFiles[] = {"vocab.txt",
                                           "vocab.json",
                                           "merges.txt",
                                           "spiece.vocab",
                                           "tokenizer.json",
                                           "added_tokens.json",
                                           "tokenizer_config.json",
                                           "special_tokens_map.json"};

bool is_tokenizer_file(const std::string& name) {
  const auto in = [&](const auto& names) {
    return std::find(std::begin(names), std::end(names), name) != std::end(names);
  };
  return in(kTokenizerFiles) || in(kSentencePieceFiles);
}
}  // namespace

void check_no_other_tokenizer(const std::string& out,
                              const std::function<bool(const std::string& name)>& written) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(out)) return;
  const auto stale = foreign_entries(
      out, [&](const std::string& name) { return is_tokenizer_file(name) && !written(name); });
  if (!stale.empty())
    throw ConfigError(fmt::format(
        "--out {}: holds tokenizer files that the new ones would not replace ({}), and loading "
        "the directory would read them too; nothing was written: give a new directory or "
        "remove those files",
        out, stale));
}

void write_model_dir(const std::string& out,
                     const std::function<void(const std::filesystem::path& dir)>& write) {
  namespace fs = std::filesystem;
  const auto target = directory_path(out);
  const auto staging = write_staged(target, write);
  if (!fs::exists(target)) {
    fs::rename(staging, target);
    return;
  }
  // A directory with the user's other files: ours move in, config.json (what makes it a
  // model) last; never beside another tokenizer's files.
  try {
    check_no_other_tokenizer(out,
                             [&](const std::string& name) { return fs::exists(staging / name); });
  } catch (const ConfigError&) {
    remove_tree(staging);
    throw;
  }
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(staging)) files.push_back(entry.path());
  std::stable_partition(files.begin(), files.end(),
                        [](const fs::path& f) { return f.filename() != "config.json"; });
  for (const auto& file : files) fs::rename(file, target / file.filename());
  remove_tree(staging);
}

std::pair<int, int> parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  if (slash != std::string::npos) {
    const auto index = parse_count(std::string_view(text).substr(0, slash));
    const auto count = parse_count(std::string_view(text).substr(slash + 1));
    if (index && count) return {*index, *count};
  }
  throw ConfigError(fmt::format("--shard '{}': expected i/N, e.g. 0/4", text));
}

}  // namespace bert::recipes
