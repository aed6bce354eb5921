// Recipes: every problem of a broken recipe is reported at once with file:line:col and key;
// --set overrides; the shipped recipes validate; sweeps expand deterministically; the
// leaderboard's statistics.
#include "recipes/runner/recipe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "recipes/runner/run_dir.h"
#include "recipes/runner/sweep.h"
#include "recipes/runner/trial.h"
#include "tests/support/test_support.h"
#include "tests/support/tiny_model.h"

namespace bert::recipes {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class RecipeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::write_tiny_model(dir_.path() / "model");
    testing::write_bytes(dir_.path() / "train.tsv", "sentence\tlabel\na b\t1\nc d\t0\n");
    testing::write_bytes(dir_.path() / "dev.tsv", "sentence\tlabel\na c\t1\n");
  }
  fs::path write(const std::string& text) {
    const auto path = dir_.path() / "recipe.yaml";
    testing::write_bytes(path, text);
    return path;
  }
  std::string good() const {
    const auto d = dir_.path().string();
    return "model:\n  pretrained: " + d +
           "/model\n"
           "task:\n  type: sequence_classification\n  max_seq_length: 16\n"
           "data:\n  train: " +
           d + "/train.tsv\n  dev: {path: " + d +
           "/dev.tsv}\n"
           "training:\n  epochs: 1\n  batch_size: 2\n"
           "sweep:\n  grid:\n    learning_rate: [1.0e-3, 5.0e-4]\n    epochs: [1, 2]\n  seeds: [1, "
           "2]\n"
           "output:\n  dir: " +
           d + "/runs\n";
  }
  testing::TempDir dir_;
};

std::string problems_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

// The feature cache serves a split's features only for the same task options, labels,
// tokenizer files (special_tokens_map.json included) and data bytes: a change to any one of them
// featurizes again.
TEST_F(RecipeTest, TheFeatureCacheKeysOnOptionsLabelsTokenizerAndData) {
  const auto cache = dir_.path() / "cache";
  const auto files = [&] {
    size_t n = 0;
    for (const auto& entry : fs::directory_iterator(cache))
      n += entry.path().extension() == ".features";
    return n;
  };
  const auto prepare = [&](const std::vector<std::string>& set = {}) {
    return prepare_task(load_recipe(write(good()), set), cache);
  };
  testing::write_bytes(dir_.path() / "train.tsv", "sentence\tlabel\na b c d e f g\t1\nc d\t0\n");
  auto p = prepare();
  EXPECT_EQ(files(), 2u);  // train and dev
  EXPECT_EQ(p.train->features[0].input_ids[0].size(), 9u);
  EXPECT_EQ(p.dev->features[0].label, 1);
  prepare();
  EXPECT_EQ(files(), 2u);  // the same inputs: read from the cache
  // Task options: the first sentence cut to 6 tokens.
  p = prepare({"task.max_seq_length=8"});
  EXPECT_EQ(files(), 4u);
  EXPECT_EQ(p.train->features[0].input_ids[0].size(), 8u);
  const auto a = p.tokenizer->token_to_id("a"), b = p.tokenizer->token_to_id("b");
  // The data's bytes, under the same name.
  testing::write_bytes(dir_.path() / "train.tsv", "sentence\tlabel\nb a\t1\nc d\t0\n");
  p = prepare();
  EXPECT_EQ(files(), 5u);  // train again; dev as before
  EXPECT_EQ(p.train->features[0].input_ids[0], (std::vector<int64_t>{2, b, a, 3}));
  // The labels (from the training data): dev's "1" is label 0 of ["1", "5"].
  testing::write_bytes(dir_.path() / "train.tsv", "sentence\tlabel\nb a\t1\nc d\t5\n");
  p = prepare();
  EXPECT_EQ(files(), 7u);
  EXPECT_EQ(p.dev->features[0].label, 0);
  // The tokenizer's files: "a" and "b" trade ids.
  const auto vocab = dir_.path() / "model" / "vocab.txt";
  auto text = read_file(vocab);
  text.replace(text.find("\na\nb\n"), 5, "\nb\na\n");
  testing::write_bytes(vocab, text);
  p = prepare();
  EXPECT_EQ(files(), 9u);
  EXPECT_EQ(p.train->features[0].input_ids[0], (std::vector<int64_t>{2, a, b, 3}));
  // special_tokens_map.json, which says which added tokens are special.
  const auto map = dir_.path() / "model" / "special_tokens_map.json";
  ASSERT_TRUE(fs::exists(map));
  testing::write_bytes(map, read_file(map) + "\n");
  prepare();
  EXPECT_EQ(files(), 11u);
}

TEST_F(RecipeTest, AGoodRecipeExpandsItsGridTimesSeeds) {
  const auto recipe = load_recipe(write(good()));
  EXPECT_EQ(recipe.name, "recipe");
  EXPECT_EQ(recipe.task_type, "sequence_classification");
  const auto trials = expand_sweep(recipe);
  ASSERT_EQ(trials.size(), 8u);
  EXPECT_EQ(trials[0].name, "lr1.0e-3_ep1_seed1");
  EXPECT_EQ(trials[1].name, "lr1.0e-3_ep1_seed2");
  EXPECT_EQ(trials[2].name, "lr1.0e-3_ep2_seed1");
  EXPECT_EQ(trials[7].name, "lr5.0e-4_ep2_seed2");
  EXPECT_DOUBLE_EQ(trials[7].recipe.training.learning_rate, 5e-4);
  EXPECT_EQ(trials[7].recipe.training.epochs, 2);
  EXPECT_EQ(trials[7].recipe.training.seed, 2);
  EXPECT_FALSE(trials[7].recipe.root["sweep"]);
  // The trial's recipe re-reads to the same values (what `bertft train` gets).
  const auto again = parse_recipe(YAML::Load(dump_recipe(trials[7].recipe.root)), "trial.yaml");
  EXPECT_DOUBLE_EQ(again.training.learning_rate, 5e-4);
  EXPECT_EQ(again.training.seed, 2);
}

TEST_F(RecipeTest, SetOverridesAnyKeyAndIsNamedInErrors) {
  const auto path = write(good());
  const auto recipe = load_recipe(
      path, {"training.learning_rate=3e-5", "task.max_seq_length=32", "sweep.seeds=[7]"});
  EXPECT_DOUBLE_EQ(recipe.training.learning_rate, 3e-5);
  EXPECT_EQ(recipe.task["max_seq_length"].as<int>(), 32);
  EXPECT_EQ(expand_sweep(recipe).size(), 4u);
  // A single value where a list is expected is a list of one; a mapping is refused.
  EXPECT_EQ(load_recipe(path, {"sweep.seeds=9"}).sweep.seeds, std::vector<int64_t>{9});
  const auto listless = problems_of([&] { load_recipe(path, {"sweep.seeds={a: 1}"}); });
  EXPECT_NE(listless.find("sweep.seeds: expected a list (from --set sweep.seeds={a: 1})"),
            std::string::npos)
      << listless;
  const auto e = problems_of([&] { load_recipe(path, {"training.batch_size=0"}); });
  EXPECT_NE(e.find("training.batch_size: must be > 0, got 0 (from --set training.batch_size=0)"),
            std::string::npos)
      << e;
  const auto e2 = problems_of([&] { load_recipe(path, {"training.learning_rat=1"}); });
  EXPECT_NE(e2.find("did you mean 'learning_rate'"), std::string::npos) << e2;
  EXPECT_NE(e2.find("(from --set training.learning_rat=1)"), std::string::npos) << e2;
  const auto e3 = problems_of([&] { load_recipe(path, {"=3"}); });
  EXPECT_NE(e3.find("--set '=3': expected key=value"), std::string::npos) << e3;
  EXPECT_NE(problems_of([&] { load_recipe(path, {"novalue"}); }).find("expected key=value"),
            std::string::npos);
}

// Each broken line of one recipe is reported, all together, with its line, column and key.
TEST_F(RecipeTest, BrokenRecipeNamesEveryLineAndKey) {
  const auto d = dir_.path().string();
  const auto path = write(
      "model:\n"  // 1
      "  pretrained: " +
      d +
      "/model\n"                          // 2
      "task:\n"                           // 3
      "  type: sequence_clasification\n"  // 4
      "data:\n"                           // 5
      "  train: {path: " +
      d +
      "/missing.tsv}\n"  // 6
      "  dev: {path: " +
      d +
      "/dev.tsv, fromat: glue}\n"            // 7
      "training:\n"                          // 8
      "  epochs: three\n"                    // 9
      "  learning_rat: 1.0e-3\n"             // 10
      "  warmup_ratio: 1.5\n"                // 11
      "  precision: fp8\n"                   // 12
      "sweep:\n"                             // 13
      "  grid:\n"                            // 14
      "    learning_rate: [5.0e-5, fast]\n"  // 15
      "    lr: [1, 2]\n"                     // 16
      "trainig: {}\n");                      // 17
  const auto e = problems_of([&] { load_recipe(path); });
  const auto f = path.string();
  const auto dev_line = "  dev: {path: " + d + "/dev.tsv, fromat: glue}";
  const auto fromat_column = std::to_string(dev_line.find("fromat") + 1);
  for (const auto& expected : {
           f + ":4:3: task.type: unknown task 'sequence_clasification' (did you mean "
               "'sequence_classification'?)",
           f + ":6:11: data.train.path: no such file: " + d + "/missing.tsv",
           f + ":7:" + fromat_column + ": data.dev: unknown key 'fromat' (did you mean 'format'?)",
           f + ":9:3: training.epochs: expected an integer, got 'three'",
           f + ":10:3: training: unknown key 'learning_rat' (did you mean 'learning_rate'?)",
           f + ":11:3: training.warmup_ratio: must be in [0, 1]",
           f + ":12:3: training.precision: unknown value 'fp8'; expected one of: fp32, bf16, fp16",
           f + ":15:29: sweep.grid.learning_rate: expected a number, got 'fast'",
           f + ":16:5: sweep.grid.lr: 'lr' is not a training key",
           f + ":17:1: unknown key 'trainig' (did you mean 'training'?)",
       })
    EXPECT_NE(e.find(expected), std::string::npos) << "missing: " << expected << "\nin:\n" << e;
  // The grid's values are checked on their own: the base warmup_ratio is not reported twice.
  EXPECT_EQ(e.find("sweep.grid.warmup_ratio"), std::string::npos) << e;
}

// The sweep section's own checks: at least one job and one process per trial, seeds in
// sweep.seeds rather than the grid, data.test for predict_test.
TEST_F(RecipeTest, TheSweepSectionsOwnKeysAreChecked) {
  auto text = good();
  text.replace(text.find("sweep:\n"), 7,
               "sweep:\n  jobs: 0\n  nproc_per_trial: 0\n  predict_test: true\n");
  text.replace(text.find("    epochs: [1, 2]\n"), 19, "    seed: [1, 2]\n");
  const auto e = problems_of([&] { load_recipe(write(text)); });
  const auto f = (dir_.path() / "recipe.yaml").string();
  for (const auto& expected : {
           f + ":13:3: sweep.jobs: must be >= 1",
           f + ":14:3: sweep.nproc_per_trial: must be >= 1",
           f + ":15:3: sweep.predict_test: needs data.test (the split to predict)",
           f + ":18:5: sweep.grid.seed: seeds go in sweep.seeds, not the grid",
       })
    EXPECT_NE(e.find(expected), std::string::npos) << "missing: " << expected << "\nin:\n" << e;
}

TEST_F(RecipeTest, SyntaxErrorsAndUnsetVariablesAreLocated) {
  const auto e = problems_of([&] { load_recipe(write("model:\n  pretrained: [unclosed\n")); });
  EXPECT_NE(e.find("recipe.yaml:3:1"), std::string::npos) << e;
  ::unsetenv("BERTFT_TEST_UNSET");
  auto text = good();
  text.replace(text.find("pretrained: ") + 12, 0, "${BERTFT_TEST_UNSET}");
  const auto e2 = problems_of([&] { load_recipe(write(text)); });
  EXPECT_NE(
      e2.find(
          "recipe.yaml:2:3: model.pretrained: environment variable BERTFT_TEST_UNSET is not set"),
      std::string::npos)
      << e2;
  ::setenv("BERTFT_TEST_SET", dir_.path().c_str(), 1);
  auto text3 = good();
  text3.replace(text3.find("pretrained: ") + 12, dir_.path().string().size(), "${BERTFT_TEST_SET}");
  EXPECT_EQ(load_recipe(write(text3)).model.pretrained, dir_.path() / "model");
}

// ${VAR:-default} as the shell reads it: the default where VAR is unset or empty, the text
// around kept; ${VAR} alone needs VAR.
TEST(RecipeVariables, DefaultsAsTheShellGivesThem) {
  ::unsetenv("BERTFT_TEST_VAR");
  EXPECT_EQ(expand_env("data/${BERTFT_TEST_VAR:-glue}/train.tsv", "k"), "data/glue/train.tsv");
  EXPECT_EQ(expand_env("${BERTFT_TEST_VAR:-}x", "k"), "x");
  ::setenv("BERTFT_TEST_VAR", "", 1);
  EXPECT_EQ(expand_env("${BERTFT_TEST_VAR:-glue}", "k"), "glue");
  EXPECT_THROW(expand_env("${BERTFT_TEST_VAR}", "k"), ConfigError);
  ::setenv("BERTFT_TEST_VAR", "sst", 1);
  EXPECT_EQ(expand_env("${BERTFT_TEST_VAR:-glue}/${BERTFT_TEST_VAR}", "k"), "sst/sst");
  ::unsetenv("BERTFT_TEST_VAR");
}

// A key given twice in one mapping is an error naming both lines: YAML would keep one value and
// drop the other without a word (often the one meant). The same key
// in other mappings, and aliases (not expanded to look), are fine.
TEST_F(RecipeTest, AKeyGivenTwiceInAMappingNamesBothLines) {
  const auto with = [&](const std::string& before, const std::string& lines) {
    auto text = good();
    text.replace(text.find(before), 0, lines);
    return problems_of([&] { load_recipe(write(text)); });
  };
  const auto e = with("sweep:", "training:\n  epochs: 3\n");
  EXPECT_NE(e.find("recipe.yaml:12:1: duplicate key 'training' (also at line 9)"), e.npos) << e;
  const auto e2 = with("  batch_size: 2\n", "  epochs: 3\n");
  EXPECT_NE(e2.find("recipe.yaml:11:3: duplicate key 'epochs' (also at line 10)"), e2.npos) << e2;
  auto aliases = good();
  aliases.replace(aliases.find("    epochs: [1, 2]\n"), 19, "    epochs: &s [1, 2]\n");
  aliases.replace(aliases.find("  seeds: [1, 2]\n"), 16, "  seeds: *s\n");
  EXPECT_EQ(problems_of([&] { load_recipe(write(aliases)); }), "(no error)");
  EXPECT_THROW(YamlReader::load_string("a: 1\nb: {a: 2, a: 3}\n", "--set"), ConfigError);
  EXPECT_NO_THROW(YamlReader::load_string("a: &x {k: 1}\nb: *x\nc: [*x, *x]\n", "--set"));
}

// data.extra_dev is a mapping of name -> split, each split as data.<split> is read.
TEST_F(RecipeTest, ExtraDevIsAMappingOfNamedSplits) {
  const auto with = [&](const std::string& extra) {
    auto text = good();
    text.replace(text.find("training:"), 0, "  extra_dev:" + extra);
    return problems_of([&] { load_recipe(write(text), {}, /*check_files=*/false); });
  };
  const auto scalar = with(" dev.tsv\n");
  EXPECT_NE(scalar.find("recipe.yaml:9:14: data.extra_dev: expected a mapping of name: split "
                        "(e.g. mm: {path: dev_mismatched.tsv})"),
            std::string::npos)
      << scalar;
  const auto no_path = with("\n    mm: {limit: 3}\n");
  EXPECT_NE(no_path.find("data.extra_dev.mm: `path` is missing"), std::string::npos) << no_path;
  const auto unknown = with("\n    mm: {path: a.tsv, colums: {}}\n");
  EXPECT_NE(unknown.find("data.extra_dev.mm: unknown key 'colums' (did you mean 'columns'?)"),
            std::string::npos)
      << unknown;
  EXPECT_EQ(with("\n    mm: a.tsv\n    hans_2: {path: b.tsv, limit: 3}\n"), "(no error)");
  const auto reserved = with("\n    test: a.tsv\n");
  EXPECT_NE(reserved.find("data.extra_dev.test: `eval --split test` means data.test; give this "
                          "set another name"),
            std::string::npos)
      << reserved;
}

// A run keeps its recipe with the variables' values: exporting it later needs no environment.
TEST_F(RecipeTest, KeptRecipeHoldsExpandedPaths) {
  auto text = good();
  text.replace(text.find("pretrained: ") + 12, dir_.path().string().size(), "${BERTFT_TEST_KEEP}");
  text.replace(text.find("training:"), 0,
               "  extra_dev:\n    mm: {path: \"${BERTFT_TEST_KEEP}/mm.tsv\"}\n"
               "    short: ${BERTFT_TEST_KEEP}/short.tsv\n"
               "  extra_test:\n    mm: ${BERTFT_TEST_KEEP}/test_mm.tsv\n");
  ::setenv("BERTFT_TEST_KEEP", dir_.path().c_str(), 1);
  const auto recipe = load_recipe(write(text), {}, /*check_files=*/false);
  ASSERT_TRUE(keep_resolved_recipe(dir_.path() / "run", recipe));
  ::unsetenv("BERTFT_TEST_KEEP");
  const auto kept = load_recipe(dir_.path() / "run" / "recipe.yaml", {}, /*check_files=*/false);
  EXPECT_EQ(kept.model.pretrained, dir_.path() / "model");
  EXPECT_EQ(kept.data.train.path, recipe.data.train.path);
  ASSERT_EQ(kept.data.extra_dev.size(), 2u);  // in the recipe's order, each by its name
  EXPECT_EQ(kept.data.extra_dev[0].first, "mm");
  EXPECT_EQ(kept.data.extra_dev[0].second.path, dir_.path() / "mm.tsv");
  EXPECT_EQ(kept.data.extra_dev[1].first, "short");
  EXPECT_EQ(kept.data.extra_dev[1].second.path, dir_.path() / "short.tsv");
  ASSERT_EQ(kept.data.extra_test.size(), 1u);
  EXPECT_EQ(kept.data.extra_test[0].second.path, dir_.path() / "test_mm.tsv");
  EXPECT_TRUE(keep_resolved_recipe(dir_.path() / "run", recipe));  // the same recipe again
  // Another value (the same model, reached by another path) is another recipe.
  ::setenv("BERTFT_TEST_KEEP", (dir_.path() / ".").c_str(), 1);
  EXPECT_FALSE(keep_resolved_recipe(dir_.path() / "run", load_recipe(write(text), {}, false)));
  ::unsetenv("BERTFT_TEST_KEEP");
}

// A run never goes into a directory of other files (HF's Trainer refuses such an output_dir
// too): the model's own, say, would get checkpoints and results beside its weights. What a
// stopped sweep leaves in a trial directory (lock, result, log) is no obstacle.
TEST_F(RecipeTest, ARunNeverGoesIntoADirectoryOfOtherFiles) {
  const auto recipe = load_recipe(write(good()), {}, /*check_files=*/false);
  const auto model = dir_.path() / "model";
  const auto e = problems_of([&] { keep_resolved_recipe(model, recipe); });
  EXPECT_NE(e.find(model.string() + ": holds files that are not a bertft run (config.json, "
                                    "model.safetensors, "),
            std::string::npos)
      << e;
  EXPECT_FALSE(fs::exists(model / "recipe.yaml"));
  const auto file = problems_of([&] { keep_resolved_recipe(dir_.path() / "train.tsv", recipe); });
  EXPECT_NE(file.find("train.tsv: is a file"), std::string::npos) << file;
  const TrialDir left(dir_.path() / "left");
  fs::create_directories(left.root());
  testing::write_bytes(left.lock(), "");
  testing::write_bytes(left.log(), "the failure\n");
  testing::write_bytes(left.root() / "recipe.yaml.tmp-Ab12Cd", "");  // another rank's, midway
  EXPECT_TRUE(keep_resolved_recipe(left.root(), recipe));
  EXPECT_TRUE(keep_resolved_recipe(dir_.path() / "new" / "run", recipe));
}

// output.dir or --cache naming a file: the recipe key or the option, not a filesystem error
// from deep inside the sweep.
TEST_F(RecipeTest, AnOutputThatIsAFileIsNamedByItsKeyOrOption) {
  auto text = good();
  const auto runs = dir_.path().string() + "/runs\n";
  text.replace(text.find(runs), runs.size(), dir_.path().string() + "/train.tsv\n");
  const auto e = problems_of([&] { load_recipe(write(text)); });
  EXPECT_NE(e.find("recipe.yaml:18:3: output.dir: " + dir_.path().string() +
                   "/train.tsv is a file; runs are written to a directory there"),
            std::string::npos)
      << e;
  EXPECT_EQ(problems_of([&] { load_recipe(write(text), {}, /*check_files=*/false); }),
            "(no error)");
  const auto cache = testing::run_bertft(
      "train " + write(good()).string() + " --cache " + (dir_.path() / "dev.tsv").string(),
      dir_.path() / "cache.log");
  EXPECT_EQ(cache.code, 2) << cache.output;
  EXPECT_NE(cache.output.find("dev.tsv: is a file; the feature cache is a directory"),
            std::string::npos)
      << cache.output;
}

// Another recipe replaces the kept one only where the run never trained: a failed result of 0
// steps, and nothing in the directory but its recipe, result, lock and log.
TEST_F(RecipeTest, KeptRecipeIsReplacedOnlyWhereTheRunNeverTrained) {
  const TrialDir run(dir_.path() / "run");
  auto text = good();
  const auto first = load_recipe(write(text), {}, /*check_files=*/false);
  ASSERT_TRUE(keep_resolved_recipe(run.root(), first));
  text.replace(text.find("epochs: 1\n"), 9, "epochs: 5");
  const auto second = load_recipe(write(text), {}, /*check_files=*/false);
  EXPECT_FALSE(keep_resolved_recipe(run.root(), second));  // not run yet: no result
  TrialResult failed;
  failed.error = "task.max_seq_length 384 exceeds the model's longest input";
  failed.steps = 3;
  failed.write(run);
  EXPECT_FALSE(keep_resolved_recipe(run.root(), second));  // it trained before failing
  failed.steps = 0;
  failed.write(run);
  testing::write_bytes(run.log(), "the failure\n");
  testing::write_bytes(run.root() / "metrics.jsonl", "{}\n");
  EXPECT_FALSE(keep_resolved_recipe(run.root(), second));  // something else is there
  fs::remove(run.root() / "metrics.jsonl");
  bool written = false;
  EXPECT_TRUE(keep_resolved_recipe(run.root(), second, &written));
  EXPECT_TRUE(written);
  EXPECT_EQ(load_recipe(run.recipe(), {}, false).training.epochs, 5);
  EXPECT_TRUE(keep_resolved_recipe(run.root(), second, &written));  // now the same
  EXPECT_FALSE(written);
  TrialResult done;
  done.status = TrialStatus::kDone;
  done.write(run);
  EXPECT_FALSE(keep_resolved_recipe(run.root(), first));
}

// Every key `bertft recipe-keys` lists is one the parser reads, and its listed default is a
// value it accepts; every task's options are listed under its name.
TEST_F(RecipeTest, RecipeKeysListsKeysTheParserAcceptsWithTheirDefaults) {
  const auto path = write(good());
  size_t checked = 0;
  for (const auto& doc : recipe_key_docs("sequence_classification")) {
    if (doc.default_value.empty() || doc.key == "task.type") continue;
    auto key = doc.key;
    if (const auto at = key.find("<split>"); at != std::string::npos) key.replace(at, 7, "dev");
    EXPECT_EQ(problems_of([&] { load_recipe(path, {key + "=" + doc.default_value}); }),
              "(no error)")
        << key;
    ++checked;
  }
  EXPECT_GT(checked, 30u);
  const auto all = recipe_key_docs();
  for (const auto* expected :
       {"(question_answering) SQuAD v2.0", "(token_classification) Tag names", "(pretraining)"}) {
    EXPECT_TRUE(std::any_of(all.begin(), all.end(), [&](const KeyDoc& d) {
      return d.help.rfind(expected, 0) == 0;
    })) << expected;
  }
  const auto limit = std::find_if(all.begin(), all.end(),
                                  [](const KeyDoc& d) { return d.key == "data.<split>.limit"; });
  ASSERT_NE(limit, all.end());
  EXPECT_EQ(limit->type, "int");
  EXPECT_EQ(limit->default_value, "0");
  EXPECT_EQ(limit->help, "Use only the first N examples (0 = all)");
}

// The recipes shipped in recipes/ validate (model from BERTFT_MODEL; data files not needed)
// and use the paper's settings (the BERT paper's twelve tasks, and GoEmotions' multi-label).
TEST_F(RecipeTest, ShippedRecipesValidate) {
  ::setenv("BERTFT_MODEL", (dir_.path() / "model").c_str(), 1);
  const fs::path root = fs::path(BERTFT_SOURCE_DIR) / "recipes";
  std::map<std::string, size_t> trials;
  std::map<std::string, std::vector<std::string>> extra_dev;
  // Walked with directory_iterator: a pip LibTorch exports its own recursive_directory_iterator
  // (bert::remove_tree's comment), and this test also runs against one on a GPU machine.
  const std::function<void(const fs::path&)> walk = [&](const fs::path& dir) {
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.is_directory()) {
        walk(entry.path());
      } else if (entry.path().extension() == ".yaml") {
        const auto recipe = load_recipe(entry.path(), {}, /*check_files=*/false);
        const auto name = fs::relative(entry.path(), root).string();
        trials[name] = expand_sweep(recipe, false).size();
        for (const auto& [set, spec] : recipe.data.extra_dev)
          extra_dev[name].push_back(set + ": " + spec.path.filename().string());
      }
    }
  };
  walk(root);
  ::unsetenv("BERTFT_MODEL");
  EXPECT_EQ(trials.size(), 13u);
  EXPECT_EQ(trials.at("glue/mrpc.yaml"), 18u * 3);  // lr 3 x epochs 3 x batch 2, 3 seeds
  EXPECT_EQ(trials.at("glue/mnli.yaml"), 18u);
  // MNLI's mismatched dev scored beside the matched one, as HF's run_glue does.
  EXPECT_EQ(extra_dev, (std::map<std::string, std::vector<std::string>>{
                           {"glue/mnli.yaml", {"mm: dev_mismatched.tsv"}}}));
  EXPECT_EQ(trials.at("squad/v1.yaml"), 1u);
  EXPECT_EQ(trials.at("ner/conll03.yaml"), 18u);
  EXPECT_EQ(trials.at("multilabel/goemotions.yaml"), 18u);
}

TEST(Leaderboard, MeanAndSampleStdOverSeedsBestSettingAndFailures) {
  testing::TempDir dir;
  json plan = {{"name", "t"}, {"trials", json::array()}};
  const auto add = [&](const std::string& name, const std::string& lr, const std::string& seed,
                       const json& result) {
    const json hyperparameters =
        json::array({json::array({"learning_rate", lr}), json::array({"seed", seed})});
    plan["trials"].push_back({{"name", name}, {"hyperparameters", hyperparameters}});
    fs::create_directories(dir.path() / "trials" / name);
    if (!result.is_null())
      write_file_atomic(dir.path() / "trials" / name / "result.json", result.dump());
  };
  const auto done = [](double f1, double acc) {
    return json{{"status", "done"},
                {"main_metric", "f1"},
                {"main", f1},
                {"metrics", {{"f1", f1}, {"accuracy", acc}}},
                {"losses", {0.7, 0.5, 0.3}}};
  };
  add("a1", "1e-3", "1", done(0.80, 0.7));
  add("a2", "1e-3", "2", done(0.90, 0.8));
  add("b1", "5e-4", "1", done(0.86, 0.7));
  add("b2", "5e-4", "2", json{{"status", "failed"}, {"error", "boom"}});
  add("b3", "5e-4", "3", nullptr);
  write_file_atomic(dir.path() / "plan.json", plan.dump());
  const auto board = write_leaderboard(dir.path());
  EXPECT_FALSE(board["complete"]);
  EXPECT_EQ(board["done"], 3);
  ASSERT_EQ(board["settings"].size(), 2u);
  const auto& first = board["settings"][0];
  EXPECT_NEAR(first["mean"].get<double>(), 0.86, 1e-12);  // b: 0.86 alone beats a: mean 0.85
  EXPECT_EQ(first["std"].get<double>(), 0.0);
  EXPECT_EQ(first["failed"], 1);
  const auto& second = board["settings"][1];
  EXPECT_NEAR(second["mean"].get<double>(), 0.85, 1e-12);
  EXPECT_NEAR(second["std"].get<double>(), std::sqrt(0.005), 1e-12);  // sample std of 0.80, 0.90
  EXPECT_NEAR(second["metrics_mean"]["accuracy"].get<double>(), 0.75, 1e-12);
  EXPECT_EQ(board["best"]["trial"], "b1");
  const auto md = read_file(dir.path() / "leaderboard.md");
  EXPECT_NE(md.find("| 2 | 1e-3 | 2/2 | 0.8500 ± 0.0707 | 0.7500 | 0 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| b2 | failed | - | boom |"), std::string::npos) << md;
  const auto csv = read_file(dir.path() / "leaderboard.csv");
  EXPECT_NE(csv.find("trial,learning_rate,seed,status,f1,accuracy,setting_mean,setting_std\n"),
            std::string::npos)
      << csv;
  EXPECT_NE(csv.find("b3,5e-4,3,pending,,,0.86,0\n"), std::string::npos) << csv;
  const auto svg = read_file(dir.path() / "leaderboard.svg");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
}

// A sweep value may hold what separates cells: a flow list's commas (CSV), a '|' (Markdown), a
// '<' or '&' (the SVG's XML). Each stays one cell.
TEST(Leaderboard, ValuesWithSeparatorsStayInTheirCells) {
  testing::TempDir dir;
  const std::vector<std::string> values = {"[neg, pos]", "a|b <c> & \"d\""};
  json plan = {{"name", "t"}, {"trials", json::array()}};
  for (size_t i = 0; i < values.size(); ++i) {
    const auto name = "t" + std::to_string(i);
    plan["trials"].push_back(
        {{"name", name},
         {"hyperparameters",
          json::array({json::array({"task.labels", values[i]}), json::array({"seed", "1"})})}});
    fs::create_directories(dir.path() / "trials" / name);
    write_file_atomic(dir.path() / "trials" / name / "result.json",
                      json{{"status", "done"},
                           {"main_metric", "f1"},
                           {"main", 0.5 + 0.1 * static_cast<double>(i)},
                           {"metrics", {{"f1", 0.5 + 0.1 * static_cast<double>(i)}}},
                           {"losses", {0.7, 0.5}}}
                          .dump());
  }
  write_file_atomic(dir.path() / "plan.json", plan.dump());
  write_leaderboard(dir.path());
  const auto csv = read_file(dir.path() / "leaderboard.csv");
  EXPECT_NE(csv.find("\nt0,\"[neg, pos]\",1,done,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\nt1,\"a|b <c> & \"\"d\"\"\",1,done,"), std::string::npos) << csv;
  const auto md = read_file(dir.path() / "leaderboard.md");
  EXPECT_NE(md.find("| 1 | a\\|b <c> & \"d\" | 1/1 |"), std::string::npos) << md;
  const auto svg = read_file(dir.path() / "leaderboard.svg");
  EXPECT_NE(svg.find(">a|b &lt;c&gt; &amp; \"d\"</text>"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("<c>"), std::string::npos) << svg;
}

}  // namespace
}  // namespace bert::recipes
