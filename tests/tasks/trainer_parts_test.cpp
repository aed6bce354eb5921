// The Trainer's parts and options beyond the basic loop: a minimised main metric keeps the
// lowest value, max_steps overrides epochs, a part added by the caller sees every event and may
// stop the run (which stays resumable), label smoothing is HF's LabelSmoother.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "bert/checkpoint/load.h"
#include "bert/checkpoint/pretrained_dir.h"
#include "bert/tokenizer/wordpiece.h"
#include "tasks/registry.h"
#include "tasks/training/train_state.h"
#include "tasks/training/trainer.h"
#include "tasks/training/training_dir.h"
#include "tests/support/test_support.h"

namespace bert::tasks {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const std::vector<std::string> kCue = {"up", "more", "high"};
const std::vector<std::string> kNoise = {"the", "a", "of", "and", "it", "was", "some", "text"};

/// "sentence\tlabel" rows whose score is the number of cue words (0-3): a regression task.
std::string scored_tsv(int rows, unsigned seed) {
  std::mt19937 rng(seed);
  std::string out = "sentence\tlabel\n";
  for (int r = 0; r < rows; ++r) {
    std::vector<std::string> words;
    for (int i = 0; i < 3 + static_cast<int>(rng() % 5); ++i)
      words.push_back(kNoise[rng() % kNoise.size()]);
    const int cues = static_cast<int>(rng() % 4);
    for (int c = 0; c < cues; ++c)
      words.insert(words.begin() + static_cast<long>(rng() % (words.size() + 1)),
                   kCue[rng() % kCue.size()]);
    std::string sentence;
    for (const auto& w : words) sentence += (sentence.empty() ? "" : " ") + w;
    out += sentence + "\t" + std::to_string(cues) + "\n";
  }
  return out;
}

std::vector<json> records(const fs::path& log, const std::string& split) {
  std::ifstream in(log);
  std::vector<json> out;
  for (std::string line; std::getline(in, line);)
    if (auto j = json::parse(line); j["split"] == split) out.push_back(std::move(j));
  return out;
}

/// Records the order of events; stops the run after `stop_at` steps when it is > 0.
class Recorder final : public TrainerCallback {
 public:
  explicit Recorder(int64_t stop_at = 0) : stop_at_(stop_at) {}
  void on_train_begin(TrainContext&, TrainControl&) override { events.push_back("begin"); }
  void on_step_end(TrainContext& run, const StepStats& stats, TrainControl& control) override {
    events.push_back("step" + std::to_string(stats.step));
    if (stop_at_ > 0 && run.state.step == stop_at_) control.stop = true;
  }
  void on_log(TrainContext&, const StepStats&) override { events.push_back("log"); }
  void on_evaluate(TrainContext&, const Evaluation&, bool, TrainControl&) override {
    events.push_back("evaluate");
  }
  void on_save(TrainContext& run, TrainControl&) override {
    events.push_back("save" + std::to_string(run.state.step));
  }
  void on_train_end(TrainContext&) override { events.push_back("end"); }
  std::vector<std::string> events;

 private:
  int64_t stop_at_;
};

class TrainerPartsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    vocab.insert(vocab.end(), kCue.begin(), kCue.end());
    vocab.insert(vocab.end(), kNoise.begin(), kNoise.end());
    tok::WordPieceOptions options;
    options.check_casing = tok::CasingCheck::kOff;
    tokenizer_ = std::make_unique<tok::WordPieceTokenizer>(vocab, options);
    testing::write_bytes(dir_.path() / "train.tsv", scored_tsv(128, 3));
    testing::write_bytes(dir_.path() / "dev.tsv", scored_tsv(48, 4));
    config_ = testing::tiny_config();
    config_.vocab_size(static_cast<int64_t>(vocab.size())).initializer_range(0.02);
  }

  /// Builds the adapter for `task_yaml` and the features of both splits.
  void prepare(const std::string& task_yaml) {
    adapter_ = TaskRegistry::global().create("sequence_classification",
                                             YamlReader(YAML::Load(task_yaml), "t"));
    data::DataSpec spec;
    spec.path = dir_.path() / "train.tsv";
    const auto train_examples = adapter_->read(spec);
    spec.path = dir_.path() / "dev.tsv";
    const auto dev_examples = adapter_->read(spec);
    adapter_->fit_labels(*train_examples);
    train_ = adapter_->featurize(train_examples, *tokenizer_, true);
    dev_ = adapter_->featurize(dev_examples, *tokenizer_, false);
  }

  TaskModel model(uint64_t seed = 1) {
    torch::manual_seed(seed);
    return adapter_->build_model(config_);
  }

  static TrainerOptions options() {
    TrainerOptions o;
    o.epochs = 6;
    o.batch_size = 16;  // 8 steps an epoch
    o.learning_rate = 1e-3;
    o.log_every = 4;
    o.eval_every = 4;
    return o;
  }

  testing::TempDir dir_;
  std::unique_ptr<tok::Tokenizer> tokenizer_;
  BertConfig config_;
  std::unique_ptr<TaskAdapter> adapter_;
  std::shared_ptr<FeatureSet> train_, dev_;
};

// main_metric: mse is minimised: the best evaluation is the lowest mse, the one marked best in
// the log, and the weights the model ends with (and best/ holds).
TEST_F(TrainerPartsTest, AMinimisedMetricKeepsTheLowestValue) {
  prepare("{num_labels: 1, main_metric: mse, max_seq_length: 16}");
  EXPECT_EQ(adapter_->main_metric_goal(), metrics::MetricGoal::kMinimize);
  const auto out = dir_.path() / "run";
  auto m = model();
  Trainer trainer(options());
  const auto result = trainer.fit(*adapter_, m, *train_, dev_.get(), out);
  EXPECT_EQ(result.goal, metrics::MetricGoal::kMinimize);
  const auto dev = records(out / "metrics.jsonl", "dev");
  ASSERT_EQ(dev.size(), 12u);
  double lowest = 1e300, highest = -1e300;
  int64_t lowest_step = 0;
  for (const auto& r : dev) {
    const double mse = r["metrics"]["mse"];
    EXPECT_EQ(r["is_best"].get<bool>(), mse < lowest) << r.dump();
    if (mse < lowest) lowest = mse, lowest_step = r["step"];
    highest = std::max(highest, mse);
  }
  ASSERT_LT(lowest, highest);  // the test means something only if the evaluations differ
  EXPECT_DOUBLE_EQ(result.best.main(), lowest);
  EXPECT_EQ(result.best_step, lowest_step);
  EXPECT_DOUBLE_EQ(trainer.evaluate(*adapter_, m, *dev_).metrics.at("mse"), lowest);
  auto reloaded = model();
  load_state_dict(*reloaded, read_weights(TrainingDir(out).best_weights()), "best");
  EXPECT_DOUBLE_EQ(trainer.evaluate(*adapter_, reloaded, *dev_).metrics.at("mse"), lowest);
}

// max_steps > 0 overrides epochs: the schedule decays over max_steps, the run ends there (mid-
// epoch) with an evaluation and a checkpoint.
TEST_F(TrainerPartsTest, MaxStepsOverridesEpochs) {
  prepare("{max_seq_length: 16}");
  auto o = options();
  o.max_steps = 11;
  o.eval_every = 0;  // each epoch's end (step 8) and the run's end (step 11)
  o.log_every = 1;
  o.warmup_steps = 0;
  const auto out = dir_.path() / "run";
  const auto result = Trainer(o).fit(*adapter_, model(), *train_, dev_.get(), out);
  EXPECT_EQ(result.steps, 11);
  std::vector<int64_t> eval_steps;
  for (const auto& r : records(out / "metrics.jsonl", "dev")) eval_steps.push_back(r["step"]);
  EXPECT_EQ(eval_steps, (std::vector<int64_t>{8, 11}));
  const auto train = records(out / "metrics.jsonl", "train");
  ASSERT_EQ(train.size(), 11u);
  const LinearSchedule schedule(o.learning_rate, 0, 11);
  for (const auto& r : train)
    EXPECT_DOUBLE_EQ(r["learning_rate"].get<double>(), schedule.at(r["step"].get<int64_t>() - 1));
  EXPECT_TRUE(fs::exists(TrainingDir(out).checkpoint(11)));
}

// A part added by the caller sees the events in order; stopping in on_step_end checkpoints the
// step first, and a rerun resumes from it to the same end as an uninterrupted run.
TEST_F(TrainerPartsTest, APartSeesEveryEventAndMayStopTheRun) {
  prepare("{max_seq_length: 16}");
  auto o = options();
  o.epochs = 2;
  o.save_every = 100;  // checkpoints only at epoch ends and when stopped
  auto whole_model = model();
  const auto whole =
      Trainer(o).fit(*adapter_, whole_model, *train_, dev_.get(), dir_.path() / "whole");

  const auto out = dir_.path() / "stopped";
  auto recorder = std::make_shared<Recorder>(/*stop_at=*/5);
  Trainer first(o);
  first.add_callback(recorder);
  const auto stopped = first.fit(*adapter_, model(), *train_, dev_.get(), out);
  EXPECT_EQ(stopped.steps, 5);
  EXPECT_EQ(recorder->events,
            (std::vector<std::string>{"begin", "step1", "step2", "step3", "step4", "log",
                                      "evaluate", "step5", "save5", "end"}));
  EXPECT_TRUE(fs::exists(TrainingDir(out).checkpoint(5)));

  auto second = std::make_shared<Recorder>();
  Trainer resumed(o);
  resumed.add_callback(second);
  auto m = model(/*seed=*/99);  // the checkpoint's weights replace these
  const auto result = resumed.fit(*adapter_, m, *train_, dev_.get(), out);
  EXPECT_EQ(result.resumed_from, 5);
  EXPECT_EQ(second->events.at(1), "step6");
  EXPECT_EQ(result.steps, whole.steps);
  EXPECT_DOUBLE_EQ(result.best.main(), whole.best.main());
  for (const auto& [name, tensor] : state_dict(*whole_model))
    EXPECT_TRUE(torch::equal(tensor, state_dict(*m).at(name))) << name;
}

// HF's LabelSmoother equals torch's cross_entropy(label_smoothing) on a plain cross-entropy,
// positions labelled kIgnoreIndex left out; regression has no class loss to smooth.
TEST_F(TrainerPartsTest, LabelSmoothingIsHfsLabelSmoother) {
  namespace F = torch::nn::functional;
  torch::manual_seed(2);
  const auto logits = torch::randn({4, 5, 7});
  auto labels = torch::randint(0, 7, {4, 5}, torch::kLong);
  labels.index_put_({0, 1}, kIgnoreIndex);
  labels.index_put_({2, 3}, kIgnoreIndex);
  const auto flat = logits.reshape({-1, 7});
  const auto plain = F::cross_entropy(flat, labels.reshape({-1}),
                                      F::CrossEntropyFuncOptions().ignore_index(kIgnoreIndex));
  const auto smoothed = F::cross_entropy(
      flat, labels.reshape({-1}),
      F::CrossEntropyFuncOptions().ignore_index(kIgnoreIndex).label_smoothing(0.1));
  EXPECT_NEAR(smoothed_loss(plain, logits, labels, 0.1).item<double>(), smoothed.item<double>(),
              1e-6);

  prepare("{max_seq_length: 16}");
  auto o = options();
  o.epochs = 1;
  o.label_smoothing = 0.1;
  EXPECT_GT(Trainer(o).fit(*adapter_, model(), *train_, dev_.get()).steps, 0);
  prepare("{num_labels: 1, max_seq_length: 16}");
  const auto message =
      testing::error_message([&] { Trainer(o).fit(*adapter_, model(), *train_, dev_.get()); });
  EXPECT_NE(message.find("label_smoothing applies to classification losses only"),
            std::string::npos)
      << message;
}

// Resumable checkpoints are checkpoints/step-NNNNNNNN; a name is one only with digits after the
// prefix (resume takes the highest; "step-" alone or a user's "step-old" is none).
TEST(TrainingDirTest, CheckpointNamesAreTheStepPrefixAndDigits) {
  const TrainingDir dir("/runs/a");
  EXPECT_EQ(dir.checkpoint(12), std::filesystem::path("/runs/a/checkpoints/step-00000012"));
  EXPECT_EQ(TrainingDir::checkpoint_step("step-00000012"), 12);
  EXPECT_EQ(TrainingDir::checkpoint_step("step-123456789"), 123456789);
  for (const char* name : {"step-", "step", "step-1x", "step-old", "latest", "Step-1", "xstep-1"})
    EXPECT_FALSE(TrainingDir::checkpoint_step(name)) << name;
}

TEST(TrainStateTest, RoundTripsThroughJsonAndKeepsDefaultsForAbsentFields) {
  TrainState s;
  s.step = 12;
  s.epoch = 1;
  s.next_batch = 3;
  s.have_best = true;
  s.best_metrics = {{"mse", 0.25}};
  s.main_metric = "mse";
  s.losses = {0.5, 0.25};
  const auto back = TrainState::from_json(s.to_json(), "state.json");
  EXPECT_EQ(back.to_json(), s.to_json());
  const auto older = TrainState::from_json(json{{"step", 4}}, "state.json");
  EXPECT_EQ(older.step, 4);
  EXPECT_EQ(older.loss_scale, 0.0);
  EXPECT_NE(testing::error_message([] {
              TrainState::from_json(json{{"step", "x"}}, "s.json");
            }).find("s.json: \"step\""),
            std::string::npos);
  // Some other JSON object (a config.json put there) is no state at step 0.
  EXPECT_NE(testing::error_message([] {
              TrainState::from_json(json{{"epoch", 1}, {"hidden_size", 8}}, "s.json");
            }).find("s.json: not a training state (no \"step\")"),
            std::string::npos);
}

// Data-parallel ranks draw their own dropout: a rank > 0 gets a stream of its own, from the
// seed, its rank and the step it starts at, the same on every run; rank 0 keeps the stream a
// single process has.
TEST(TrainStateTest, EachRankAfterTheFirstDrawsItsOwnStreamFromSeedRankAndStep) {
  const auto draws = [](int rank, int64_t step) {
    torch::manual_seed(7);
    seed_rank_generators(7, rank, step, torch::kCPU);
    return torch::rand({8});
  };
  torch::manual_seed(7);
  const auto single = torch::rand({8});
  EXPECT_TRUE(torch::equal(draws(0, 0), single));
  EXPECT_TRUE(torch::equal(draws(0, 12), single));
  const auto rank1 = draws(1, 0);
  EXPECT_FALSE(torch::equal(rank1, single));
  EXPECT_TRUE(torch::equal(draws(1, 0), rank1));  // reproducible
  EXPECT_FALSE(torch::equal(draws(2, 0), rank1));
  EXPECT_FALSE(torch::equal(draws(1, 12), rank1));  // a resume at step 12 does not replay step 0's
}

}  // namespace
}  // namespace bert::tasks
