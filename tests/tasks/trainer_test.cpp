// The generic Trainer learns a small generated task, is reproducible for a seed, keeps the
// best weights and logs JSONL.
#include "tasks/training/trainer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "bert/checkpoint/load.h"
#include "bert/checkpoint/safetensors.h"
#include "bert/common/file_util.h"
#include "bert/model/linear.h"
#include "bert/model/onednn_linear.h"
#include "bert/tokenizer/wordpiece.h"
#include "tasks/registry.h"
#include "tasks/training/optimizer.h"
#include "tests/support/test_support.h"

namespace bert::tasks {
namespace {

const std::vector<std::string> kPositive = {"good", "great", "fine", "nice"};
const std::vector<std::string> kNegative = {"bad", "awful", "poor", "sad"};
const std::vector<std::string> kFiller = {"the", "movie", "was", "a", "plot", "and", "it", "story"};

/// "sentence\tlabel" rows: filler words around one sentiment word that decides the label.
std::string generated_tsv(int rows, unsigned seed) {
  std::mt19937 rng(seed);
  std::string out = "sentence\tlabel\n";
  for (int r = 0; r < rows; ++r) {
    const bool positive = rng() % 2;
    std::vector<std::string> words;
    const int n = 3 + static_cast<int>(rng() % 6);
    for (int i = 0; i < n; ++i) words.push_back(kFiller[rng() % kFiller.size()]);
    const auto& pool = positive ? kPositive : kNegative;
    words.insert(words.begin() + static_cast<long>(rng() % (words.size() + 1)),
                 pool[rng() % pool.size()]);
    std::string sentence;
    for (const auto& w : words) sentence += (sentence.empty() ? "" : " ") + w;
    out += sentence + "\t" + (positive ? "pos" : "neg") + "\n";
  }
  return out;
}

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    for (const auto* list : {&kPositive, &kNegative, &kFiller})
      vocab.insert(vocab.end(), list->begin(), list->end());
    tok::WordPieceOptions options;
    options.check_casing = tok::CasingCheck::kOff;
    tokenizer_ = std::make_unique<tok::WordPieceTokenizer>(vocab, options);
    testing::write_bytes(dir_.path() / "train.tsv", generated_tsv(256, 1));
    testing::write_bytes(dir_.path() / "dev.tsv", generated_tsv(64, 2));
    config_ = testing::tiny_config();
    config_.vocab_size(static_cast<int64_t>(vocab.size())).initializer_range(0.02);
  }

  struct Run {
    TrainResult result;
    TaskModel model;
    Precision precision = Precision::kAuto;  ///< what it trained in
  };
  Run train(TrainerOptions options,
            const std::filesystem::path& out = {},
            std::function<bool(int64_t)> interrupt = {}) {
    adapter_ = TaskRegistry::global().create("sequence_classification",
                                             YamlReader(YAML::Load("{max_seq_length: 16}"), "t"));
    data::DataSpec spec;
    spec.path = dir_.path() / "train.tsv";
    const auto train_examples = adapter_->read(spec);
    spec.path = dir_.path() / "dev.tsv";
    const auto dev_examples = adapter_->read(spec);
    adapter_->fit_labels(*train_examples);
    train_ = adapter_->featurize(train_examples, *tokenizer_, true);
    dev_ = adapter_->featurize(dev_examples, *tokenizer_, false);
    torch::manual_seed(static_cast<uint64_t>(options.seed));
    auto model = adapter_->build_model(config_);
    Trainer trainer(options);
    trainer.set_interrupt_hook(std::move(interrupt));
    auto result = trainer.fit(*adapter_, model, *train_, dev_.get(), out);
    return {std::move(result), model, trainer.precision()};
  }
  // A tiny BERT from scratch sits on a plateau for a few dozen steps before it finds the
  // sentiment word; 10 epochs of 16 steps get well past it.
  static TrainerOptions fast() {
    TrainerOptions o;
    o.epochs = 10;
    o.batch_size = 16;
    o.learning_rate = 1e-3;
    o.log_every = 8;
    o.device = testing::test_device();
    return o;
  }

  testing::TempDir dir_;
  std::unique_ptr<tok::Tokenizer> tokenizer_;
  BertConfig config_;
  std::unique_ptr<TaskAdapter> adapter_;
  std::shared_ptr<FeatureSet> train_, dev_;
};

TEST_F(TrainerTest, LearnsAndKeepsTheBestWeightsWithAJsonlLog) {
  const auto out = dir_.path() / "run";
  auto run = train(fast(), out);
  EXPECT_GE(run.result.best.metrics.at("accuracy"), 0.9);
  EXPECT_EQ(run.result.steps, 10 * 16);
  ASSERT_GE(run.result.losses.size(), 2u);
  EXPECT_LT(run.result.losses.back(), run.result.losses.front());
  // The model ends with the best weights, which are also on disk.
  Trainer trainer(fast());
  EXPECT_DOUBLE_EQ(trainer.evaluate(*adapter_, run.model, *dev_).main(), run.result.best.main());
  // Single-process training releases the gradients after each step (none held between steps).
  for (const auto& p : run.model->parameters()) EXPECT_FALSE(p.grad().defined());
  const auto saved = SafetensorsReader(out / "best" / "model.safetensors").read_all();
  for (const auto& [name, tensor] : state_dict(*run.model))
    EXPECT_TRUE(torch::equal(saved.at(name), tensor.cpu())) << name;
  std::ifstream log(out / "metrics.jsonl");
  int train_lines = 0, dev_lines = 0;
  for (std::string line; std::getline(log, line);) {
    const auto j = nlohmann::json::parse(line);
    (j["split"] == "dev" ? dev_lines : train_lines)++;
  }
  EXPECT_EQ(dev_lines, 10);  // one per epoch
  EXPECT_EQ(train_lines, 20);
}

TEST_F(TrainerTest, SameSeedSameWeightsBitForBit) {
  auto options = fast();
  options.epochs = 1;
  const auto a = train(options), b = train(options);
  for (const auto& [name, tensor] : state_dict(*a.model))
    EXPECT_TRUE(torch::equal(tensor, state_dict(*b.model).at(name))) << name;
  options.seed = 7;
  const auto c = train(options);
  EXPECT_FALSE(torch::equal(state_dict(*a.model).at("classifier.weight"),
                            state_dict(*c.model).at("classifier.weight")));
}

// training.activation_checkpointing recomputes each layer in backward, dropout masks included:
// an epoch ends with the weights of the plain run (to rounding: the recomputed graph may sum
// gradients in another order).
TEST_F(TrainerTest, ActivationCheckpointingTrainsTheSameWeights) {
  auto options = fast();
  options.epochs = 1;
  options.precision = Precision::kFp32;
  const auto plain = train(options);
  options.activation_checkpointing = true;
  const auto recomputed = train(options);
  for (const auto& [name, tensor] : state_dict(*plain.model))
    EXPECT_LE(testing::max_abs_diff(tensor, state_dict(*recomputed.model).at(name)), 1e-5) << name;
  EXPECT_NEAR(plain.result.losses.back(), recomputed.result.losses.back(), 1e-5);
}

TEST_F(TrainerTest, Bf16AccumulationAndEarlyStopping) {
  auto options = fast();
  options.precision = Precision::kBf16;
  options.gradient_accumulation_steps = 2;
  options.batch_size = 16;  // one step's batch: two micro-batches of 8
  const auto run = train(options);
  EXPECT_EQ(run.result.steps, 10 * 16);
  EXPECT_GE(run.result.best.metrics.at("accuracy"), 0.9);
  options.precision = Precision::kFp32;
  options.learning_rate = 1e-9;  // nothing improves after the first evaluation
  options.eval_every = 4;
  options.early_stopping_patience = 2;
  const auto stopped = train(options);
  EXPECT_TRUE(stopped.result.stopped_early);
  EXPECT_EQ(stopped.result.steps, 12);
}

// eval_every N evaluates every N steps and at the end; eval_each_epoch adds each epoch's end.
TEST_F(TrainerTest, EvaluationCadence) {
  auto options = fast();
  options.epochs = 2;
  options.eval_every = 5;
  const auto count_dev = [&](const std::filesystem::path& out) {
    std::ifstream log(out / "metrics.jsonl");
    std::vector<int64_t> steps;
    for (std::string line; std::getline(log, line);) {
      const auto j = nlohmann::json::parse(line);
      if (j["split"] == "dev") steps.push_back(j["step"]);
    }
    return steps;
  };
  train(options, dir_.path() / "every5");
  EXPECT_EQ(count_dev(dir_.path() / "every5"), (std::vector<int64_t>{5, 10, 15, 20, 25, 30, 32}));
  options.eval_each_epoch = true;
  train(options, dir_.path() / "every5_and_epochs");
  EXPECT_EQ(count_dev(dir_.path() / "every5_and_epochs"),
            (std::vector<int64_t>{5, 10, 15, 16, 20, 25, 30, 32}));
}

// A run stopped after a checkpoint (mid-epoch and at an epoch's end) and resumed ends with the
// same weights, bit for bit, as one that ran through; the log has no step twice.
// A resumed `precision: auto` run goes on in the precision its checkpoint was trained in,
// whatever the probe says now (here the run started in bf16).
TEST_F(TrainerTest, AResumedAutoRunKeepsThePrecisionItStartedIn) {
  auto options = fast();
  options.epochs = 1;
  options.save_every = 2;
  options.precision = Precision::kBf16;
  const auto out = dir_.path() / "kept";
  const auto first = train(options, out, [](int64_t step) { return step >= 2; });
  ASSERT_TRUE(first.result.interrupted);
  options.precision = Precision::kAuto;
  const auto second = train(options, out);
  EXPECT_EQ(second.result.resumed_from, 2);
  EXPECT_EQ(second.precision, Precision::kBf16);
  std::string newest = read_file(out / "checkpoints" / "latest");
  newest.erase(newest.find_last_not_of(" \n") + 1);
  const auto state = nlohmann::json::parse(read_file(out / "checkpoints" / newest / "state.json"));
  EXPECT_EQ(state["precision"], "bf16");
}

// bf16 training on oneDNN keeps each weight's bf16 copy between steps (bert::bf16_shadow): a
// run with the copies ends with the weights of one that casts every forward, bit for bit,
// micro-batches and evaluations included, and so does a run stopped and resumed (which starts
// without copies and makes them again).
TEST_F(TrainerTest, Bf16WithKeptWeightCopiesEqualsCastingAndResumesBitForBit) {
  if (testing::test_device() != "cpu" || !onednn_bf16_available())
    GTEST_SKIP() << "bf16 on oneDNN: a CPU whose oneDNN has bf16 products";
  const ScopedFp32Gemm direct(Fp32Gemm::kOneDnn);  // the tiny model's GEMMs through oneDNN
  auto options = fast();
  options.epochs = 1;
  options.precision = Precision::kBf16;
  options.gradient_accumulation_steps = 2;
  options.eval_every = 4;
  options.save_every = 3;
  const auto run = [&](bool kept, const std::string& name,
                       const std::function<bool(int64_t)>& stop = {}) {
    const ScopedBf16Shadows shadows(kept);
    return train(options, dir_.path() / name, stop);
  };
  const auto cast = run(false, "cast");
  const auto kept = run(true, "kept");
  EXPECT_GT(bf16_shadow::count(), 0u);  // the kept run's model has its copies
  const auto first = run(true, "resumed", [](int64_t step) { return step >= 5; });
  ASSERT_TRUE(first.result.interrupted);
  const auto second = run(true, "resumed");
  EXPECT_GT(second.result.resumed_from, 0);
  for (const auto* other : {&kept, &second}) {
    EXPECT_EQ(other->result.steps, cast.result.steps);
    EXPECT_DOUBLE_EQ(other->result.best.main(), cast.result.best.main());
    for (const auto& [name, tensor] : state_dict(*cast.model))
      EXPECT_TRUE(torch::equal(tensor, state_dict(*other->model).at(name)))
          << name << (other == &kept ? " (copies kept)" : " (resumed)");
  }
}

TEST_F(TrainerTest, ResumedRunEqualsUninterruptedRun) {
  auto options = fast();
  options.epochs = 3;
  options.eval_every = 5;
  options.save_every = 3;
  options.early_stopping_patience = 100;
  const auto whole = train(options, dir_.path() / "whole");
  for (const int64_t stop_at : {7, 16}) {  // 16 = the first epoch's last step
    const auto out = dir_.path() / ("resumed" + std::to_string(stop_at));
    const auto first = train(options, out, [&](int64_t step) { return step >= stop_at; });
    ASSERT_TRUE(first.result.interrupted);
    const auto second = train(options, out);
    EXPECT_FALSE(second.result.interrupted);
    EXPECT_EQ(second.result.resumed_from, stop_at == 7 ? 9 : 16);
    EXPECT_EQ(second.result.steps, whole.result.steps);
    EXPECT_EQ(second.result.best_step, whole.result.best_step);
    EXPECT_DOUBLE_EQ(second.result.best.main(), whole.result.best.main());
    for (const auto& [name, tensor] : state_dict(*whole.model))
      EXPECT_TRUE(torch::equal(tensor, state_dict(*second.model).at(name)))
          << name << " after a stop at " << stop_at;
    // One resumable checkpoint is kept (keep_checkpoints: 1), and each step is logged once.
    int step_dirs = 0;
    for (const auto& entry : std::filesystem::directory_iterator(out / "checkpoints"))
      step_dirs += entry.path().filename().string().rfind("step-", 0) == 0;
    EXPECT_EQ(step_dirs, 1);
    std::ifstream log(out / "metrics.jsonl");
    std::set<std::pair<std::string, int64_t>> seen;
    for (std::string line; std::getline(log, line);) {
      const auto j = nlohmann::json::parse(line);
      EXPECT_TRUE(seen.emplace(j["split"].get<std::string>(), j["step"].get<int64_t>()).second)
          << line;
    }
  }
}

// One optimizer step over the whole training set, clipped, whole or in micro-batches of unequal
// sizes (10 rows in 4: 3, 3, 2, 2), moves every weight as LibTorch's own clip_grad_norm_ and
// AdamW do after one backward over the whole batch. adam_epsilon 1 makes the step follow the
// clipped gradient's size (with HF's 1e-8 AdamW's first step is its sign): a step left unclipped,
// or micro-batches weighted alike rather than by their rows, moves the weights elsewhere.
TEST_F(TrainerTest, AnAccumulatedClippedStepIsTheWholeBatchsStep) {
  testing::write_bytes(dir_.path() / "train.tsv", generated_tsv(10, 3));
  config_.hidden_dropout_prob(0).attention_probs_dropout_prob(0);
  auto options = fast();
  options.precision = Precision::kFp32;
  options.batch_size = 10;
  options.max_steps = 1;
  options.warmup_steps = 0;  // the step's learning rate is the peak
  options.learning_rate = 1.0;
  options.adam_epsilon = 1.0;
  options.max_grad_norm = 0.05;
  for (const int64_t micro_steps : {1, 4}) {
    options.gradient_accumulation_steps = micro_steps;
    const auto run = train(options);
    ASSERT_EQ(run.result.steps, 1);

    torch::manual_seed(static_cast<uint64_t>(options.seed));  // the trained model's start
    auto reference = adapter_->build_model(config_);
    std::map<std::string, torch::Tensor> start;
    for (const auto& [name, tensor] : state_dict(*reference)) start[name] = tensor.clone();
    std::vector<int64_t> rows(train_->size());
    std::iota(rows.begin(), rows.end(), 0);
    const auto batch = adapter_->collate(*train_, rows);
    reference->train();
    adapter_->loss(reference->forward(batch), batch).backward();
    const double norm = torch::nn::utils::clip_grad_norm_(reference->parameters(), 0.05);
    ASSERT_GT(norm, 0.2);  // the step is clipped to a quarter or less
    AdamWSettings settings;
    settings.learning_rate = 1.0;
    settings.eps = 1.0;
    make_optimizer("adamw_torch", *reference, settings)->step();

    const auto trained = state_dict(*run.model);
    for (const auto& [name, tensor] : state_dict(*reference)) {
      const auto expected = tensor - start.at(name);
      const auto moved = trained.at(name).cpu() - start.at(name);
      EXPECT_LE(testing::max_abs_diff(moved, expected),
                1e-3 * expected.abs().max().item<double>() + 1e-7)
          << name << " in " << micro_steps << " micro-batches";
    }
  }
}

TEST(TrainerBatches, LengthGroupingKeepsEveryFeatureOnce) {
  FeatureSet set;
  for (int i = 0; i < 100; ++i) {
    Feature f;
    f.input_ids = {std::vector<int64_t>(static_cast<size_t>(1 + (i * 37) % 50), 1)};
    set.features.push_back(f);
  }
  for (bool grouped : {false, true}) {
    const auto batches = Trainer::epoch_batches(set, 8, 3, grouped);
    std::vector<int> seen(100, 0);
    for (const auto& b : batches)
      for (auto i : b) ++seen[static_cast<size_t>(i)];
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 100);
    EXPECT_EQ(batches, Trainer::epoch_batches(set, 8, 3, grouped));  // deterministic for a seed
  }
}

}  // namespace
}  // namespace bert::tasks
