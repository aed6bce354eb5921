// The command line as a user meets it: exact exit codes and messages for unknown commands and
// bad option values, defaults and exit codes in --help.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "bert/checkpoint/pretrained_dir.h"
#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "recipes/runner/command.h"
#include "tests/support/test_support.h"

namespace bert::recipes {
namespace {

class CliTest : public ::testing::Test {
 protected:
  testing::BertftRun bertft(const std::string& args) {
    return testing::run_bertft(args, dir_.path() / "cli.log");
  }
  testing::TempDir dir_;
};

// new-model and extend-vocab write their model through write_model_dir: whole or not at all,
// beside the user's own files, over what a run that died left in the staging directory.
TEST_F(CliTest, AModelDirectoryIsWrittenWholeOrNotAtAll) {
  namespace fs = std::filesystem;
  const auto out = dir_.path() / "model", staging = dir_.path() / ".tmp-model";
  const auto fail_midway = [](const fs::path& d) {
    testing::write_bytes(d / "model.safetensors", "half");
    throw std::runtime_error("disk full");
  };
  EXPECT_THROW(write_model_dir(out.string(), fail_midway), std::runtime_error);
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(staging));

  fs::create_directories(staging);
  testing::write_bytes(staging / "stale.bin", "from a run that died");
  write_model_dir(out.string() + "/", [](const fs::path& d) {
    testing::write_bytes(d / "config.json", "{}");
    testing::write_bytes(d / "vocab.txt", "a\n");
  });
  EXPECT_EQ(read_file(out / "config.json"), "{}");
  EXPECT_FALSE(fs::exists(out / "stale.bin"));
  EXPECT_FALSE(fs::exists(staging));

  const auto notes = dir_.path() / "notes";
  fs::create_directories(notes);
  testing::write_bytes(notes / "README.md", "mine");
  EXPECT_THROW(write_model_dir(notes.string(), fail_midway), std::runtime_error);
  EXPECT_EQ(std::distance(fs::directory_iterator(notes), fs::directory_iterator()), 1);
  write_model_dir((notes / ".").string(),  // "dir/." is dir
                  [](const fs::path& d) { testing::write_bytes(d / "config.json", "{}"); });
  EXPECT_EQ(read_file(notes / "README.md"), "mine");
  EXPECT_EQ(read_file(notes / "config.json"), "{}");
  EXPECT_FALSE(fs::exists(dir_.path() / ".tmp-notes"));
}

// Into a directory holding another tokenizer's files that the new model would not replace
// (read with it by a loader): refused, nothing written; the same kind of files are replaced.
TEST_F(CliTest, AModelDirectoryIsNotWrittenBesideAnotherTokenizer) {
  namespace fs = std::filesystem;
  const auto out = dir_.path() / "vocab";
  fs::create_directories(out);
  testing::write_bytes(out / "vocab.txt", "old\n");
  testing::write_bytes(out / "tokenizer_config.json", "{\"old\": 1}");
  testing::write_bytes(out / "notes.md", "mine");
  try {
    write_model_dir(out.string(), [](const fs::path& d) {
      testing::write_bytes(d / "spiece.model", "sp");
      testing::write_bytes(d / "tokenizer_config.json", "{}");
    });
    ADD_FAILURE() << "a SentencePiece model was written beside a WordPiece vocab.txt";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("(vocab.txt)"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(out / "spiece.model"));
  EXPECT_EQ(read_file(out / "tokenizer_config.json"), "{\"old\": 1}");
  EXPECT_FALSE(fs::exists(dir_.path() / ".tmp-vocab"));

  write_model_dir(out.string(), [](const fs::path& d) {
    testing::write_bytes(d / "vocab.txt", "new\n");
    testing::write_bytes(d / "tokenizer_config.json", "{}");
  });
  EXPECT_EQ(read_file(out / "vocab.txt"), "new\n");
  EXPECT_EQ(read_file(out / "notes.md"), "mine");
}

// vocab, new-model and extend-vocab never write into a model's directory: any of its weights
// files or its config.json marks one.
TEST_F(CliTest, ANewVocabularyIsNeverWrittenIntoAModelsDirectory) {
  namespace fs = std::filesystem;
  for (const char* file : {"config.json", "model.safetensors", "model.safetensors.index.json",
                           "pytorch_model.bin", "pytorch_model.bin.index.json"}) {
    const auto out = dir_.path() / (std::string("holds-") + file);
    fs::create_directories(out);
    testing::write_bytes(out / file, "x");
    const auto message =
        testing::error_message([&] { check_out_holds_no_model(out.string(), "vocab writes"); });
    EXPECT_NE(message.find("--out " + out.string() + ": already holds a model (" + file +
                           "); vocab writes, so give a new directory"),
              std::string::npos)
        << message;
  }
  const auto tokenizer_only = dir_.path() / "tokenizer";
  fs::create_directories(tokenizer_only);
  testing::write_bytes(tokenizer_only / "vocab.txt", "a\n");
  EXPECT_NO_THROW(check_out_holds_no_model(tokenizer_only.string(), "vocab writes"));
  EXPECT_NO_THROW(check_out_holds_no_model((dir_.path() / "new").string(), "vocab writes"));
  EXPECT_NE(testing::error_message([&] {
              check_out_holds_no_model((tokenizer_only / "vocab.txt").string(), "vocab writes");
            }).find("vocab.txt: is a file; vocab writes into a directory"),
            std::string::npos);
}

// pretrain-data takes its tokenizer from exactly one of --model and --vocab.
TEST_F(CliTest, PretrainDataTakesExactlyOneTokenizer) {
  testing::write_bytes(dir_.path() / "corpus.txt", "One.\nTwo.\n");
  testing::write_bytes(dir_.path() / "vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n");
  const std::string command = "pretrain-data " + (dir_.path() / "corpus.txt").string() + " --out " +
                              (dir_.path() / "shards").string();
  for (const std::string& tokenizers :
       {std::string(),
        " --model " + dir_.path().string() + " --vocab " + (dir_.path() / "vocab.txt").string()}) {
    const auto run = bertft(command + tokenizers);
    EXPECT_EQ(run.code, 2) << tokenizers << "\n" << run.output;
    EXPECT_NE(run.output.find("pretrain-data: give exactly one of --model and --vocab"),
              std::string::npos)
        << run.output;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "shards"));
}

// quickstart goes on only in its own output of the same options (its finished trials are kept):
// never among the user's files, nor over another seed's run, whose trials would pass as done,
// nor onto a file.
TEST_F(CliTest, QuickstartNeverWritesAmongOtherFilesOrAnotherSeedsRun) {
  namespace fs = std::filesystem;
  const auto out = dir_.path() / "project";
  fs::create_directories(out / "data");
  testing::write_bytes(out / "data" / "train.tsv", "mine\n");
  const auto among = bertft("quickstart --out " + out.string());
  EXPECT_EQ(among.code, 2) << among.output;
  EXPECT_NE(
      among.output.find("--out " + out.string() + ": holds files that no quickstart wrote (data)"),
      std::string::npos)
      << among.output;
  EXPECT_EQ(read_file(out / "data" / "train.tsv"), "mine\n");
  const auto other = dir_.path() / "other";
  fs::create_directories(other);
  testing::write_bytes(other / "quickstart.json", R"({"pretrain":false,"seed":1})");
  testing::write_bytes(other / "recipe.yaml", "kept\n");
  const auto seed = bertft("quickstart --seed 2 --out " + other.string());
  EXPECT_EQ(seed.code, 2) << seed.output;
  EXPECT_NE(seed.output.find("holds the quickstart of {\"pretrain\":false,\"seed\":1}"),
            std::string::npos)
      << seed.output;
  EXPECT_EQ(read_file(other / "recipe.yaml"), "kept\n");
  const auto file = dir_.path() / "notes.txt";
  testing::write_bytes(file, "my notes\n");
  const auto onto_file = bertft("quickstart --out " + file.string());
  EXPECT_EQ(onto_file.code, 2) << onto_file.output;
  EXPECT_NE(onto_file.output.find("--out " + file.string() +
                                  ": is a file; quickstart writes a directory there"),
            std::string::npos)
      << onto_file.output;
  EXPECT_EQ(read_file(file), "my notes\n");
}

// new-model writes the shape it is given (each option to its config.json key), its seed decides
// the weights, and its log counts the parameters it wrote; a size of 0 is refused.
TEST_F(CliTest, NewModelWritesTheShapeAndSeedItIsGiven) {
  const auto vocab = dir_.path() / "vocab.txt";
  testing::write_bytes(vocab, "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\nsat\n##s\n.\n");
  const auto new_model = [&](const std::string& out, const std::string& options) {
    return bertft("new-model --vocab " + vocab.string() + " --out " + (dir_.path() / out).string() +
                  " " + options);
  };
  const std::string shape =
      "--hidden 64 --layers 2 --heads 4 --intermediate 96 --max-positions 40 --seed ";
  const auto made = new_model("a", shape + "7");
  ASSERT_EQ(made.code, 0) << made.output;
  const auto config = nlohmann::json::parse(read_file(dir_.path() / "a" / "config.json"));
  EXPECT_EQ(config.at("vocab_size"), 10);
  EXPECT_EQ(config.at("hidden_size"), 64);
  EXPECT_EQ(config.at("num_hidden_layers"), 2);
  EXPECT_EQ(config.at("num_attention_heads"), 4);
  EXPECT_EQ(config.at("intermediate_size"), 96);
  EXPECT_EQ(config.at("max_position_embeddings"), 40);
  int64_t params = 0;
  for (const auto& [name, t] : read_weights(PretrainedDir::find(dir_.path() / "a").weights))
    params += t.numel();
  EXPECT_GT(params, 50000);  // two decimals of millions tell a wrong count
  EXPECT_NE(made.output.find(
                fmt::format("heads 4 | {:.2f} M parameters", static_cast<double>(params) / 1e6)),
            std::string::npos)
      << made.output;
  // The same seed, the same bytes; another seed, other weights.
  const auto weights = read_file(dir_.path() / "a" / "model.safetensors");
  ASSERT_EQ(new_model("b", shape + "7").code, 0);
  EXPECT_EQ(read_file(dir_.path() / "b" / "model.safetensors"), weights);
  ASSERT_EQ(new_model("c", shape + "8").code, 0);
  EXPECT_NE(read_file(dir_.path() / "c" / "model.safetensors"), weights);
  const auto zero = new_model("d", "--hidden 0");
  EXPECT_EQ(zero.code, 2);
  EXPECT_NE(zero.output.find("--hidden: must be a number > 0, got '0'"), std::string::npos)
      << zero.output;
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "d"));
}

// score's --positive-label names binary F1's class (without it, "1": absent here, so no F1),
// and --regression reads labels and predictions as scores (correlations, no accuracy).
TEST_F(CliTest, ScoreTakesThePositiveLabelAndRegressionFromItsOptions) {
  const auto gold = dir_.path() / "gold.jsonl";
  const auto predicted = dir_.path() / "predicted.txt";
  const auto score = [&](const std::string& options) {
    const auto run = bertft("score --task sequence_classification --data " + gold.string() +
                            " --predictions " + predicted.string() + options);
    EXPECT_EQ(run.code, 0) << run.output;
    const auto brace = run.output.find('{');
    return brace == std::string::npos ? nlohmann::json()
                                      : nlohmann::json::parse(run.output.substr(brace));
  };
  // The gold data (JSONL, an example per label) and the predictions file.
  const auto write = [&](const std::vector<std::string>& labels, const std::string& predictions) {
    std::string lines;
    for (const auto& label : labels)
      lines += fmt::format(R"({{"text": "a", "label": "{}"}})", label) + "\n";
    testing::write_bytes(gold, lines);
    testing::write_bytes(predicted, predictions);
  };
  write({"pos", "neg", "pos", "neg"}, "pos\npos\npos\nneg\n");
  const auto labels = score(" --positive-label pos");
  EXPECT_DOUBLE_EQ(labels.value("accuracy", -1.0), 0.75) << labels.dump();
  EXPECT_NEAR(labels.value("f1", -1.0), 0.8, 1e-12) << labels.dump();  // P 2/3, R 1
  EXPECT_FALSE(score("").contains("f1"));
  write({"1.0", "2.0", "3.0", "4.0"}, "1.5\n2.5\n2.9\n4.2\n");
  const auto scores = score(" --regression");
  EXPECT_DOUBLE_EQ(scores.value("spearman", -1.0), 1.0) << scores.dump();
  EXPECT_GT(scores.value("pearson", -1.0), 0.98) << scores.dump();
  EXPECT_FALSE(scores.contains("accuracy")) << scores.dump();
  EXPECT_TRUE(score("").contains("accuracy"));  // the same files as labels
  // Multi-label: predict's "labels" lists imply it; --multi-label reads plain lines as sets,
  // joined by --label-separator. Gold {a,b} {} {b} {c}, predicted {a} {} {b,c} {c}: TP 3,
  // FP 1, FN 1; per label F1 a 1, b 2/3, c 2/3; sets equal 2 of 4.
  testing::write_bytes(gold, R"({"text": "x", "labels": ["a", "b"]})"
                             "\n"
                             R"({"text": "x", "labels": []})"
                             "\n"
                             R"({"text": "x", "labels": ["b"]})"
                             "\n"
                             R"({"text": "x", "labels": ["c"]})"
                             "\n");
  const auto expect_sets = [](const nlohmann::json& metrics) {
    EXPECT_NEAR(metrics.value("micro_f1", -1.0), 0.75, 1e-12) << metrics.dump();
    EXPECT_NEAR(metrics.value("macro_f1", -1.0), (1 + 4.0 / 3.0) / 3.0, 1e-12) << metrics.dump();
    EXPECT_DOUBLE_EQ(metrics.value("accuracy", -1.0), 0.5) << metrics.dump();
  };
  testing::write_bytes(predicted, R"({"id": "0", "labels": ["a"]})"
                                  "\n"
                                  R"({"id": "1", "labels": []})"
                                  "\n"
                                  R"({"id": "2", "labels": ["b", "c"]})"
                                  "\n"
                                  R"({"id": "3", "labels": ["c"]})"
                                  "\n");
  expect_sets(score(""));
  testing::write_bytes(predicted, "a\n\nb;c\nc\n");
  const auto plain = bertft("score --task sequence_classification --data " + gold.string() +
                            " --predictions " + predicted.string() + " --multi-label");
  EXPECT_EQ(plain.code, 1) << plain.output;  // 3 lines for 4 examples: the blank one is skipped
  // Labels joined in a string, the empty set an empty one: nothing says multi-label but the flag.
  testing::write_bytes(predicted, R"({"id": "0", "label": "a"})"
                                  "\n"
                                  R"({"id": "1", "label": ""})"
                                  "\n"
                                  R"({"id": "2", "label": "b;c"})"
                                  "\n"
                                  R"({"id": "3", "label": "c"})"
                                  "\n");
  expect_sets(score(" --multi-label --label-separator ';'"));
  // --help names what each task's scorer reads, and only the tasks that have one.
  const auto help = bertft("score --help").output;
  for (const auto* task :
       {"sequence_classification", "multiple_choice", "question_answering", "token_classification"})
    EXPECT_NE(help.find(fmt::format("\n                                {}: ", task)),
              std::string::npos)
        << task << "\n"
        << help;
  EXPECT_EQ(help.find("pretraining"), std::string::npos) << help;
}

// export takes a run directory that is there (a usage error naming it otherwise) and writes
// nothing for one that is not.
TEST_F(CliTest, ExportNamesARunDirectoryThatIsNotThere) {
  const auto missing = dir_.path() / "no-such-run";
  const auto out = dir_.path() / "exported";
  const auto run = bertft("export " + missing.string() + " --out " + out.string());
  EXPECT_EQ(run.code, 2) << run.output;
  EXPECT_NE(run.output.find("run: Directory does not exist: " + missing.string()),
            std::string::npos)
      << run.output;
  EXPECT_FALSE(std::filesystem::exists(out));
}

// `tokenize` reads plain lines and JSON lines by the readers' field names (an id and a label
// skipped, a null field absent, any other field or a text given twice refused naming the line),
// and takes a model directory's own casing without --lowercase.
TEST_F(CliTest, TokenizeReadsTheReadersFieldNamesAndTheModelsOwnCasing) {
  const auto d = dir_.path();
  testing::write_bytes(d / "vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\nsat\n.\n");
  const auto vocab = (d / "vocab.txt").string();
  const auto tokenize = [&](const std::string& args, const std::string& input) {
    testing::write_bytes(d / "in.txt", input);
    const auto run = testing::run_bertft("tokenize " + args, d / "tokenize.log", "", d / "in.txt");
    std::vector<std::vector<int64_t>> ids;
    for (const auto& line : testing::json_lines(run.output))
      ids.push_back(line.at("ids").get<std::vector<int64_t>>());
    return std::make_pair(run, ids);
  };
  using Ids = std::vector<std::vector<int64_t>>;
  const auto [run, ids] =
      tokenize("--vocab " + vocab + " --lowercase",
               "The cat\n"
               "{\"id\": \"a1\", \"label\": 1, \"sentence1\": \"the cat\", \"sentence2\": null}\n"
               "{\"text\": \"cat\", \"text_b\": \"sat.\"}\n");
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_EQ(ids, (Ids{{2, 5, 6, 3}, {2, 5, 6, 3}, {2, 6, 3, 7, 8, 3}}));
  // The pair's other fields, each its own: tokens, character offsets, segments, the mask.
  const auto pair = testing::json_lines(run.output).at(2);
  EXPECT_EQ(pair.at("tokens"), nlohmann::json({"[CLS]", "cat", "[SEP]", "sat", ".", "[SEP]"}));
  EXPECT_EQ(pair.at("offsets"), nlohmann::json::parse("[[0,0],[0,3],[0,0],[0,3],[3,4],[0,0]]"));
  EXPECT_EQ(pair.at("token_type_ids"), nlohmann::json({0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(pair.at("attention_mask"), nlohmann::json({1, 1, 1, 1, 1, 1}));

  const auto twice = tokenize("--vocab " + vocab + " --lowercase",
                              "cat\n{\"text\": \"cat\", \"sentence\": \"sat\"}\n");
  EXPECT_EQ(twice.first.code, 1);
  EXPECT_NE(twice.first.output.find("<stdin>:2: two fields give the first text; keep one"),
            std::string::npos)
      << twice.first.output;
  const auto unknown =
      tokenize("--vocab " + vocab + " --lowercase", "{\"text\": \"cat\", \"title\": \"x\"}\n");
  EXPECT_EQ(unknown.first.code, 1);
  EXPECT_NE(unknown.first.output.find("<stdin>:1: unknown field 'title'"), std::string::npos)
      << unknown.first.output;
  const auto pad = tokenize("--vocab " + vocab + " --lowercase --pad", "cat\n");
  EXPECT_EQ(pad.first.code, 2);
  EXPECT_NE(pad.first.output.find("tokenize: --pad needs --max-length"), std::string::npos)
      << pad.first.output;
  const auto padded = tokenize("--vocab " + vocab + " --lowercase --pad --max-length 6", "cat\n");
  EXPECT_EQ(padded.second, (Ids{{2, 6, 3, 0, 0, 0}}));
  const auto padded_line = testing::json_lines(padded.first.output).at(0);
  EXPECT_EQ(padded_line.at("attention_mask"), nlohmann::json({1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(padded_line.at("token_type_ids"), nlohmann::json({0, 0, 0, 0, 0, 0}));

  // new-model writes the vocabulary's casing (do_lower_case) beside it; tokenize --model uses it.
  ASSERT_EQ(bertft("new-model --vocab " + vocab + " --lowercase --out " + (d / "model").string() +
                   " --hidden 8 --layers 1 --heads 2 --intermediate 16 --max-positions 16")
                .code,
            0);
  const auto model = tokenize("--model " + (d / "model").string(), "The CAT sat.\n");
  ASSERT_EQ(model.first.code, 0) << model.first.output;
  EXPECT_EQ(model.second, (Ids{{2, 5, 6, 7, 8, 3}}));
}

TEST_F(CliTest, AnUnknownCommandSuggestsTheNearestAndExits2) {
  const auto run = bertft("trian recipe.yaml");
  EXPECT_EQ(run.code, 2);
  EXPECT_NE(run.output.find("error: unknown command 'trian' (did you mean 'train'?); commands: "
                            "quickstart, validate, recipe-keys, train,"),
            std::string::npos)
      << run.output;
  // Global options before the command are skipped when looking for it.
  const auto after_threads = bertft("--threads 1 sweeep x.yaml");
  EXPECT_EQ(after_threads.code, 2);
  EXPECT_NE(after_threads.output.find("unknown command 'sweeep' (did you mean 'sweep'?)"),
            std::string::npos)
      << after_threads.output;
}

TEST_F(CliTest, ABadOptionValueIsAUsageErrorNamingTheOptionAndValue) {
  const auto jobs = bertft("sweep x.yaml --jobs -1");
  EXPECT_EQ(jobs.code, 2);
  EXPECT_EQ(jobs.output,
            "--jobs: must be a number >= 0, got '-1'\nRun with --help for more information.\n");
  // A usage error (exit 2) whose output holds `message`; `env` in front of the command.
  const auto refused = [&](const std::string& args, const std::string& message,
                           const std::string& env = "") {
    const auto run = testing::run_bertft(args, dir_.path() / "cli.log", env);
    EXPECT_EQ(run.code, 2) << env << " " << args << "\n" << run.output;
    EXPECT_NE(run.output.find(message), std::string::npos) << run.output;
  };
  refused("train x.yaml --nproc 0", "--nproc: must be a number > 0, got '0'");
  refused("quickstart --jobs 0 --out " + (dir_.path() / "quick").string(),
          "--jobs: must be a number > 0, got '0'");
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "quick"));
  refused("train", "recipe is required");
  // A number is the whole value: "2x" is not 2, nor is "inf" a count of jobs.
  refused("train x.yaml --nproc 2x", "--nproc: must be a number > 0, got '2x'");
  refused("sweep x.yaml --jobs inf", "--jobs: must be a number >= 0, got 'inf'");
  EXPECT_EQ(bertft("--threads 0 recipe-keys").code, 0);  // 0 = every core
  // --shard, and the Slurm variables it defaults to, are read before the recipe (x.yaml is
  // absent): digits only, each part whole.
  for (const std::string shard : {"1x/2", "0/2/2", "1/", "/2", "1 /2", "0.5/2"})
    refused("sweep x.yaml --shard '" + shard + "'",
            "--shard '" + shard + "': expected i/N, e.g. 0/4");
  EXPECT_EQ(parse_shard("3/8"), std::make_pair(3, 8));
  EXPECT_EQ(parse_shard("0/1"), std::make_pair(0, 1));
  EXPECT_THROW(parse_shard("99999999999/2"), ConfigError);
  EXPECT_THROW(parse_shard("0/4294967296"), ConfigError);  // ten digits, past 2^30
  EXPECT_EQ(parse_shard("0/1073741824"), std::make_pair(0, 1 << 30));
  EXPECT_THROW(parse_shard("+1/2"), ConfigError);
  EXPECT_THROW(parse_shard("-1/2"), ConfigError);
  refused("sweep x.yaml",
          "environment variable SLURM_ARRAY_TASK_ID='3x' is not a count; give the shard as "
          "--shard i/N",
          "SLURM_ARRAY_TASK_ID=3x SLURM_ARRAY_TASK_COUNT=4");
  refused("sweep x.yaml", "SLURM_ARRAY_TASK_STEP='two' is not a count",
          "SLURM_ARRAY_TASK_ID=3 SLURM_ARRAY_TASK_COUNT=4 SLURM_ARRAY_TASK_STEP=two");
  // A task without a scorer (pre-training) is named with those that have one.
  testing::write_bytes(dir_.path() / "gold.tsv", "");
  testing::write_bytes(dir_.path() / "predicted.txt", "");
  refused("score --task pretraining --data " + (dir_.path() / "gold.tsv").string() +
              " --predictions " + (dir_.path() / "predicted.txt").string(),
          "score --task pretraining: the task has no scorer; tasks with one: "
          "sequence_classification, multiple_choice, question_answering, token_classification");
  // A pair's least count is a count: a negative one is refused, not read as 0.
  refused("vocab " + (dir_.path() / "gold.tsv").string() + " --out " +
              (dir_.path() / "vocab").string() + " --min-frequency -3",
          "--min-frequency: must be a number >= 0, got '-3'");
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "vocab"));
}

// `leaderboard` on a sweep with no finished trial writes the board and exits 1 with nothing
// exported; on a directory that holds no sweep plan it is a usage error naming the directory.
TEST_F(CliTest, ALeaderboardWithNothingFinishedExportsNothingAndExits1) {
  const auto sweep = dir_.path() / "sweep";
  std::filesystem::create_directories(sweep);
  testing::write_bytes(sweep / "plan.json",
                       R"({"recipe": "", "name": "s", "task": "sequence_classification", )"
                       R"("trials": [{"name": "lr1", "hyperparameters": [["lr", "1e-3"]]}]})");
  const auto pending = bertft("leaderboard " + sweep.string());
  EXPECT_EQ(pending.code, 1) << pending.output;
  EXPECT_NE(pending.output.find("0 of 1 trials done"), std::string::npos) << pending.output;
  EXPECT_TRUE(std::filesystem::exists(sweep / "leaderboard.md"));
  EXPECT_FALSE(std::filesystem::exists(sweep / "best_model"));
  const auto empty = dir_.path() / "empty";
  std::filesystem::create_directories(empty);
  const auto none = bertft("leaderboard " + empty.string());
  EXPECT_EQ(none.code, 2) << none.output;
  EXPECT_NE(none.output.find(empty.string() + ": no plan.json; not a sweep directory"),
            std::string::npos)
      << none.output;
}

// A vocabulary size below the special tokens and the corpus's alphabet gives a larger
// vocabulary (every character stays spellable) and says so.
TEST_F(CliTest, AVocabularyLargerThanAskedForIsAWarning) {
  testing::write_bytes(dir_.path() / "corpus.txt", "abc abd\nabc\n");
  // `vocab` on the corpus with --vocab-size `size` into dir_/`out`, `env` in front.
  const auto train = [&](int size, const std::string& out, const std::string& env = "") {
    return testing::run_bertft("vocab " + (dir_.path() / "corpus.txt").string() + " --vocab-size " +
                                   std::to_string(size) + " --out " + (dir_.path() / out).string(),
                               dir_.path() / (out + ".log"), env);
  };
  const auto small = train(3, "small");
  ASSERT_EQ(small.code, 0) << small.output;
  // [PAD] [UNK] [CLS] [SEP] [MASK], then the alphabet: a, ##b, ##c, ##d; no merge.
  EXPECT_NE(small.output.find("warning: [vocab] 9 entries, more than the 3 asked for: the "
                              "special tokens and the alphabet"),
            std::string::npos)
      << small.output;
  const std::string entries = bert::read_file(dir_.path() / "small" / "vocab.txt");
  EXPECT_EQ(std::count(entries.begin(), entries.end(), '\n'), 9);
  // Room for one merge (ab, seen three times): ten entries, as asked.
  const auto enough = train(10, "enough");
  ASSERT_EQ(enough.code, 0) << enough.output;
  EXPECT_EQ(enough.output.find("warning"), std::string::npos) << enough.output;
  // BERTFT_LOG_LEVEL=warn keeps the warning and drops the progress lines; =error drops both.
  const auto warn = train(3, "warn", "BERTFT_LOG_LEVEL=warn");
  ASSERT_EQ(warn.code, 0) << warn.output;
  EXPECT_NE(warn.output.find("warning: [vocab] 9 entries"), std::string::npos) << warn.output;
  EXPECT_EQ(warn.output.find("distinct words"), std::string::npos) << warn.output;
  const auto error = train(3, "error", "BERTFT_LOG_LEVEL=error");
  ASSERT_EQ(error.code, 0) << error.output;
  EXPECT_EQ(error.output, "");
}

// --device is checked before any model or data is read: a string that is no device, or CUDA
// where LibTorch sees no GPU (a CPU build) or not that many, names the option and the value.
TEST_F(CliTest, ADeviceThisProcessCannotUseIsAUsageErrorNamingTheOption) {
  testing::write_bytes(dir_.path() / "texts.txt", "a text\n");
  testing::write_bytes(dir_.path() / "index.npy", "not read");
  const auto model = dir_.path().string();  // an empty directory: never read
  const int64_t gpus = static_cast<int64_t>(torch::cuda::device_count());
  const std::string missing_gpu = gpus == 0 ? "cuda" : "cuda:" + std::to_string(gpus);
  const std::string lacks = gpus == 0 ? "--device: 'cuda', but LibTorch sees no CUDA GPU here"
                                      : "--device: '" + missing_gpu + "', but LibTorch sees " +
                                            std::to_string(gpus) + " CUDA GPU(s)";
  for (const std::string& command :
       {"predict --model " + model + " --text hello",
        "embed --model " + model + " --data " + (dir_.path() / "texts.txt").string() +
            " --out e.npy",
        "similar --index " + (dir_.path() / "index.npy").string() + " --query hello"}) {
    const auto gpu = bertft(command + " --device gpu");
    EXPECT_EQ(gpu.code, 2) << command << "\n" << gpu.output;
    EXPECT_NE(gpu.output.find("--device: unknown device 'gpu'; expected cpu, cuda or cuda:N"),
              std::string::npos)
        << command << "\n"
        << gpu.output;
    const auto mps = bertft(command + " --device mps");  // LibTorch's, but not bertft's
    EXPECT_NE(mps.output.find("--device: unknown device 'mps'"), std::string::npos) << mps.output;
    const auto cuda = bertft(command + " --device " + missing_gpu);
    EXPECT_EQ(cuda.code, 2) << command << "\n" << cuda.output;
    EXPECT_NE(cuda.output.find(lacks), std::string::npos) << command << "\n" << cuda.output;
  }
}

// On a GPU machine (BERTFT_TEST_DEVICE=cuda) the tests' inference commands run there, unless a
// test names its device or int8 (CPU only); other commands are left as they are.
TEST(OnTestDevice, InferenceCommandsTakeTheTestDevice) {
  const char* before = std::getenv("BERTFT_TEST_DEVICE");
  const std::string kept = before != nullptr ? before : "";
  ::setenv("BERTFT_TEST_DEVICE", "cuda:1", 1);
  EXPECT_EQ(testing::on_test_device("predict --model m --text -"),
            "predict --device cuda:1 --model m --text -");
  EXPECT_EQ(testing::on_test_device("embed --model m"), "embed --device cuda:1 --model m");
  EXPECT_EQ(testing::on_test_device("similar --index i"), "similar --device cuda:1 --index i");
  EXPECT_EQ(testing::on_test_device("--threads 1 -v predict --model m"),
            "--threads 1 -v predict --device cuda:1 --model m");
  for (const std::string unchanged :
       {"train r.yaml --set training.device=cpu", "predict --device cpu --model m",
        "predict --precision int8 --model m", "export run --out predict", "--threads 2 train r",
        "--verbose"})
    EXPECT_EQ(testing::on_test_device(unchanged), unchanged);
  ::unsetenv("BERTFT_TEST_DEVICE");
  EXPECT_EQ(testing::on_test_device("predict --model m"), "predict --model m");
  if (before != nullptr) ::setenv("BERTFT_TEST_DEVICE", kept.c_str(), 1);
}

TEST_F(CliTest, HelpShowsDefaultsAndTheExitCodes) {
  const auto run = bertft("train --help");
  EXPECT_EQ(run.code, 0);
  EXPECT_NE(run.output.find("--nproc INT:POSITIVE=1"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("Exit codes: 0 done; 1 runtime or data error; 2 usage or "
                            "configuration error; 130 / 143 stopped by SIGINT / SIGTERM"),
            std::string::npos)
      << run.output;
  const auto sweep = bertft("sweep --help");
  EXPECT_NE(sweep.output.find("--jobs INT:NONNEGATIVE=0"), std::string::npos) << sweep.output;
  EXPECT_EQ(bertft("--version").code, 0);
}

TEST_F(CliTest, RecipeKeysListsEveryKeyWithTypeDefaultAndMeaning) {
  const auto run = bertft("recipe-keys --task sequence_classification");
  EXPECT_EQ(run.code, 0);
  for (const auto* line :
       {"\ndata.<split>.limit                    int             = 0           Use only the first "
        "N examples (0 = all)\n",
        "\ntraining.learning_rate                float           = 2e-05       Peak learning "
        "rate\n",
        // An optional value (null by default) and a list.
        "\ntraining.num_cycles                   float or null   = null        Cosine waves "
        "(default 0.5 cosine, 1 with restarts)\n",
        "\ntask.labels                           list of string                "
        "(sequence_classification) Label names in id order (default: from the data)\n",
        // A type too long for its column: "choice" where it lists values, else "see help",
        // its words after the help unless the help lists the values itself (a | b).
        "\nmodel.dtype                           choice          = float32     dtype of the "
        "exported weights: float32 | float16 | bfloat16\n",
        "\ntask.type                             choice                        The task adapter "
        "[one of: sequence_classification, multiple_choice, question_answering, "
        "token_classification, pretraining]\n",
        "\nsweep.grid                            see help                      Values to try; "
        "a training key or a dotted recipe path (task.max_seq_length); at most 10000 trials "
        "(values multiplied, times the seeds) [mapping of key: [values]]\n"})
    EXPECT_NE(run.output.find(line), std::string::npos) << line << "\n" << run.output;
  EXPECT_EQ(run.output.find("(question_answering)"), std::string::npos);
  const auto bad = bertft("recipe-keys --task nosuch");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.output.find("error: --task: unknown task 'nosuch'"), std::string::npos)
      << bad.output;
}

TEST_F(CliTest, AMissingRecipeIsAConfigurationErrorNamingTheFile) {
  const auto path = dir_.path() / "nope.yaml";
  const auto run = bertft("validate " + path.string());
  EXPECT_EQ(run.code, 2);
  EXPECT_EQ(run.output, "error: " + path.string() + ": no such file\n");
}

}  // namespace
}  // namespace bert::recipes
