// End to end through the `bertft` binary on real data subsets with a tiny model: a sweep with
// an interrupted trial that a rerun resumes (nothing finished is redone, the resumed weights
// equal an uninterrupted run's), the leaderboard, a failing trial recorded while the sweep
// goes on, and exported models that reload with identical outputs.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "bert/checkpoint/load.h"
#include "bert/checkpoint/safetensors.h"
#include "bert/common/file_util.h"
#include "bert/common/threads.h"
#include "bert/model/onednn_linear.h"
#include "bert/tokenizer/wordpiece.h"
#include "recipes/runner/export.h"
#include "recipes/runner/new_model.h"
#include "tasks/training/trainer.h"
#include "tests/support/predict_log.h"
#include "tests/support/test_support.h"

namespace bert::recipes {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path data_dir() {
  return testing::shared_dir() / "data";
}

class EndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BERTFT_REQUIRE_PATH(data_dir() / "bert-vocab" / "bert-base-cased-vocab.txt");
    tok::WordPieceOptions options;
    options.normalizer.lowercase = false;
    options.normalizer.strip_accents = false;
    const auto tokenizer = tok::WordPieceTokenizer::from_file(
        data_dir() / "bert-vocab" / "bert-base-cased-vocab.txt", options);
    BertConfig config;
    config.vocab_size(tokenizer->vocab_size())
        .hidden_size(32)
        .num_hidden_layers(2)
        .num_attention_heads(2)
        .intermediate_size(64)
        .max_position_embeddings(128);
    write_random_model(dir_.path() / "model", config, *tokenizer, 0);
  }

  /// Runs the binary with `args` (output to a log in the temp dir); returns its exit code.
  int bertft(const std::string& args, const std::string& env = "") {
    auto run = testing::run_bertft(args, dir_.path() / "cli.log", env);
    last_log_ = std::move(run.output);
    return run.code;
  }

  fs::path recipe(const std::string& name, const std::string& body) {
    const auto path = dir_.path() / (name + ".yaml");
    testing::write_bytes(path,
                         "model:\n  pretrained: " + (dir_.path() / "model").string() + "\n" + body +
                             "output:\n  dir: " + (dir_.path() / "runs" / name).string() + "\n");
    return path;
  }

  /// A recipe's data section: the first `train_limit` examples of `train`, `dev_limit` of `dev`.
  static std::string data_section(const fs::path& train,
                                  int train_limit,
                                  const fs::path& dev,
                                  int dev_limit) {
    return "data:\n  train: {path: " + train.string() + ", limit: " + std::to_string(train_limit) +
           "}\n  dev: {path: " + dev.string() + ", limit: " + std::to_string(dev_limit) + "}\n";
  }

  /// One epoch over MRPC's first 32 train pairs (dev: the first 16), batch 16, 64 tokens.
  fs::path small_mrpc_recipe(const std::string& name) {
    const auto mrpc = data_dir() / "glue" / "MRPC";
    return recipe(name, "task: {type: sequence_classification, max_seq_length: 64}\n" +
                            data_section(mrpc / "train.tsv", 32, mrpc / "dev.tsv", 16) +
                            "training: {epochs: 1, batch_size: 16}\n");
  }

  /// Outputs of the exported model and of a model holding the trial's best weights, on `data`.
  void expect_export_reloads_identically(const fs::path& exported,
                                         const fs::path& trial,
                                         const fs::path& data) {
    auto m = load_finetuned(exported);
    data::DataSpec spec;
    spec.path = data;
    spec.limit = 32;
    const auto features = m.adapter->featurize(m.adapter->read(spec), *m.tokenizer, false);
    auto reference = m.adapter->build_model(m.config);
    load_state_dict(*reference, SafetensorsReader(trial / "best" / "model.safetensors").read_all(),
                    "trial");
    const tasks::Trainer trainer(tasks::TrainerOptions{});
    const auto a = trainer.predict(*m.adapter, m.model, *features);
    const auto b = trainer.predict(*m.adapter, reference, *features);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_TRUE(torch::equal(a[i], b[i])) << "feature " << i;
    const auto result = json::parse(read_file(trial / "result.json"));
    EXPECT_EQ(m.config.id2label(), result["labels"].get<std::vector<std::string>>());
  }

  testing::TempDir dir_;
  std::string last_log_;
};

TEST_F(EndToEndTest, MrpcSweepResumesAnInterruptedTrialAndExports) {
  BERTFT_REQUIRE_PATH(data_dir() / "glue" / "MRPC" / "train.tsv");
  const auto mrpc = data_dir() / "glue" / "MRPC";
  const auto path =
      recipe("mrpc", "task: {type: sequence_classification, max_seq_length: 64}\n" +
                         data_section(mrpc / "train.tsv", 64, mrpc / "dev.tsv", 32) +
                         "training: {epochs: 2, batch_size: 16, log_every: 2}\n"
                         "sweep:\n  grid: {learning_rate: [1.0e-3, 5.0e-4]}\n  seeds: [1, 2]\n");
  const auto runs = dir_.path() / "runs" / "mrpc";
  // A crash after the first epoch's checkpoint of one trial: the sweep goes on without it.
  ASSERT_EQ(bertft("--threads 2 sweep " + path.string() + " --jobs 2",
                   "BERTFT_INTERRUPT=lr1.0e-3_seed2:3"),
            1)
      << last_log_;
  auto board = json::parse(read_file(runs / "leaderboard.json"));
  EXPECT_FALSE(board["complete"]);
  EXPECT_EQ(board["done"], 3);
  EXPECT_FALSE(fs::exists(runs / "best_model"));
  const auto interrupted = runs / "trials" / "lr1.0e-3_seed2";
  EXPECT_FALSE(fs::exists(interrupted / "result.json"));
  EXPECT_TRUE(fs::exists(interrupted / "checkpoints" / "step-00000004" / "optimizer.pt"));
  std::map<std::string, std::pair<std::string, fs::file_time_type>> finished;
  for (const auto* name : {"lr1.0e-3_seed1", "lr5.0e-4_seed1", "lr5.0e-4_seed2"}) {
    const auto file = runs / "trials" / name / "result.json";
    finished[name] = {read_file(file), fs::last_write_time(file)};
  }

  // The rerun redoes nothing finished and resumes the interrupted trial from its checkpoint.
  ASSERT_EQ(bertft("--threads 2 sweep " + path.string() + " --jobs 2"), 0) << last_log_;
  for (const auto& [name, before] : finished) {
    const auto file = runs / "trials" / name / "result.json";
    EXPECT_EQ(read_file(file), before.first) << name;
    EXPECT_EQ(fs::last_write_time(file), before.second) << name;
    EXPECT_NE(last_log_.find(name + ": done already"), std::string::npos) << last_log_;
  }
  EXPECT_NE(read_file(interrupted / "train.log").find("resumed from"), std::string::npos);
  board = json::parse(read_file(runs / "leaderboard.json"));
  EXPECT_TRUE(board["complete"]);
  EXPECT_EQ(board["settings"].size(), 2u);
  EXPECT_EQ(board["settings"][0]["done"], 2);
  for (const auto* file :
       {"leaderboard.md", "leaderboard.csv", "leaderboard.svg", "best_model/config.json",
        "best_model/model.safetensors", "best_model/vocab.txt", "best_model/bertft_task.yaml"})
    EXPECT_TRUE(fs::exists(runs / file)) << file;

  // Resumed == uninterrupted: the same trial run through in one go (same thread count, and
  // the precision the trial's auto chose at its start, which its resumption kept).
  const auto trial_log = read_file(interrupted / "train.log");
  const auto chose = trial_log.find("precision auto: ");
  ASSERT_NE(chose, std::string::npos) << trial_log;
  const auto precision = trial_log.substr(chose + 16, 4);
  const auto fresh = dir_.path() / "fresh";
  ASSERT_EQ(bertft("--threads 1 train " + (interrupted / "recipe.yaml").string() + " --out " +
                   fresh.string() + " --cache " + (runs / "cache").string() +
                   " --set training.precision=" + precision),
            0)
      << last_log_;
  const auto resumed_weights =
      SafetensorsReader(interrupted / "best" / "model.safetensors").read_all();
  const auto fresh_weights = SafetensorsReader(fresh / "best" / "model.safetensors").read_all();
  ASSERT_EQ(resumed_weights.size(), fresh_weights.size());
  for (const auto& [name, tensor] : fresh_weights)
    EXPECT_TRUE(torch::equal(tensor, resumed_weights.at(name))) << name;

  const auto best = runs / "trials" / board["best"]["trial"].get<std::string>();
  expect_export_reloads_identically(runs / "best_model", best, mrpc / "dev.tsv");
  // predict and eval on the exported model.
  ASSERT_EQ(bertft("predict --model " + (runs / "best_model").string() + " --data " +
                   (mrpc / "dev.tsv").string() + " --out " + (dir_.path() / "pred.jsonl").string()),
            0)
      << last_log_;
  const auto predictions = read_file(dir_.path() / "pred.jsonl");
  EXPECT_EQ(std::count(predictions.begin(), predictions.end(), '\n'), 408);
  const auto gold = testing::gold_metrics(last_log_);
  ASSERT_EQ(bertft("eval --model " + (runs / "best_model").string() + " --recipe " + path.string()),
            0)
      << last_log_;
  const auto eval = json::parse(last_log_.substr(last_log_.find('{')));
  EXPECT_NEAR(eval["metrics"]["f1"].get<double>(),
              json::parse(read_file(best / "result.json"))["main"].get<double>(), 1e-12);
  // score, reading the file predict wrote, gives the figures predict found with the gold labels.
  ASSERT_EQ(bertft("score --task sequence_classification --data " + (mrpc / "dev.tsv").string() +
                   " --predictions " + (dir_.path() / "pred.jsonl").string()),
            0)
      << last_log_;
  const auto scored = json::parse(last_log_.substr(last_log_.find('{')));
  for (const auto* metric : {"f1", "accuracy", "mcc"})
    EXPECT_NEAR(scored[metric].get<double>(), gold[metric].get<double>(), 1e-12) << metric << "\n"
                                                                                 << last_log_;
  // --split test needs a data.test in the recipe.
  EXPECT_EQ(bertft("eval --split test --model " + (runs / "best_model").string() + " --recipe " +
                   path.string()),
            2);
  EXPECT_NE(last_log_.find(path.string() + ": --split test: the recipe has no data.test"),
            std::string::npos)
      << last_log_;
  // The base model (pretraining heads) is no classifier: named, not a misread of the data.
  EXPECT_EQ(
      bertft("eval --model " + (dir_.path() / "model").string() + " --recipe " + path.string()), 2);
  EXPECT_NE(last_log_.find("a model for task 'pretraining' (BertForPreTraining), but " +
                           path.string() + ": task.type is 'sequence_classification'"),
            std::string::npos)
      << last_log_;

  // Pairs in JSON lines by HF's name (text_pair) too, with --logits; an unknown field is an error.
  const auto pairs = dir_.path() / "pairs.jsonl";
  testing::write_bytes(pairs,
                       "{\"id\": \"a\", \"text\": \"He left.\", \"text_pair\": \"He went.\"}\n"
                       "{\"id\": \"b\", \"text\": \"He left.\"}\n");
  ASSERT_EQ(bertft("predict --logits --model " + (runs / "best_model").string() + " --data " +
                   pairs.string() + " --out " + (dir_.path() / "pairs_pred.jsonl").string()),
            0)
      << last_log_;
  // --out never replaces --data (both JSON lines here): refused before the model runs.
  const auto pairs_text = read_file(pairs);
  EXPECT_EQ(bertft("predict --model " + (runs / "best_model").string() + " --data " +
                   pairs.string() + " --out " + pairs.string()),
            2);
  EXPECT_NE(last_log_.find("is the input --data"), std::string::npos) << last_log_;
  EXPECT_EQ(read_file(pairs), pairs_text);
  std::istringstream lines(read_file(dir_.path() / "pairs_pred.jsonl"));
  std::string line;
  std::vector<json> rows;
  while (std::getline(lines, line)) rows.push_back(json::parse(line));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["logits"].size(), 2u);
  EXPECT_NE(rows[0]["logits"], rows[1]["logits"]);  // the pair was read as a pair
  testing::write_bytes(pairs, "{\"text\": \"He left.\", \"txt_pair\": \"He went.\"}\n");
  EXPECT_EQ(
      bertft("predict --model " + (runs / "best_model").string() + " --data " + pairs.string()), 1);
  EXPECT_NE(last_log_.find(pairs.string() + ": unknown field 'txt_pair' (text: text_a | text | "
                                            "sentence | sentence1; pair: text_b | text_pair | "
                                            "sentence2; label: label | labels; id: id | idx)"),
            std::string::npos)
      << last_log_;
}

TEST_F(EndToEndTest, ConllFailingTrialIsRecordedAndTheRestExports) {
  BERTFT_REQUIRE_PATH(data_dir() / "conll2003" / "valid.txt");
  const auto conll = data_dir() / "conll2003";
  const auto path =
      recipe("conll", "task: {type: token_classification, max_seq_length: 64}\n" +
                          data_section(conll / "train.txt", 48, conll / "valid.txt", 24) +
                          "training: {epochs: 1, batch_size: 16, learning_rate: 1.0e-3}\n"
                          "sweep:\n  grid: {task.max_seq_length: [64, 512]}\n");
  const auto runs = dir_.path() / "runs" / "conll";
  ASSERT_EQ(bertft("sweep " + path.string()), 1) << last_log_;
  const auto board = json::parse(read_file(runs / "leaderboard.json"));
  EXPECT_EQ(board["done"], 1);
  const auto failed =
      json::parse(read_file(runs / "trials" / "max_seq_length512_seed42" / "result.json"));
  EXPECT_EQ(failed["status"], "failed");
  EXPECT_NE(failed["error"].get<std::string>().find("exceeds the model's longest input 128"),
            std::string::npos);
  EXPECT_NE(read_file(runs / "leaderboard.md").find("| max_seq_length512_seed42 | failed |"),
            std::string::npos);
  // Export takes the best finished trial even though the sweep is incomplete.
  ASSERT_EQ(bertft("export " + runs.string() + " --out " + (dir_.path() / "ner").string()), 0)
      << last_log_;
  const auto config = json::parse(read_file(dir_.path() / "ner" / "config.json"));
  EXPECT_EQ(config["architectures"][0], "BertForTokenClassification");
  EXPECT_EQ(config["id2label"].size(), 9u);
  expect_export_reloads_identically(
      dir_.path() / "ner", runs / "trials" / "max_seq_length64_seed42", conll / "valid.txt");

  // predict writes what score reads: CoNLL columns (word, gold, predicted).
  const auto text = read_file(conll / "valid.txt");
  const auto cut = text.find("\n\n", text.find("\n\n", 2000) + 2);  // a few sentences
  testing::write_bytes(dir_.path() / "small.conll", text.substr(0, cut + 2));
  const auto predicted = dir_.path() / "ner_pred.txt";
  ASSERT_EQ(bertft("predict --model " + (dir_.path() / "ner").string() + " --data " +
                   (dir_.path() / "small.conll").string() + " --out " + predicted.string()),
            0)
      << last_log_;
  // predict scored its gold tags; score, reading the file predict wrote, gives the same F1.
  const auto gold = testing::gold_metrics(last_log_);
  ASSERT_EQ(bertft("score --task token_classification --predictions " + predicted.string()), 0)
      << last_log_;
  EXPECT_NE(last_log_.find("processed "), std::string::npos) << last_log_;
  const auto scored = json::parse(last_log_.substr(last_log_.find('{')));
  EXPECT_NEAR(scored["f1"].get<double>(), gold["f1"].get<double>(), 1e-12) << last_log_;
  // The same sentences as JSON lines (run_ner.py's tokens + ner_tags), predicted into a .jsonl:
  // JSON lines the reader takes back, the tags as in the columns; score them against the data.
  std::string jsonl;
  std::vector<std::vector<std::string>> column_tags(1);
  json tokens = json::array(), tags = json::array();
  std::istringstream conll_lines(text.substr(0, cut + 2));
  std::istringstream predicted_lines(read_file(predicted));
  for (std::string line, predicted_line; std::getline(conll_lines, line);) {
    std::vector<std::string> fields;
    std::istringstream split(line);
    for (std::string f; split >> f;) fields.push_back(f);
    if (fields.empty() || fields[0] == "-DOCSTART-") {
      if (tokens.empty()) continue;
      jsonl += json{{"tokens", tokens}, {"ner_tags", tags}}.dump() + "\n";
      tokens = json::array();
      tags = json::array();
      continue;
    }
    tokens.push_back(fields.front());
    tags.push_back(fields.back());
  }
  for (std::string line; std::getline(predicted_lines, line);) {
    const auto space = line.rfind(' ');
    if (space == std::string::npos) {
      if (!column_tags.back().empty()) column_tags.emplace_back();
    } else {
      column_tags.back().push_back(line.substr(space + 1));
    }
  }
  if (column_tags.back().empty()) column_tags.pop_back();
  const auto small_jsonl = dir_.path() / "small.jsonl", predicted_jsonl = dir_.path() / "p.jsonl";
  testing::write_bytes(small_jsonl, jsonl);
  ASSERT_EQ(bertft("predict --model " + (dir_.path() / "ner").string() + " --data " +
                   small_jsonl.string() + " --out " + predicted_jsonl.string()),
            0)
      << last_log_;
  const auto lines = testing::json_lines(read_file(predicted_jsonl));
  const auto inputs = testing::json_lines(jsonl);
  ASSERT_EQ(lines.size(), column_tags.size());
  ASSERT_EQ(lines.size(), inputs.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["id"], std::to_string(i)) << lines[i].dump();  // the reader's, by line
    EXPECT_EQ(lines[i]["tokens"], inputs[i]["tokens"]) << i;
    EXPECT_EQ(lines[i]["ner_tags"].get<std::vector<std::string>>(), column_tags[i]) << i;
  }
  ASSERT_EQ(bertft("score --task token_classification --data " + small_jsonl.string() +
                   " --predictions " + predicted_jsonl.string()),
            0)
      << last_log_;
  const auto from_jsonl = json::parse(last_log_.substr(last_log_.find('{')));
  EXPECT_NEAR(from_jsonl["f1"].get<double>(), gold["f1"].get<double>(), 1e-12) << last_log_;
  // Predictions of other sentences are refused, naming the line.
  auto other = inputs;
  other[1]["tokens"][0] = "Elsewhere";
  std::string other_lines;
  for (const auto& line : other) other_lines += line.dump() + "\n";
  testing::write_bytes(dir_.path() / "other.jsonl", other_lines);
  EXPECT_EQ(
      bertft("score --task token_classification --data " + (dir_.path() / "other.jsonl").string() +
             " --predictions " + predicted_jsonl.string()),
      1);
  EXPECT_NE(last_log_.find(predicted_jsonl.string() + ":2: sentence 2 does not match"),
            std::string::npos)
      << last_log_;
  EXPECT_EQ(bertft("score --task token_classification --predictions " + predicted_jsonl.string()),
            2);
  EXPECT_NE(last_log_.find(predicted_jsonl.string() +
                           " holds JSON lines, predicted tags without the gold ones; give --data"),
            std::string::npos)
      << last_log_;
  EXPECT_EQ(bertft("predict --logits --model " + (dir_.path() / "ner").string() + " --data " +
                   (dir_.path() / "small.conll").string()),
            2);
  EXPECT_NE(last_log_.find("--logits: task token_classification has no per-example scores"),
            std::string::npos)
      << last_log_;
}

// SQuAD v2.0 from `train` to `score`: export takes the train run's directory, predict writes
// the answers and na_probs.json, score reads both.
TEST_F(EndToEndTest, SquadV2TrainExportPredictScoreChain) {
  BERTFT_REQUIRE_PATH(data_dir() / "squad" / "dev-v2.0.json");
  // A small SQuAD v2.0 file: the first article's first two paragraphs.
  auto squad = json::parse(read_file(data_dir() / "squad" / "dev-v2.0.json"));
  json article = squad["data"][0];
  article["paragraphs"] = json::array({article["paragraphs"][0], article["paragraphs"][1]});
  squad["data"] = json::array({article});
  const auto small = dir_.path() / "small-v2.json";
  testing::write_bytes(small, squad.dump());
  const auto path = recipe("squad2",
                           "task: {type: question_answering, max_seq_length: 128, doc_stride: 32}\n"
                           "data:\n  train: " +
                               small.string() + "\n  dev: " + small.string() +
                               "\ntraining: {epochs: 1, batch_size: 8, precision: fp32}\n");
  // `train` without --out writes <output.dir>/train; export takes output.dir itself.
  ASSERT_EQ(bertft("--threads 2 train " + path.string()), 0) << last_log_;
  const auto model = dir_.path() / "squad2-model";
  ASSERT_EQ(
      bertft("export " + (dir_.path() / "runs" / "squad2").string() + " --out " + model.string()),
      0)
      << last_log_;
  // inspect --strict loads the class config.json names: every key used, none missing.
  ASSERT_EQ(bertft("inspect --strict " + model.string()), 0) << last_log_;
  EXPECT_NE(last_log_.find("loaded as  BertForQuestionAnswering"), std::string::npos) << last_log_;
  EXPECT_NE(last_log_.find("0 missing, 0 unexpected, 0 mismatched"), std::string::npos)
      << last_log_;
  // A weights file without the head's bias: reported by inspect, refused by inspect --strict.
  const auto no_bias = dir_.path() / "no-bias";
  fs::copy(model, no_bias);
  auto weights = SafetensorsReader(no_bias / "model.safetensors").read_all();
  ASSERT_EQ(weights.erase("qa_outputs.bias"), 1u);
  save_safetensors(no_bias / "model.safetensors", weights);
  ASSERT_EQ(bertft("inspect " + no_bias.string()), 0) << last_log_;
  EXPECT_NE(last_log_.find("  missing    qa_outputs.bias"), std::string::npos) << last_log_;
  EXPECT_EQ(bertft("inspect --strict " + no_bias.string()), 1) << last_log_;
  EXPECT_NE(last_log_.find("missing key 'qa_outputs.bias'"), std::string::npos) << last_log_;
  // A vocabulary without [CLS] is reported.
  const auto no_cls = dir_.path() / "no-cls";
  fs::copy(model, no_cls);
  auto vocab = read_file(no_cls / "vocab.txt");
  vocab.replace(vocab.find("[CLS]\n"), 6, "[CLX]\n");
  testing::write_bytes(no_cls / "vocab.txt", vocab);
  EXPECT_EQ(bertft("inspect " + no_cls.string()), 1) << last_log_;
  EXPECT_NE(last_log_.find("error: " + (no_cls / "vocab.txt").string() +
                           ": no special token [CLS] in the vocabulary"),
            std::string::npos)
      << last_log_;
  const auto predicted = dir_.path() / "squad2-pred.json";
  ASSERT_EQ(bertft("predict --model " + model.string() + " --data " + small.string() + " --out " +
                   predicted.string()),
            0)
      << last_log_;
  const auto na_probs = dir_.path() / "squad2-pred.na_probs.json";
  ASSERT_TRUE(fs::exists(na_probs)) << last_log_;
  // Nor does a file written beside --out (the no-answer probabilities), before any is written.
  const auto gold_named_so = dir_.path() / "q.na_probs.json";
  fs::copy_file(small, gold_named_so);
  EXPECT_EQ(bertft("predict --model " + model.string() + " --data " + gold_named_so.string() +
                   " --out " + (dir_.path() / "q.json").string()),
            2);
  EXPECT_NE(last_log_.find("q.na_probs.json: is the input --data"), std::string::npos) << last_log_;
  EXPECT_FALSE(fs::exists(dir_.path() / "q.json"));
  EXPECT_EQ(read_file(gold_named_so), read_file(small));
  EXPECT_EQ(json::parse(read_file(na_probs)).size(), json::parse(read_file(predicted)).size());
  ASSERT_EQ(bertft("score --task question_answering --data " + small.string() + " --predictions " +
                   predicted.string() + " --na-probs " + na_probs.string()),
            0)
      << last_log_;
  for (const auto* key : {"\"HasAns_exact\"", "\"NoAns_f1\"", "\"best_f1_thresh\""})
    EXPECT_NE(last_log_.find(key), std::string::npos) << key << "\n" << last_log_;
}

// An unconfigured recipe (precision: auto) trains in the precision the probe chose and says
// which and why: fp32 where bf16 has no fast GEMM (an AVX2-only CPU), bf16 where it runs faster.
TEST_F(EndToEndTest, PrecisionAutoSaysWhatItChoseAndTrainsInIt) {
  BERTFT_REQUIRE_PATH(data_dir() / "glue" / "MRPC" / "train.tsv");
  const auto path = small_mrpc_recipe("auto");
  ASSERT_EQ(bertft("--threads 2 train " + path.string()), 0) << last_log_;
  const auto said = last_log_.find("[train] precision auto: ");
  ASSERT_NE(said, std::string::npos) << last_log_;
  const auto chosen = last_log_.substr(said + 24, 4);  // "bf16" or "fp32"
  EXPECT_TRUE(chosen == "bf16" || chosen == "fp32") << last_log_;
  EXPECT_NE(last_log_.find(chosen + " on cpu"), std::string::npos) << last_log_;
  // The same run's OpenBLAS kernels: never a fallback without AVX2 on a CPU that has it (bertft
  // sets OPENBLAS_CORETYPE and starts again where OpenBLAS fell back).
  if (openblas_core().empty()) return;  // libblas.so.3 is not OpenBLAS (nor then bertft's)
  const auto core_at = last_log_.find("[train] OpenBLAS core: ");
  ASSERT_NE(core_at, std::string::npos) << last_log_;
  const auto core =
      last_log_.substr(core_at + 23, last_log_.find_first_of(" \n", core_at + 23) - (core_at + 23));
  const bool avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  EXPECT_EQ(openblas_core_override(core, avx2_fma, false), "") << last_log_;
}

// oneDNN capped at AVX2 (as users do to work around a kernel, and as this suite plays an
// AVX2-only CPU): on an AVX-512 CPU LibTorch still sends bf16 products to oneDNN, which then has
// no kernel for them and throws. precision: auto must answer fp32 (it killed the run before),
// and the fp32 GEMMs take oneDNN's AVX2 kernels where the CPU has AVX2.
TEST_F(EndToEndTest, PrecisionAutoUnderAnAvx2CapOfOneDnnTrainsInFp32) {
  BERTFT_REQUIRE_PATH(data_dir() / "glue" / "MRPC" / "train.tsv");
  const auto path = small_mrpc_recipe("capped");
  ASSERT_EQ(bertft("--threads 2 train " + path.string(), "env ONEDNN_MAX_CPU_ISA=AVX2"), 0)
      << last_log_;
  EXPECT_NE(last_log_.find("[train] precision auto: fp32"), std::string::npos) << last_log_;
  if (onednn_built() && __builtin_cpu_supports("avx2") &&
      std::getenv("BERTFT_FP32_GEMM") == nullptr) {
    EXPECT_NE(last_log_.find("fp32 GEMMs: oneDNN (an AVX2 CPU"), std::string::npos) << last_log_;
  }
}

// A regression sweep that selects by mse (lower is better): every trial keeps its lowest-mse
// evaluation, the leaderboard ranks the lowest mean first, and the export is that setting's
// lowest-mse seed. In fp32, so that eval scores what predict_test wrote: on a CPU with fast
// bf16, `auto` evaluates in bf16, which rounds this small model's nearly equal scores to one value
// (correlations 0) where predict's fp32 ones differ (seen on the GPU machine's CPU).
TEST_F(EndToEndTest, StsbSweepSelectingByMseKeepsAndRanksTheLowest) {
  BERTFT_REQUIRE_PATH(data_dir() / "glue" / "STS-B" / "train.tsv");
  const auto stsb = data_dir() / "glue" / "STS-B";
  const auto path =
      recipe("stsb",
             "task: {type: sequence_classification, max_seq_length: 64, "
             "main_metric: mse}\n" +
                 data_section(stsb / "train.tsv", 64, stsb / "dev.tsv", 32) +
                 "  test: {path: " + (stsb / "dev.tsv").string() +
                 ", limit: 20}\n"
                 "training: {epochs: 3, batch_size: 16, eval_every: 2, log_every: 2, "
                 "precision: fp32}\n"
                 "sweep:\n  grid: {learning_rate: [1.0e-3, 1.0e-5]}\n  seeds: [1, 2]\n"
                 "  predict_test: true\n");
  const auto runs = dir_.path() / "runs" / "stsb";
  ASSERT_EQ(bertft("--threads 2 sweep " + path.string() + " --jobs 2"), 0) << last_log_;
  const auto board = json::parse(read_file(runs / "leaderboard.json"));
  EXPECT_EQ(board["main_metric"], "mse");
  EXPECT_EQ(board["goal"], "minimize");
  bool evaluations_differ = false;
  std::map<std::string, double> mse_of;
  for (const auto& t : board["trials"]) {
    const auto trial = runs / "trials" / t["trial"].get<std::string>();
    double lowest = 1e300, highest = -1e300;
    std::ifstream log(trial / "metrics.jsonl");
    for (std::string line; std::getline(log, line);) {
      const auto j = json::parse(line);
      if (j["split"] != "dev") continue;
      lowest = std::min(lowest, j["metrics"]["mse"].get<double>());
      highest = std::max(highest, j["metrics"]["mse"].get<double>());
    }
    evaluations_differ = evaluations_differ || lowest < highest;
    const auto result = json::parse(read_file(trial / "result.json"));
    EXPECT_EQ(result["goal"], "minimize");
    EXPECT_DOUBLE_EQ(result["main"].get<double>(), lowest) << trial;
    mse_of[t["trial"]] = lowest;
  }
  EXPECT_TRUE(evaluations_differ);
  ASSERT_EQ(board["settings"].size(), 2u);
  EXPECT_LT(board["settings"][0]["mean"].get<double>(), board["settings"][1]["mean"].get<double>());
  const auto best = board["best"]["trial"].get<std::string>();
  for (const auto& [trial, mse] : mse_of) {
    if (trial.substr(0, trial.find("_seed")) == best.substr(0, best.find("_seed"))) {
      EXPECT_LE(mse_of.at(best), mse) << trial;
    }
  }
  const auto exported = YAML::LoadFile((runs / "best_model" / "bertft_task.yaml").string());
  EXPECT_DOUBLE_EQ(exported["dev_score"].as<double>(), mse_of.at(best));
  EXPECT_EQ(exported["goal"].as<std::string>(), "minimize");

  // sweep.predict_test: the best model's predictions of data.test, in score's format.
  const auto test_predictions = read_file(runs / "test_predictions.jsonl");
  EXPECT_EQ(std::count(test_predictions.begin(), test_predictions.end(), '\n'), 20);
  EXPECT_NE(test_predictions.find("\"score\":"), std::string::npos) << test_predictions;
  // ... and GLUE's submission file beside it: a header, then index and score per example.
  const auto glue = read_file(runs / "test_predictions.glue.tsv");
  EXPECT_EQ(glue.rfind("index\tprediction\n", 0), 0u) << glue;
  EXPECT_EQ(std::count(glue.begin(), glue.end(), '\n'), 21) << glue;
  // eval --split test scores the model on data.test (here labelled).
  ASSERT_EQ(bertft("eval --split test --model " + (runs / "best_model").string() + " --recipe " +
                   path.string()),
            0)
      << last_log_;
  const auto eval = json::parse(last_log_.substr(last_log_.find('{')));
  EXPECT_EQ(eval["split"], "test");
  EXPECT_TRUE(eval["metrics"].contains("mse")) << eval.dump();
  // A test file with a score on some lines only: refused, the count and the first line named.
  const auto partial = dir_.path() / "partial_test.jsonl";
  testing::write_bytes(partial,
                       "{\"sentence1\": \"A dog runs.\", \"sentence2\": \"A dog ran.\", "
                       "\"label\": 4.5}\n{\"sentence1\": \"A cat.\", \"sentence2\": \"Rain.\"}\n");
  EXPECT_NE(bertft("eval --split test --model " + (runs / "best_model").string() + " --recipe " +
                   path.string() + " --set data.test=" + partial.string()),
            0);
  EXPECT_NE(last_log_.find(partial.string() +
                           ": data.test: 1 of its 2 examples have no gold "
                           "label (the first: " +
                           partial.string() + ":2: example '1'); label them or leave them out"),
            std::string::npos)
      << last_log_;
  // score reads the test predictions as scores (STS-B is regression): eval's correlations.
  const auto dev = read_file(stsb / "dev.tsv");
  size_t cut = 0;
  for (int line = 0; line < 21; ++line) cut = dev.find('\n', cut) + 1;  // header + 20
  fs::create_directories(dir_.path() / "STS-B");
  testing::write_bytes(dir_.path() / "STS-B" / "dev20.tsv", dev.substr(0, cut));
  ASSERT_EQ(bertft("score --task sequence_classification --data " +
                   (dir_.path() / "STS-B" / "dev20.tsv").string() + " --predictions " +
                   (runs / "test_predictions.jsonl").string()),
            0)
      << last_log_;
  const auto scored = json::parse(last_log_.substr(last_log_.find('{')));
  EXPECT_EQ(scored["examples"], 20);
  for (const auto* metric : {"pearson", "spearman"})
    EXPECT_NEAR(scored[metric].get<double>(), eval["metrics"][metric].get<double>(), 1e-6)
        << metric << "\n"
        << last_log_ << eval.dump();
}

// data.extra_dev (as HF's run_glue scores MNLI's mismatched dev beside the matched one): each
// set is evaluated with a trial's best weights at its end, not used to select them; result.json
// and the leaderboard carry its metrics as <metric>_<name>, and `eval --split <name>` on the
// export gives the best trial's figure. A bad name, a missing file and a set labelled on some
// lines only are refused before any trial.
TEST_F(EndToEndTest, ExtraDevSetsAreScoredWithTheBestWeightsAndRanked) {
  const auto sst2 = data_dir() / "glue" / "SST-2";
  BERTFT_REQUIRE_PATH(sst2 / "dev.tsv");
  const auto d = dir_.path();
  // Another labelled set: 48 dev sentences after the 32 that data.dev keeps.
  const auto dev_lines = read_file(sst2 / "dev.tsv");
  size_t from = 0;
  for (int line = 0; line < 33; ++line) from = dev_lines.find('\n', from) + 1;  // header + 32
  size_t to = from;
  for (int line = 0; line < 48; ++line) to = dev_lines.find('\n', to) + 1;
  fs::create_directories(d / "SST-2");
  const auto other = d / "SST-2" / "dev_other.tsv";
  testing::write_bytes(other, "sentence\tlabel\n" + dev_lines.substr(from, to - from));
  const auto body = [&](const std::string& extra, const std::string& more = "") {
    return "task: {type: sequence_classification, max_seq_length: 32}\n" +
           data_section(sst2 / "train.tsv", 64, sst2 / "dev.tsv", 32) + "  extra_dev:\n" + extra +
           more +
           "training: {epochs: 1, batch_size: 16}\n"
           "sweep: {grid: {learning_rate: [1.0e-3, 1.0e-4]}, predict_test: " +
           (more.empty() ? "false" : "true") + "}\n";
  };
  // data.extra_test: predicted beside data.test by sweep.predict_test (GLUE's MNLI-m and -mm).
  const auto path =
      recipe("extra", body("    other: {path: " + other.string() + "}\n",
                           "  test: {path: " + (sst2 / "test.tsv").string() +
                               ", limit: 10}\n  extra_test:\n    other: {path: " + other.string() +
                               ", limit: 12}\n"));
  ASSERT_EQ(bertft("sweep " + path.string()), 0) << last_log_;
  const auto runs = d / "runs" / "extra";
  const auto board = json::parse(read_file(runs / "leaderboard.json"));
  const auto trial = runs / "trials" / board["best"]["trial"].get<std::string>();
  EXPECT_NE(
      last_log_.find(", accuracy_other " +
                     fmt::format("{:.4f}", json::parse(read_file(
                                               trial / "result.json"))["metrics"]["accuracy_other"]
                                               .get<double>())),
      std::string::npos)
      << last_log_;  // each trial's line gives the other set's accuracy beside dev's
  for (const auto& [file, lines] :
       std::vector<std::pair<std::string, int>>{{"test_predictions.jsonl", 10},
                                                {"test_predictions.glue.tsv", 11},
                                                {"test_predictions_other.jsonl", 12},
                                                {"test_predictions_other.glue.tsv", 13}}) {
    const auto text = read_file(runs / file);
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), lines) << file << "\n" << text;
  }
  const auto trial_log = read_file(trial / "train.log");
  EXPECT_NE(trial_log.find(": data.extra_dev.other: accuracy "), std::string::npos) << trial_log;
  // metrics.jsonl ends with the other set's record: the best weights' metrics, unsuffixed.
  const auto metrics_log = read_file(trial / "metrics.jsonl");
  const auto last_line =
      json::parse(metrics_log.substr(metrics_log.rfind('\n', metrics_log.size() - 2) + 1));
  EXPECT_EQ(last_line["split"], "extra_dev.other") << metrics_log;
  EXPECT_DOUBLE_EQ(
      last_line["metrics"]["accuracy"].get<double>(),
      json::parse(read_file(trial / "result.json"))["metrics"]["accuracy_other"].get<double>());
  ASSERT_EQ(board["settings"].size(), 2u);
  for (const auto& setting : board["settings"]) {
    EXPECT_TRUE(setting["metrics_mean"].contains("accuracy_other")) << setting.dump();
    EXPECT_TRUE(setting["metrics_mean"].contains("accuracy")) << setting.dump();
  }
  EXPECT_NE(read_file(runs / "leaderboard.md").find("accuracy_other"), std::string::npos);
  const auto best = json::parse(read_file(trial / "result.json"));
  EXPECT_EQ(best["main_metric"], "accuracy");  // selection stays on data.dev
  ASSERT_EQ(bertft("eval --split other --model " + (runs / "best_model").string() + " --recipe " +
                   path.string()),
            0)
      << last_log_;
  const auto eval = json::parse(last_log_.substr(last_log_.find('{')));
  EXPECT_EQ(eval["split"], "other");
  EXPECT_EQ(eval["data"], other.string());
  for (const auto& [metric, value] : eval["metrics"].items())
    EXPECT_NEAR(value.get<double>(), best["metrics"]["" + metric + "_other"].get<double>(), 1e-9)
        << metric;
  // The dev metrics are not the other set's (48 other sentences).
  ASSERT_EQ(bertft("eval --model " + (runs / "best_model").string() + " --recipe " + path.string()),
            0)
      << last_log_;
  const auto on_dev = json::parse(last_log_.substr(last_log_.find('{')));
  EXPECT_NEAR(on_dev["metrics"]["accuracy"].get<double>(),
              best["metrics"]["accuracy"].get<double>(), 1e-9);
  EXPECT_EQ(bertft("eval --split train --model " + (runs / "best_model").string() + " --recipe " +
                   path.string()),
            2);
  EXPECT_NE(last_log_.find(path.string() +
                           ": --split train: not dev, test or a name of data.extra_dev (dev, "
                           "test, other)"),
            std::string::npos)
      << last_log_;

  // Refused before any trial: a name that cannot end a metric's, a file that is not there, and
  // (when the recipe parses) a set with an unlabelled line.
  const auto bad =
      recipe("extra_bad", body("    Other: {path: " + other.string() +
                                   "}\n    gone: {path: " + (d / "no.tsv").string() + "}\n",
                               "  extra_test:\n    Mm: {path: " + other.string() + "}\n"));
  ASSERT_EQ(bertft("validate " + bad.string()), 2) << last_log_;
  for (const auto& expected :
       {std::string("data.extra_dev.Other: a name of lower-case letters, digits and '_' (it ends "
                    "the names of metrics)"),
        std::string("data.extra_test.Mm: a name of lower-case letters, digits and '_' (it ends "
                    "the names of prediction files)"),
        "data.extra_dev.gone.path: no such file: " + (d / "no.tsv").string()})
    EXPECT_NE(last_log_.find(expected), std::string::npos) << expected << "\n" << last_log_;
  const auto partial = d / "partial.jsonl";
  testing::write_bytes(partial,
                       "{\"sentence\": \"a fine film .\", \"label\": \"1\"}\n"
                       "{\"sentence\": \"a dull one .\"}\n");
  // ... with a malformed extra test set beside it: validate names both.
  const auto broken = d / "broken_test.tsv";
  testing::write_bytes(broken, "sentence\tlabel\nfine\t1\none\t0\textra\n");
  const auto unlabelled =
      recipe("extra_partial",
             body("    part: " + partial.string() + "\n",
                  "  test: {path: " + (sst2 / "test.tsv").string() +
                      ", limit: 4}\n  extra_test:\n" + "    broken: " + broken.string() + "\n"));
  const auto said = partial.string() +
                    ": data.extra_dev.part is scored at the end of each trial, but 1 of its 2 "
                    "examples have no gold label (the first: " +
                    partial.string() + ":2: example '1')";
  ASSERT_EQ(bertft("validate " + unlabelled.string()), 1) << last_log_;
  EXPECT_NE(last_log_.find(said), std::string::npos) << last_log_;
  EXPECT_NE(last_log_.find(broken.string() + ":3: expected 2 fields (as the header), got 3"),
            std::string::npos)
      << last_log_;
  ASSERT_EQ(bertft("sweep " + unlabelled.string()), 1) << last_log_;
  EXPECT_NE(last_log_.find(said), std::string::npos) << last_log_;
  EXPECT_NE(last_log_.find("[sweep] no trial was started"), std::string::npos) << last_log_;
  ASSERT_EQ(bertft("train " + unlabelled.string()), 1) << last_log_;
  EXPECT_NE(last_log_.find(said), std::string::npos) << last_log_;
}

// Ctrl-C (SIGINT) and SIGTERM: the run finishes its step, writes a checkpoint, says so and exits
// 130 / 143; rerunning resumes from that checkpoint.
TEST_F(EndToEndTest, SigintAndSigtermCheckpointAndExit130And143) {
  BERTFT_REQUIRE_PATH(data_dir() / "glue" / "MRPC" / "train.tsv");
  const auto mrpc = data_dir() / "glue" / "MRPC";
  const auto path =
      recipe("signals", "task: {type: sequence_classification, max_seq_length: 32}\n" +
                            data_section(mrpc / "train.tsv", 32, mrpc / "dev.tsv", 8) +
                            "training: {epochs: 10000, batch_size: 8, log_every: 1, "
                            "eval_every: 0, precision: fp32}\n");
  for (const auto& [signal, expected] : {std::pair{SIGINT, 130}, std::pair{SIGTERM, 143}}) {
    const auto out = dir_.path() / ("stopped" + std::to_string(signal));
    const auto log = dir_.path() / ("stopped" + std::to_string(signal) + ".log");
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execl(testing::bertft_binary().c_str(), "bertft", "--threads", "1", "train", path.c_str(),
              "--out", out.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // Wait for training steps (metrics.jsonl grows), then signal.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    int status = 0;
    bool ended = false;
    while (std::chrono::steady_clock::now() < deadline &&
           !(fs::exists(out / "metrics.jsonl") && fs::file_size(out / "metrics.jsonl") > 0) &&
           !(ended = ::waitpid(pid, &status, WNOHANG) == pid))
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!ended) {
      ::kill(pid, signal);
      ::waitpid(pid, &status, 0);
    }
    const auto said = read_file(log);
    ASSERT_TRUE(WIFEXITED(status)) << said;
    EXPECT_EQ(WEXITSTATUS(status), expected) << said;
    EXPECT_NE(said.find("interrupted after step"), std::string::npos) << said;
    EXPECT_TRUE(fs::exists(out / "checkpoints" / "latest")) << said;
  }
  // The rerun resumes from the checkpoint (stopped again by the test hook at its next one).
  ASSERT_EQ(bertft("--threads 1 train " + path.string() + " --out " +
                       (dir_.path() / "stopped15").string(),
                   "BERTFT_INTERRUPT=signals:1"),
            143)
      << last_log_;
  EXPECT_NE(last_log_.find("resumed from"), std::string::npos) << last_log_;
}

// `validate` reads every split and the model directory and reports every problem at once
// (file:line), exit 1; `sweep` finds the same before starting any trial.
TEST_F(EndToEndTest, ValidateAndSweepReportEveryDataAndModelProblemBeforeTraining) {
  const auto d = dir_.path();
  testing::write_bytes(d / "train.tsv", "sentence\tlabel\nThe cat sat.\t1\nA dog ran.\t0\n");
  testing::write_bytes(d / "dev.tsv", "sentence\tlabel\nIt rained.\t1\nIt snowed.\tmaybe\n");
  testing::write_bytes(d / "test.tsv", "sentence\tlabel\nok\t1\nextra\t1\t2\nfine\t0\nmore\n");
  const auto path = recipe("broken",
                           "task: {type: sequence_classification, max_seq_length: 32}\n"
                           "data:\n  train: " +
                               (d / "train.tsv").string() + "\n  dev: " + (d / "dev.tsv").string() +
                               "\n  test: " + (d / "test.tsv").string() +
                               "\ntraining: {epochs: 1, batch_size: 2}\n");
  ASSERT_EQ(bertft("validate " + path.string()), 1) << last_log_;
  for (const auto& expected :
       {(d / "dev.tsv").string() + ":3: label 'maybe' was not seen in training (labels: 0, 1)",
        (d / "test.tsv").string() + ":3: expected 2 fields (as the header), got 3",
        (d / "test.tsv").string() + ":5: expected 2 fields (as the header), got 1",
        path.string() + ": 2 problem(s) in the model or data"})
    EXPECT_NE(last_log_.find(expected), std::string::npos) << expected << "\n" << last_log_;
  EXPECT_EQ(last_log_.find("valid;"), std::string::npos) << last_log_;

  // The sweep stops before any trial (the dev label fails every trial alike).
  const auto sweep_recipe = [&](const std::string& dev) {
    return recipe("broken_sweep",
                  "task: {type: sequence_classification, max_seq_length: 32}\n"
                  "data:\n  train: " +
                      (d / "train.tsv").string() + "\n  dev: " + (d / dev).string() +
                      "\ntraining: {epochs: 1, batch_size: 2}\n");
  };
  const auto no_test = sweep_recipe("dev.tsv");
  ASSERT_EQ(bertft("sweep " + no_test.string()), 1) << last_log_;
  EXPECT_NE(last_log_.find("label 'maybe' was not seen in training"), std::string::npos)
      << last_log_;
  EXPECT_NE(last_log_.find("[sweep] no trial was started"), std::string::npos) << last_log_;
  EXPECT_EQ(last_log_.find("starting ("), std::string::npos) << last_log_;
  if (torch::cuda::device_count() == 0) {  // a device this process cannot use: the same
    ASSERT_EQ(bertft("sweep " + no_test.string() + " --set training.device=cuda"), 1) << last_log_;
    EXPECT_NE(last_log_.find(no_test.string() +
                             ": training.device: 'cuda', but LibTorch sees no CUDA GPU"),
              std::string::npos)
        << last_log_;
    EXPECT_NE(last_log_.find("[sweep] no trial was started"), std::string::npos) << last_log_;
  }
  EXPECT_FALSE(fs::exists(d / "runs" / "broken_sweep" / "trials" / "seed42" / "recipe.yaml"));

  // `train` fails before a step on the same label (result.json: failed, 0 steps).
  ASSERT_EQ(bertft("train " + no_test.string()), 1) << last_log_;
  const auto train_recipe = d / "runs" / "broken_sweep" / "train" / "recipe.yaml";
  ASSERT_TRUE(fs::exists(train_recipe));

  // The recipe fixed (another dev file): the sweep's trial and the train run start, neither
  // refused as "holds a different recipe" (nothing had run under the broken one).
  testing::write_bytes(d / "dev_fixed.tsv", "sentence\tlabel\nIt rained.\t1\nIt snowed.\t0\n");
  const auto fixed = sweep_recipe("dev_fixed.tsv");
  ASSERT_EQ(bertft("train " + fixed.string()), 0) << last_log_;
  EXPECT_NE(last_log_.find(train_recipe.string() + ": replaced by the recipe given"),
            std::string::npos)
      << last_log_;
  EXPECT_NE(read_file(train_recipe).find("dev_fixed.tsv"), std::string::npos);
  ASSERT_EQ(bertft("sweep " + fixed.string()), 0) << last_log_;
  EXPECT_NE(last_log_.find("starting ("), std::string::npos) << last_log_;
  // A run that trained keeps its recipe: the broken one is refused there now.
  sweep_recipe("dev.tsv");
  EXPECT_EQ(bertft("train " + no_test.string()), 2) << last_log_;
  EXPECT_NE(last_log_.find("holds a different recipe"), std::string::npos) << last_log_;

  // A dev file whose JSON lines omit the label on one line: data.dev is scored at each
  // evaluation, so validate and train say so before a step, naming the line (it failed at the
  // first evaluation, an epoch later); train again, the dev features now from the cache, too.
  const auto partial_dev = d / "dev_partial.jsonl";
  testing::write_bytes(partial_dev,
                       "{\"sentence\": \"It rained.\", \"label\": \"1\"}\n"
                       "{\"sentence\": \"It snowed.\"}\n"
                       "{\"sentence\": \"It hailed.\"}\n");
  const auto partial = recipe("partial_dev",
                              "task: {type: sequence_classification, max_seq_length: 32}\n"
                              "data:\n  train: " +
                                  (d / "train.tsv").string() + "\n  dev: " + partial_dev.string() +
                                  "\ntraining: {epochs: 1, batch_size: 2}\n");
  const auto unlabelled = partial_dev.string() +
                          ": data.dev is scored at each evaluation, but 2 of its 3 examples have "
                          "no gold label (the first: " +
                          partial_dev.string() + ":2: example '1'); label them or leave them out";
  ASSERT_EQ(bertft("validate " + partial.string()), 1) << last_log_;
  EXPECT_NE(last_log_.find(unlabelled), std::string::npos) << last_log_;
  for (int attempt = 0; attempt < 2; ++attempt) {
    ASSERT_EQ(bertft("train " + partial.string()), 1) << last_log_;
    EXPECT_NE(last_log_.find(unlabelled), std::string::npos) << attempt << "\n" << last_log_;
    EXPECT_EQ(last_log_.find("[train]"), std::string::npos) << attempt << "\n" << last_log_;
  }

  // A model whose config does not match its weights, read from the safetensors header only.
  const auto model = d / "mismatched";
  fs::copy(d / "model", model);
  auto config = json::parse(read_file(model / "config.json"));
  config["intermediate_size"] = 65;
  testing::write_bytes(model / "config.json", config.dump());
  testing::write_bytes(d / "dev.tsv", "sentence\tlabel\nIt rained.\t1\n");
  ASSERT_EQ(bertft("validate " + no_test.string() + " --set model.pretrained=" + model.string()), 1)
      << last_log_;
  EXPECT_NE(last_log_.find((model / "model.safetensors").string() +
                           ": tensor bert.encoder.layer.0.intermediate.dense.weight has shape "
                           "[64, 32]; config.json implies [65, 32]"),
            std::string::npos)
      << last_log_;
}

}  // namespace
}  // namespace bert::recipes
