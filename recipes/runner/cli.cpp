#include "recipes/runner/cli.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bert/checkpoint/load.h"
#include "bert/checkpoint/pretrained_dir.h"
#include "bert/checkpoint/resize_vocab.h"
#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/log.h"
#include "bert/common/strings.h"
#include "bert/common/threads.h"
#include "bert/model/pretraining.h"
#include "bert/tokenizer/factory.h"
#include "bert/tokenizer/sentencepiece_model.h"
#include "bert/tokenizer/vocab_trainer.h"
#include "bert/tokenizer/wordpiece.h"
#include "data/corpus.h"
#include "recipes/runner/export.h"
#include "recipes/runner/new_model.h"
#include "recipes/runner/quickstart.h"
#include "recipes/runner/recipe.h"
#include "recipes/runner/score.h"
#include "recipes/runner/sweep.h"
#include "recipes/runner/trial.h"
#include "tasks/pretraining/instances.h"

namespace bert::recipes {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct TokenizeArgs {
  std::string vocab, spm, model;
  bool lowercase = false;
  bool no_casing_check = false;
  int64_t max_length = 0;
  std::string truncation = "longest_first";
  bool pad = false;
  int threads = 0;
};

/// WordPiece options for a --lowercase flag (uncased: lower-case and strip accents, as HF).
tok::WordPieceOptions wordpiece_options(bool lowercase, tok::CasingCheck check) {
  tok::WordPieceOptions options;
  options.normalizer.lowercase = lowercase;
  options.normalizer.strip_accents = lowercase;
  options.check_casing = check;
  return options;
}

std::unique_ptr<tok::Tokenizer> make_cli_tokenizer(const TokenizeArgs& a) {
  const int sources = !a.vocab.empty() + !a.spm.empty() + !a.model.empty();
  if (sources != 1) throw ConfigError("tokenize: give exactly one of --vocab, --spm, --model");
  if (!a.spm.empty()) return std::make_unique<tok::SentencePieceTokenizer>(a.spm);
  if (!a.model.empty()) {
    const auto dir = PretrainedDir::find(a.model);
    const auto config = BertConfig::from_file(dir.config);
    tok::TokenizerOverrides overrides;
    if (a.lowercase) overrides.lowercase = true;  // otherwise the directory's own setting
    overrides.check_casing = !a.no_casing_check;
    return tok::load_tokenizer(dir, config.vocab_size(), overrides);
  }
  return tok::WordPieceTokenizer::from_file(
      a.vocab, wordpiece_options(a.lowercase, a.no_casing_check ? tok::CasingCheck::kOff
                                                                : tok::CasingCheck::kError));
}

int run_tokenize(const TokenizeArgs& a) {
  const auto tokenizer = make_cli_tokenizer(a);
  tok::EncodeOptions options;
  options.max_length = a.max_length;
  options.truncation = tok::parse_truncation(a.truncation);
  options.padding = a.pad ? tok::Padding::kMaxLength : tok::Padding::kNone;
  if (a.pad && a.max_length <= 0) throw ConfigError("tokenize: --pad needs --max-length");

  constexpr size_t kChunk = 2048;
  std::vector<std::pair<std::string, std::optional<std::string>>> batch;
  size_t line_no = 0;
  auto flush = [&] {
    for (const auto& e : tokenizer->encode_batch(batch, options, a.threads))
      std::cout << tok::to_json(e).dump() << '\n';
    batch.clear();
  };
  std::string line;
  while (std::getline(std::cin, line)) {
    ++line_no;
    const auto first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line[first] == '{') {
      json j;
      try {
        j = json::parse(line);
      } catch (const json::parse_error& e) {
        throw DataError(fmt::format("<stdin>:{}: invalid JSON: {}", line_no, e.what()));
      }
      if (!j.contains("text") || !j["text"].is_string())
        throw DataError(fmt::format("<stdin>:{}: a JSON line needs a string \"text\"", line_no));
      std::optional<std::string> pair;
      if (j.contains("text_pair") && !j["text_pair"].is_null()) {
        if (!j["text_pair"].is_string())
          throw DataError(fmt::format("<stdin>:{}: \"text_pair\" must be a string", line_no));
        pair = j["text_pair"].get<std::string>();
      }
      batch.emplace_back(j["text"].get<std::string>(), pair);
    } else {
      batch.emplace_back(line, std::nullopt);
    }
    if (batch.size() == kChunk) {
      try {
        flush();
      } catch (const TokenizerError& e) {
        throw TokenizerError(
            fmt::format("<stdin>: lines {}..{}: {}", line_no - kChunk + 1, line_no, e.what()));
      }
    }
  }
  try {
    flush();
  } catch (const TokenizerError& e) {
    throw TokenizerError(fmt::format("<stdin>: near line {}: {}", line_no, e.what()));
  }
  std::cout.flush();
  return 0;
}

bool has_prefix_key(const TensorMap& tensors, const std::string& prefix) {
  for (const auto& [k, v] : tensors)
    if (starts_with(k, prefix) || starts_with(k, "bert." + prefix)) return true;
  return false;
}

int run_inspect(const std::string& model_dir, bool strict) {
  const auto dir = PretrainedDir::find(model_dir);
  const auto config = BertConfig::from_file(dir.config);
  const TensorMap tensors = read_weights(dir.weights);
  LoadOptions options;
  options.strict = strict;
  LoadReport report;
  std::string architecture;
  if (has_prefix_key(tensors, "cls.")) {
    architecture = "BertForPreTraining";
    BertForPreTraining model(config);
    options.tied_aliases = BertForPreTrainingImpl::tied_aliases();
    report = load_state_dict(*model, tensors, dir.weights.string(), options);
  } else {
    architecture = has_prefix_key(tensors, "pooler.") ? "BertModel" : "BertModel (no pooler)";
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
  if (dir.vocab || dir.sentencepiece) {
    const auto tokenizer = tok::load_tokenizer(dir, config.vocab_size());
    fmt::print("tokenizer  {} ({} entries; [CLS]={} [SEP]={} [PAD]={} [UNK]={} [MASK]={})\n",
               dir.vocab ? "WordPiece" : "SentencePiece", tokenizer->vocab_size(),
               tokenizer->special_tokens().cls_id, tokenizer->special_tokens().sep_id,
               tokenizer->special_tokens().pad_id, tokenizer->special_tokens().unk_id,
               tokenizer->special_tokens().mask_id);
  }
  return 0;
}

int run_convert(const std::string& model_dir, const std::string& out, double shard_mb) {
  const auto dir = PretrainedDir::find(model_dir);
  const auto config = BertConfig::from_file(dir.config);
  TensorMap tensors = read_weights(dir.weights);
  // Tied aliases and non-persistent buffers are not written, as HF's safetensors writer does.
  for (const auto& [alias, target] : BertForPreTrainingImpl::tied_aliases())
    if (tensors.count(target)) tensors.erase(alias);
  for (auto it = tensors.begin(); it != tensors.end();)
    it = is_legacy_buffer_key(it->first) ? tensors.erase(it) : std::next(it);
  const fs::path out_dir(out);
  fs::create_directories(out_dir);
  save_weights(out_dir, tensors, static_cast<int64_t>(shard_mb * (1 << 20)));
  const std::string architecture =
      config.architectures().empty() ? "BertModel" : config.architectures().front();
  save_config(out_dir, config, architecture);
  if (dir.vocab || dir.sentencepiece) tok::load_tokenizer(dir, config.vocab_size())->save(out_dir);
  log::info("[convert] {} -> {}: {} tensors", dir.weights.string(), out_dir.string(),
            tensors.size());
  return 0;
}

struct NewModelArgs {
  std::string vocab, out;
  bool lowercase = false;
  int64_t hidden = 128, layers = 2, heads = 2, intermediate = 512, max_positions = 512;
  uint64_t seed = 0;
};

/// A randomly initialised BertForPreTraining (HF's init) in HF layout: the start of a model
/// trained from scratch, and the tiny models of tests and the quickstart.
int run_new_model(const NewModelArgs& a) {
  const auto tokenizer = tok::WordPieceTokenizer::from_file(
      a.vocab, wordpiece_options(a.lowercase, tok::CasingCheck::kOff));
  BertConfig config;
  config.vocab_size(tokenizer->vocab_size())
      .hidden_size(a.hidden)
      .num_hidden_layers(a.layers)
      .num_attention_heads(a.heads)
      .intermediate_size(a.intermediate)
      .max_position_embeddings(a.max_positions);
  write_random_model(a.out, config, *tokenizer, a.seed);
  int64_t params = 0;
  for (const auto& [name, t] : read_weights(PretrainedDir::find(a.out).weights))
    params += t.numel();
  log::info("[new-model] {}: vocab {} | hidden {} | layers {} | heads {} | {:.2f} M parameters",
            a.out, config.vocab_size(), a.hidden, a.layers, a.heads,
            static_cast<double>(params) / 1e6);
  return 0;
}

struct PretrainDataArgs {
  std::vector<std::string> inputs;
  std::string model, vocab, out;
  bool lowercase = false;
  int tokenizer_threads = 0;
  tasks::PretrainingDataOptions options;
};

/// `bertft pretrain-data`: corpus files -> instance shards + stats.json.
int run_pretrain_data(const PretrainDataArgs& a) {
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
  const auto stats = tasks::write_instance_shards(instances, a.out, a.options,
                                                  tokenizer->special_tokens().mask_id);
  fmt::print("{}\n", stats.to_json().dump(1));
  return 0;
}

struct VocabArgs {
  std::vector<std::string> inputs;
  std::string out, type = "wordpiece", model_type = "unigram";
  int64_t vocab_size = 30522, min_frequency = 2;
  bool lowercase = false;
};

/// `bertft vocab`: a WordPiece vocab.txt or a SentencePiece model trained on corpus files.
int run_vocab(const VocabArgs& a) {
  const fs::path out(a.out);
  fs::create_directories(out);
  if (a.type == "sentencepiece") {
    std::vector<fs::path> inputs(a.inputs.begin(), a.inputs.end());
    tok::train_sentencepiece(inputs, (out / "spiece").string(), a.vocab_size, a.model_type);
    const tok::SentencePieceTokenizer tokenizer(out / "spiece.model");
    log::info("[vocab] {}: {} pieces", (out / "spiece.model").string(), tokenizer.vocab_size());
    tokenizer.save(out);
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
  tokenizer.save(out);
  log::info("[vocab] {}: {} entries", (out / "vocab.txt").string(), tokenizer.vocab_size());
  return 0;
}

/// `bertft extend-vocab`: appends tokens to a WordPiece checkpoint's vocabulary (for continued
/// pre-training on a domain), growing the embeddings and MLM bias as HF's resize_token_embeddings.
int run_extend_vocab(const std::string& model,
                     const std::string& tokens_file,
                     const std::string& out_dir) {
  const auto dir = PretrainedDir::find(model);
  if (!dir.vocab) throw ConfigError(model + ": extend-vocab needs a WordPiece vocab.txt");
  auto config = BertConfig::from_file(dir.config);
  auto vocab = tok::read_vocab_file(*dir.vocab);
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

/// "i/N" of --shard.
std::pair<int, int> parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  try {
    if (slash != std::string::npos)
      return {std::stoi(text.substr(0, slash)), std::stoi(text.substr(slash + 1))};
  } catch (const std::exception&) {
  }
  throw ConfigError(fmt::format("--shard '{}': expected i/N, e.g. 0/4", text));
}

int run_validate(const std::string& file, const std::vector<std::string>& overrides) {
  const auto recipe = load_recipe(file, overrides);
  const auto trials = expand_sweep(recipe);
  fmt::print("{}: valid; task {}, {} trial(s), output {}\n", file, recipe.task_type, trials.size(),
             recipe.output.dir.string());
  for (const auto& t : trials) fmt::print("  {}\n", t.name);
  return 0;
}

}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{"bertft: fine-tune BERT from C++ (LibTorch)", "bertft"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "bertft 0.1.0");
  int threads = 0;
  app.add_option("--threads", threads, "Intra-op threads for LibTorch (0 = all cores)")
      ->check(CLI::NonNegativeNumber);
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "Log debug messages");

  TokenizeArgs tokenize;
  auto* tok_cmd = app.add_subcommand(
      "tokenize",
      "Tokenize stdin (text lines, or JSONL with \"text\" and optional \"text_pair\") into JSON "
      "lines with ids, tokens, offsets, token_type_ids");
  tok_cmd->add_option("--vocab", tokenize.vocab, "WordPiece vocab.txt")->check(CLI::ExistingFile);
  tok_cmd->add_option("--spm", tokenize.spm, "SentencePiece .model file")->check(CLI::ExistingFile);
  tok_cmd->add_option("--model", tokenize.model, "Hugging Face model directory")
      ->check(CLI::ExistingDirectory);
  tok_cmd->add_flag("--lowercase", tokenize.lowercase,
                    "Lower-case and strip accents (uncased vocabularies)");
  tok_cmd->add_flag("--no-casing-check", tokenize.no_casing_check,
                    "Allow a vocabulary whose casing contradicts --lowercase");
  tok_cmd->add_option("--max-length", tokenize.max_length, "Truncate to this many tokens (0 = off)")
      ->check(CLI::NonNegativeNumber);
  tok_cmd
      ->add_option("--truncation", tokenize.truncation, "longest_first | only_first | only_second")
      ->check(CLI::IsMember({"longest_first", "only_first", "only_second"}));
  tok_cmd->add_flag("--pad", tokenize.pad, "Pad every line to --max-length");
  tok_cmd->add_option("--tokenizer-threads", tokenize.threads, "Encoding threads (0 = all cores)");

  std::string inspect_dir;
  bool inspect_strict = false;
  auto* inspect_cmd = app.add_subcommand(
      "inspect", "Load a Hugging Face BERT directory and report its config, weights and tokenizer");
  inspect_cmd->add_option("model", inspect_dir, "Model directory")
      ->required()
      ->check(CLI::ExistingDirectory);
  inspect_cmd->add_flag("--strict", inspect_strict, "Fail on missing or unexpected keys");

  std::string convert_dir, convert_out;
  double shard_mb = 0;
  auto* convert_cmd = app.add_subcommand(
      "convert", "Rewrite a Hugging Face BERT directory (any weights format) as model.safetensors");
  convert_cmd->add_option("model", convert_dir, "Model directory")
      ->required()
      ->check(CLI::ExistingDirectory);
  convert_cmd->add_option("--out", convert_out, "Output directory")->required();
  convert_cmd->add_option("--shard-size", shard_mb, "Shard above this many MiB (0 = one file)")
      ->check(CLI::NonNegativeNumber);

  QuickstartOptions quickstart;
  auto* quick_cmd = app.add_subcommand("quickstart",
                                       "The embedded default job, offline: generated data, a small "
                                       "BERT from scratch, a 2x2 sweep with "
                                       "two seeds, leaderboard, exported model, predictions");
  quick_cmd->add_option("--out", quickstart.out, "Output directory");
  quick_cmd->add_option("--seed", quickstart.seed, "Random seed");
  quick_cmd->add_option("--jobs", quickstart.jobs, "Trials in parallel")
      ->check(CLI::PositiveNumber);
  quick_cmd->add_flag("--pretrain", quickstart.pretrain,
                      "Pre-train the small BERT (MLM + NSP) on generated text first");

  ScoreOptions score;
  auto* score_cmd = app.add_subcommand(
      "score", "Score a prediction file in a dataset's official format against the gold data");
  score_cmd
      ->add_option("--task", score.task,
                   "sequence_classification | multiple_choice | question_answering | "
                   "token_classification")
      ->required();
  score_cmd
      ->add_option("--data", score.data,
                   "Gold data (GLUE TSV, CSV/JSONL, SWAG CSV, SQuAD JSON, CoNLL)")
      ->check(CLI::ExistingFile);
  score_cmd
      ->add_option("--predictions", score.predictions,
                   "SQuAD: JSON {id: answer}; CoNLL: token ... gold predicted per line; "
                   "classification: one label per line or JSONL")
      ->required()
      ->check(CLI::ExistingFile);
  score_cmd->add_option("--format", score.format,
                        "Data format: auto | glue | tsv | csv | jsonl | squad | conll | swag");
  score_cmd->add_option("--glue-task", score.glue_task,
                        "GLUE task, when not clear from the directory name");
  score_cmd
      ->add_option("--na-probs", score.na_probs, "SQuAD v2.0: JSON {id: no-answer probability}")
      ->check(CLI::ExistingFile);
  score_cmd->add_option("--na-prob-thresh", score.na_prob_threshold,
                        "SQuAD v2.0 no-answer threshold (default 1.0)");
  score_cmd->add_option("--tag-scheme", score.tag_scheme, "iob1 | iob2 | iobes (for --strict)");
  score_cmd->add_flag("--strict", score.strict,
                      "Count only well-formed entities (seqeval strict mode)");
  score_cmd->add_flag("--regression", score.regression, "Scores, not labels: Pearson and Spearman");
  score_cmd->add_option("--positive-label", score.positive_label,
                        "Positive class of binary F1 (default 1)");

  NewModelArgs new_model;
  auto* new_model_cmd = app.add_subcommand(
      "new-model",
      "Write a randomly initialised BERT (HF layout, BertForPreTraining) for a vocabulary");
  new_model_cmd->add_option("--vocab", new_model.vocab, "WordPiece vocab.txt")
      ->required()
      ->check(CLI::ExistingFile);
  new_model_cmd->add_option("--out", new_model.out, "Output directory")->required();
  new_model_cmd->add_flag("--lowercase", new_model.lowercase,
                          "Uncased tokenizer (lower-case, strip accents)");
  new_model_cmd->add_option("--hidden", new_model.hidden, "hidden_size")
      ->check(CLI::PositiveNumber);
  new_model_cmd->add_option("--layers", new_model.layers, "num_hidden_layers")
      ->check(CLI::PositiveNumber);
  new_model_cmd->add_option("--heads", new_model.heads, "num_attention_heads")
      ->check(CLI::PositiveNumber);
  new_model_cmd->add_option("--intermediate", new_model.intermediate, "intermediate_size")
      ->check(CLI::PositiveNumber);
  new_model_cmd->add_option("--max-positions", new_model.max_positions, "max_position_embeddings")
      ->check(CLI::PositiveNumber);
  new_model_cmd->add_option("--seed", new_model.seed, "Initialisation seed");

  PretrainDataArgs pretrain_data;
  auto* pretrain_data_cmd = app.add_subcommand(
      "pretrain-data",
      "Turn plain-text corpora into MLM + NSP pre-training instances (binary shards + stats.json)");
  pretrain_data_cmd
      ->add_option("inputs", pretrain_data.inputs,
                   "Corpus files: one sentence per line, blank line between documents; or .jsonl "
                   "with one {\"text\": ...} document per line")
      ->required()
      ->check(CLI::ExistingFile);
  pretrain_data_cmd
      ->add_option("--model", pretrain_data.model, "Model directory whose tokenizer to use")
      ->check(CLI::ExistingDirectory);
  pretrain_data_cmd->add_option("--vocab", pretrain_data.vocab, "WordPiece vocab.txt")
      ->check(CLI::ExistingFile);
  pretrain_data_cmd->add_flag("--lowercase", pretrain_data.lowercase, "With --vocab: uncased");
  pretrain_data_cmd->add_option("--out", pretrain_data.out, "Output directory")->required();
  pretrain_data_cmd->add_option("--tokenizer-threads", pretrain_data.tokenizer_threads,
                                "Tokenizer threads (0 = all)");
  {
    auto& po = pretrain_data.options;
    pretrain_data_cmd->add_option("--max-seq-length", po.max_seq_length, "Tokens per instance");
    pretrain_data_cmd->add_option("--max-predictions-per-seq", po.max_predictions_per_seq,
                                  "Most masked positions");
    pretrain_data_cmd->add_option("--masked-lm-prob", po.masked_lm_prob,
                                  "Share of tokens to predict");
    pretrain_data_cmd->add_option("--short-seq-prob", po.short_seq_prob,
                                  "Share of shorter instances");
    pretrain_data_cmd->add_option("--random-next-prob", po.random_next_prob,
                                  "Share of NotNext pairs");
    pretrain_data_cmd->add_option("--dupe-factor", po.dupe_factor,
                                  "Passes with fresh pairs and masks");
    pretrain_data_cmd->add_flag("--whole-word-mask", po.whole_word_mask, "Mask whole words");
    pretrain_data_cmd->add_flag("!--static-masking,--dynamic-masking", po.static_masking,
                                "Store unmasked instances; the trainer masks on the fly");
    pretrain_data_cmd->add_option("--seed", po.seed, "Random seed");
    pretrain_data_cmd->add_option("--instances-per-shard", po.instances_per_shard,
                                  "Instances per shard file");
  }

  VocabArgs vocab;
  auto* vocab_cmd = app.add_subcommand(
      "vocab", "Train a WordPiece vocab.txt or a SentencePiece model on corpus files");
  vocab_cmd
      ->add_option(
          "inputs", vocab.inputs,
          "Corpus files (as pretrain-data reads them; SentencePiece: one sentence per line)")
      ->required()
      ->check(CLI::ExistingFile);
  vocab_cmd
      ->add_option("--out", vocab.out,
                   "Output directory (vocab.txt or spiece.model, tokenizer files)")
      ->required();
  vocab_cmd->add_option("--type", vocab.type, "wordpiece | sentencepiece")
      ->check(CLI::IsMember({"wordpiece", "sentencepiece"}));
  vocab_cmd->add_option("--model-type", vocab.model_type, "SentencePiece: unigram | bpe")
      ->check(CLI::IsMember({"unigram", "bpe"}));
  vocab_cmd->add_option("--vocab-size", vocab.vocab_size, "Entries, special tokens included")
      ->check(CLI::PositiveNumber);
  vocab_cmd->add_option("--min-frequency", vocab.min_frequency,
                        "WordPiece: least count of a merged pair");
  vocab_cmd->add_flag("--lowercase", vocab.lowercase,
                      "WordPiece: uncased (lower-case, strip accents)");

  std::string extend_model, extend_tokens, extend_out;
  auto* extend_cmd = app.add_subcommand(
      "extend-vocab",
      "Append tokens to a WordPiece checkpoint's vocabulary (embeddings grown, new rows = mean)");
  extend_cmd->add_option("--model", extend_model, "Model directory")
      ->required()
      ->check(CLI::ExistingDirectory);
  extend_cmd
      ->add_option("--tokens", extend_tokens,
                   "One token per line (e.g. a vocab.txt from `bertft vocab`; "
                   "tokens already present are skipped)")
      ->required()
      ->check(CLI::ExistingFile);
  extend_cmd->add_option("--out", extend_out, "Output directory")->required();

  std::string recipe_file, out_dir, cache_dir, trial_name, shard = "0/1";
  std::vector<std::string> overrides;
  int jobs = 0;
  auto* validate_cmd = app.add_subcommand(
      "validate", "Check a recipe (and every trial of its sweep) without running it");
  validate_cmd->add_option("recipe", recipe_file, "Recipe YAML")->required();
  validate_cmd->add_option("--set", overrides, "Override a recipe key: key=value (dotted key)");

  auto* train_cmd = app.add_subcommand("train",
                                       "Fine-tune one trial of a recipe (its training values, no "
                                       "sweep); resumes from a checkpoint in --out");
  train_cmd->add_option("recipe", recipe_file, "Recipe YAML")->required();
  train_cmd->add_option("--set", overrides, "Override a recipe key: key=value (dotted key)");
  train_cmd->add_option("--out", out_dir, "Run directory (default <output.dir>/train)");
  train_cmd->add_option("--cache", cache_dir,
                        "Feature cache directory (default <output.dir>/cache)");
  train_cmd->add_option("--trial-name", trial_name, "Name recorded in result.json (set by sweep)");
  bool no_cache = false;
  train_cmd->add_flag("--no-cache", no_cache, "Tokenise the data without the feature cache");

  auto* sweep_cmd = app.add_subcommand(
      "sweep", "Run a recipe's hyperparameter sweep: trials, leaderboard, best model exported");
  sweep_cmd->add_option("recipe", recipe_file, "Recipe YAML")->required();
  sweep_cmd->add_option("--set", overrides, "Override a recipe key: key=value (dotted key)");
  sweep_cmd->add_option("--jobs", jobs, "Trials in parallel (threads are split between them)")
      ->check(CLI::NonNegativeNumber);
  sweep_cmd->add_option("--shard", shard,
                        "Run the trials i, i+N, ... of N (for several machines): i/N");
  sweep_cmd->add_flag("--no-cache", no_cache,
                      "Every trial tokenises its data itself (no shared feature cache)");

  std::string export_run, export_out;
  auto* export_cmd =
      app.add_subcommand("export", "Write a run's best model in Hugging Face layout");
  export_cmd->add_option("run", export_run, "Sweep or trial directory")
      ->required()
      ->check(CLI::ExistingDirectory);
  export_cmd->add_option("--out", export_out, "Output directory")->required();

  PredictOptions predict;
  auto* predict_cmd =
      app.add_subcommand("predict", "Predict a data file with a fine-tuned model directory");
  predict_cmd
      ->add_option("--model", predict.model, "Fine-tuned model directory (bertft export or HF)")
      ->required()
      ->check(CLI::ExistingDirectory);
  predict_cmd
      ->add_option("--data", predict.data,
                   "Data file (JSONL, GLUE TSV, CSV, SQuAD JSON, CoNLL, SWAG CSV)")
      ->required()
      ->check(CLI::ExistingFile);
  predict_cmd->add_option("--format", predict.format,
                          "auto | glue | tsv | csv | jsonl | squad | conll | swag");
  predict_cmd->add_option("--glue-task", predict.glue_task,
                          "GLUE task, when not clear from the directory name");
  predict_cmd->add_option("--out", predict.out, "Predictions file (default stdout)");
  predict_cmd->add_option("--batch-size", predict.batch_size, "Examples per batch")
      ->check(CLI::PositiveNumber);
  predict_cmd->add_option("--device", predict.device, "cpu | cuda | cuda:N");
  predict_cmd->add_option("--precision", predict.precision, "fp32 | bf16")
      ->check(CLI::IsMember({"fp32", "bf16"}));

  std::string eval_model;
  auto* eval_cmd = app.add_subcommand(
      "eval", "Recompute a fine-tuned model's dev metrics on a recipe's data.dev");
  eval_cmd->add_option("--model", eval_model, "Fine-tuned model directory")
      ->required()
      ->check(CLI::ExistingDirectory);
  eval_cmd->add_option("--recipe", recipe_file, "Recipe YAML")->required();
  eval_cmd->add_option("--set", overrides, "Override a recipe key: key=value (dotted key)");

  CLI11_PARSE(app, argc, argv);
  if (verbose) log::set_level(log::Level::kDebug);
  configure_threads(threads);
  if (*tok_cmd) return run_tokenize(tokenize);
  if (*inspect_cmd) return run_inspect(inspect_dir, inspect_strict);
  if (*convert_cmd) return run_convert(convert_dir, convert_out, shard_mb);
  if (*score_cmd) {
    if (score.data.empty() && score.task != "token_classification")
      throw ConfigError("score: --data is required for --task " + score.task);
    return run_score(score);
  }
  if (*new_model_cmd) return run_new_model(new_model);
  if (*pretrain_data_cmd) return run_pretrain_data(pretrain_data);
  if (*vocab_cmd) return run_vocab(vocab);
  if (*extend_cmd) return run_extend_vocab(extend_model, extend_tokens, extend_out);
  if (*validate_cmd) return run_validate(recipe_file, overrides);
  if (*train_cmd) {
    auto recipe = load_recipe(recipe_file, overrides);
    if (threads == 0 && recipe.training.threads > 0)
      configure_threads(static_cast<int>(recipe.training.threads));
    const fs::path out = out_dir.empty() ? recipe.output.dir / "train" : fs::path(out_dir);
    const fs::path cache = no_cache            ? fs::path()
                           : cache_dir.empty() ? recipe.output.dir / "cache"
                                               : fs::path(cache_dir);
    if (!keep_resolved_recipe(out, recipe))
      throw ConfigError(fmt::format("{}: holds a different recipe; use another --out or delete it",
                                    (out / "recipe.yaml").string()));
    return run_trial(recipe, out, cache, trial_name.empty() ? recipe.name : trial_name);
  }
  if (*sweep_cmd) {
    const auto recipe = load_recipe(recipe_file, overrides);
    SweepOptions options;
    options.jobs = jobs;
    options.threads = threads;
    options.feature_cache = !no_cache;
    std::tie(options.shard_index, options.shard_count) = parse_shard(shard);
    return run_sweep(recipe, options);
  }
  if (*export_cmd) {
    export_model(export_run, export_out);
    return 0;
  }
  if (*predict_cmd) return run_predict(predict);
  if (*eval_cmd) return run_eval(eval_model, recipe_file, overrides);
  if (*quick_cmd) {
    quickstart.threads = threads;
    return run_quickstart(quickstart);
  }
  return 0;
}

}  // namespace bert::recipes
