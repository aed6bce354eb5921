// The generic Trainer learns a small generated task, is reproducible for a seed, keeps the
// best weights and logs JSONL.
#include "tasks/training/trainer.h"

#include <gtest/gtest.h>

#include <algorithm>
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

/// The task of `inner` with scripted dev scores (evaluation k scores scores[k], the last one
/// after them) that records the feature indices of every batch it collates.
class ScriptedAdapter final : public TaskAdapter {
 public:
  ScriptedAdapter(std::unique_ptr<TaskAdapter> inner, std::vector<double> scores)
      : inner_(std::move(inner)), scores_(std::move(scores)) {}

  std::string type() const override { return inner_->type(); }
  YAML::Node options() const override { return inner_->options(); }
  std::shared_ptr<const ExampleSet> read(const data::DataSpec& spec) override {
    return inner_->read(spec);
  }
  void fit_labels(const ExampleSet& train) override { inner_->fit_labels(train); }
  std::vector<std::string> labels() const override { return inner_->labels(); }
  std::shared_ptr<FeatureSet> featurize(std::shared_ptr<const ExampleSet> examples,
                                        const tok::Tokenizer& tokenizer,
                                        bool training) const override {
    return inner_->featurize(std::move(examples), tokenizer, training);
  }
  Batch collate(const FeatureSet& features, const std::vector<int64_t>& indices) const override {
    batches.emplace_back(&features, indices);
    return inner_->collate(features, indices);
  }
  TaskModel build_model(const BertConfig& config) const override {
    return inner_->build_model(config);
  }
  torch::Tensor loss(const torch::Tensor& logits, const Batch& batch) const override {
    return inner_->loss(logits, batch);
  }
  void gather(const Batch& batch,
              const torch::Tensor& logits,
              std::vector<torch::Tensor>& outputs) const override {
    inner_->gather(batch, logits, outputs);
  }
  nlohmann::json predict(const FeatureSet& features,
                         const std::vector<torch::Tensor>& outputs) const override {
    return inner_->predict(features, outputs);
  }
  Evaluation evaluate(const FeatureSet& features,
                      const std::vector<torch::Tensor>& outputs) const override {
    auto ev = inner_->evaluate(features, outputs);
    ev.metrics[ev.main_metric] = scores_.at(std::min(evaluations++, scores_.size() - 1));
    return ev;
  }
  std::string main_metric() const override { return inner_->main_metric(); }

  /// (feature set, indices) of each collate() call, training and evaluation alike.
  mutable std::vector<std::pair<const FeatureSet*, std::vector<int64_t>>> batches;
  mutable size_t evaluations = 0;

 private:
  std::unique_ptr<TaskAdapter> inner_;
  std::vector<double> scores_;
};

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
    if (!scores_.empty()) {
      auto scripted = std::make_unique<ScriptedAdapter>(std::move(adapter_), scores_);
      scripted_ = scripted.get();
      adapter_ = std::move(scripted);
    }
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
  std::vector<double> scores_;           ///< when set, the dev scores of each evaluation in turn
  ScriptedAdapter* scripted_ = nullptr;  ///< the last train()'s adapter, with scores_
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

// Early stopping counts evaluations without a gain since the last gain (HF's
// EarlyStoppingCallback): patience 2 over the scores 0.5 0.4 0.6 0.5 0.55 stops at the fifth
// evaluation, not at the fourth. A rerun on the stopped run's directory stays stopped.
TEST_F(TrainerTest, PatienceCountsTheEvaluationsSinceTheLastGain) {
  auto options = fast();
  options.precision = Precision::kFp32;
  options.eval_every = 2;
  options.early_stopping_patience = 2;
  scores_ = {0.5, 0.4, 0.6, 0.5, 0.55, 0.9};
  const auto out = dir_.path() / "patience";
  const auto run = train(options, out);
  EXPECT_TRUE(run.result.stopped_early);
  EXPECT_EQ(run.result.steps, 10);
  EXPECT_EQ(run.result.best_step, 6);
  const auto again = train(options, out);
  EXPECT_EQ(again.result.resumed_from, 10);
  EXPECT_TRUE(again.result.stopped_early);
  EXPECT_EQ(again.result.steps, 10);
  EXPECT_EQ(scripted_->evaluations, 0u);
}

// Each epoch has an order of its own (the seed and the epoch's number), as HF's sampler
// reshuffles every epoch; the same seed gives the same orders.
TEST_F(TrainerTest, EachEpochIsShuffledAnew) {
  auto options = fast();
  options.epochs = 2;
  options.eval_every = 0;
  scores_ = {0.5};
  const auto orders = [&] {
    train(options);
    std::vector<std::vector<int64_t>> epochs(2);
    size_t steps = 0;
    for (const auto& [features, indices] : scripted_->batches) {
      if (features != train_.get()) continue;
      auto& epoch = epochs.at(steps++ / 16);
      epoch.insert(epoch.end(), indices.begin(), indices.end());
    }
    return epochs;
  };
  const auto first = orders();
  for (auto epoch : first) {
    std::sort(epoch.begin(), epoch.end());
    std::vector<int64_t> all(256);
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(epoch, all);  // every feature once per epoch
  }
  EXPECT_NE(first[0], first[1]);
  EXPECT_EQ(orders(), first);
}

// eval_every N evaluates every N steps and at the end; eval_each_epoch adds each epoch's end.
TEST_F(TrainerTest, EvaluationCadence) {
  auto options = fast();
  options.epochs = 2;
  options.eval_every = 5;
  const auto logged_steps = [&](const std::filesystem::path& out, const char* split) {
    std::ifstream log(out / "metrics.jsonl");
    std::vector<int64_t> steps;
    for (std::string line; std::getline(log, line);) {
      const auto j = nlohmann::json::parse(line);
      if (j["split"] == split) steps.push_back(j["step"]);
    }
    return steps;
  };
  options.log_every = 5;
  train(options, dir_.path() / "every5");
  EXPECT_EQ(logged_steps(dir_.path() / "every5", "dev"),
            (std::vector<int64_t>{5, 10, 15, 20, 25, 30, 32}));
  // The training loss is logged every log_every steps and at the last one.
  EXPECT_EQ(logged_steps(dir_.path() / "every5", "train"),
            (std::vector<int64_t>{5, 10, 15, 20, 25, 30, 32}));
  options.eval_each_epoch = true;
  train(options, dir_.path() / "every5_and_epochs");
  EXPECT_EQ(logged_steps(dir_.path() / "every5_and_epochs", "dev"),
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
    // The log holds what the uninterrupted run's holds: the stopped run's records up to its
    // checkpoint (those after it dropped, the checkpoint step's kept), then the resumed ones.
    const auto logged = [](const std::filesystem::path& dir) {
      std::ifstream log(dir / "metrics.jsonl");
      std::set<std::pair<std::string, int64_t>> seen;
      for (std::string line; std::getline(log, line);) {
        const auto j = nlohmann::json::parse(line);
        EXPECT_TRUE(seen.emplace(j["split"].get<std::string>(), j["step"].get<int64_t>()).second)
            << line;
      }
      return seen;
    };
    EXPECT_EQ(logged(out), logged(dir_.path() / "whole")) << "after a stop at " << stop_at;
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

/// `n` features of lengths 1 + (i * step) % range, i = 0 .. n - 1.
FeatureSet features_of_lengths(int n, int step, int range) {
  FeatureSet set;
  for (int i = 0; i < n; ++i) {
    Feature f;
    f.input_ids = {std::vector<int64_t>(static_cast<size_t>(1 + (i * step) % range), 1)};
    set.features.push_back(f);
  }
  return set;
}

TEST(TrainerBatches, LengthGroupingKeepsEveryFeatureOnce) {
  const auto set = features_of_lengths(100, 37, 50);
  for (bool grouped : {false, true}) {
    const auto batches = Trainer::epoch_batches(set, 8, 3, grouped);
    std::vector<int> seen(100, 0);
    for (const auto& b : batches)
      for (auto i : b) ++seen[static_cast<size_t>(i)];
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 100);
    EXPECT_EQ(batches, Trainer::epoch_batches(set, 8, 3, grouped));  // deterministic for a seed
  }
}

// Grouping by length sorts shuffled chunks of 50 batches, not the whole set, then shuffles the
// batches: with 1000 distinct lengths in batches of 4, each batch is sorted longest first, but
// its lengths are not 4 neighbours of a global sort, and the batches do not come longest first.
TEST(TrainerBatches, LengthGroupingSortsChunksOf50BatchesThenShufflesThem) {
  const auto set = features_of_lengths(1000, 7919, 1000);  // 7919 is prime: 1000 lengths
  const auto batches = Trainer::epoch_batches(set, 4, 3, true);
  ASSERT_EQ(batches.size(), 250u);
  size_t neighbours = 0, descending = 0;
  for (size_t b = 0; b < batches.size(); ++b) {
    std::vector<int64_t> lengths;
    for (const auto i : batches[b]) lengths.push_back(set.length(static_cast<size_t>(i)));
    EXPECT_TRUE(std::is_sorted(lengths.rbegin(), lengths.rend())) << b;
    neighbours += lengths.front() - lengths.back() == 3;  // 4 consecutive lengths
    if (b > 0) descending += set.length(static_cast<size_t>(batches[b - 1][0])) > lengths[0];
  }
  EXPECT_LT(neighbours, 50u);   // a global sort: all 250
  EXPECT_LT(descending, 200u);  // unshuffled: 245 of 249 (each chunk longest first)
}

}  // namespace
}  // namespace bert::tasks
