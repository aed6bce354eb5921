// The run directories' typed records: TrialResult and SweepPlan round-trip through JSON, older
// results without a goal take the metric table's, and the leaderboard ranks by the main
// metric's goal (lowest mse first).
#include "recipes/runner/run_dir.h"

#include <gtest/gtest.h>

#include <set>

#include "bert/common/file_util.h"
#include "recipes/runner/export.h"
#include "recipes/runner/leaderboard.h"
#include "tests/support/test_support.h"

namespace bert::recipes {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using tasks::metrics::MetricGoal;

TEST(TrialResultTest, RoundTripsThroughJson) {
  TrialResult r;
  r.status = TrialStatus::kDone;
  r.trial = "lr1e-3_seed1";
  r.task = "sequence_classification";
  r.main_metric = "mse";
  r.goal = MetricGoal::kMinimize;
  r.main = 0.5;
  r.metrics = {{"mse", 0.5}, {"pearson", 0.7}};
  r.best_step = 40;
  r.steps = 80;
  r.losses = {1.0, 0.5};
  r.labels = {"LABEL_0"};
  r.seconds = 3.5;
  const auto j = r.to_json();
  EXPECT_EQ(j["goal"], "minimize");
  EXPECT_EQ(j["status"], "done");
  EXPECT_FALSE(j.contains("error"));
  EXPECT_EQ(TrialResult::from_json(j, "result.json").to_json(), j);

  TrialResult failed;
  failed.trial = "x";
  failed.error = "boom";
  const auto f = TrialResult::from_json(failed.to_json(), "result.json");
  EXPECT_FALSE(f.done());
  EXPECT_FALSE(f.main.has_value());
  EXPECT_EQ(f.error, "boom");

  // Written before the goal existed: the metric table says which way is better.
  const auto old = TrialResult::from_json(
      json{{"status", "done"}, {"main_metric", "mse"}, {"main", 0.2}}, "result.json");
  EXPECT_EQ(old.goal, MetricGoal::kMinimize);
  EXPECT_NE(testing::error_message([] {
              TrialResult::from_json(json{{"status", "finished"}}, "t/result.json");
            }).find("t/result.json: \"status\""),
            std::string::npos);
}

// A result.json that does not parse, or holds no result, reads as none (the trial runs again)
// rather than stopping a sweep or a leaderboard.
TEST(TrialResultTest, AnUnreadableResultReadsAsNone) {
  testing::TempDir dir;
  const TrialDir trial(dir.path() / "t");
  fs::create_directories(trial.root());
  EXPECT_FALSE(TrialResult::read(trial));
  for (const std::string text : {"{\"status\": \"do", "[1, 2]", "{\"status\": \"finished\"}"}) {
    testing::write_bytes(trial.result(), text);
    EXPECT_FALSE(TrialResult::read(trial)) << text;
  }
  testing::write_bytes(trial.result(), "{\"status\": \"done\", \"main\": 0.5}");
  ASSERT_TRUE(TrialResult::read(trial));
  EXPECT_TRUE(TrialResult::read(trial)->done());
}

TEST(SweepPlanTest, RoundTripsThroughTheSweepDirectory) {
  testing::TempDir dir;
  const SweepDir sweep(dir.path());
  SweepPlan plan{"r.yaml", "r", "sequence_classification", {}};
  plan.trials.push_back({"lr1_seed1", {{"learning_rate", "1"}, {"seed", "1"}}});
  plan.write(sweep);
  EXPECT_TRUE(SweepDir::holds_sweep(dir.path()));
  EXPECT_EQ(SweepPlan::read(sweep).to_json(), plan.to_json());
}

// A sweep's test predictions are in the format `score` reads for the task: CoNLL columns for
// tagging, SQuAD's {id: answer} object for QA, JSON lines for the others.
TEST(SweepPlanTest, TestPredictionsTakeTheFormatScoreReads) {
  const SweepDir sweep("runs");
  const auto file = [&](const std::string& task) {
    return sweep.test_predictions(prediction_extension(task)).string();
  };
  EXPECT_EQ(file("token_classification"), "runs/test_predictions.txt");
  EXPECT_EQ(file("question_answering"), "runs/test_predictions.json");
  EXPECT_EQ(file("sequence_classification"), "runs/test_predictions.jsonl");
  EXPECT_EQ(file("multiple_choice"), "runs/test_predictions.jsonl");
}

// Settings are ranked by mean mse, lowest first; each setting's best seed is its lowest.
TEST(LeaderboardTest, AMinimisedMetricRanksTheLowestFirst) {
  testing::TempDir dir;
  const SweepDir sweep(dir.path());
  SweepPlan plan{"r.yaml", "stsb", "sequence_classification", {}};
  const auto add = [&](const std::string& name, const std::string& lr, const std::string& seed,
                       double mse) {
    plan.trials.push_back({name, {{"learning_rate", lr}, {"seed", seed}}});
    TrialResult r;
    r.status = TrialStatus::kDone;
    r.trial = name;
    r.main_metric = "mse";
    r.goal = MetricGoal::kMinimize;
    r.main = mse;
    r.metrics = {{"mse", mse}};
    r.write(sweep.trial(name));
  };
  add("a1", "1e-3", "1", 0.9);
  add("a2", "1e-3", "2", 0.7);
  add("b1", "1e-4", "1", 0.5);
  add("b2", "1e-4", "2", 0.6);
  plan.write(sweep);
  const auto board = write_leaderboard(dir.path());
  EXPECT_EQ(board["goal"], "minimize");
  ASSERT_EQ(board["settings"].size(), 2u);
  EXPECT_NEAR(board["settings"][0]["mean"].get<double>(), 0.55, 1e-12);
  EXPECT_EQ(board["settings"][0]["best_trial"], "b1");
  EXPECT_EQ(board["settings"][1]["best_trial"], "a2");
  EXPECT_EQ(board["best"]["trial"], "b1");
  EXPECT_NE(read_file(sweep.leaderboard("md")).find("(lower is better)"), std::string::npos);
}

// A setting none of whose trials finished (failed, or not run yet) ranks after every setting
// with a score, wherever the plan lists it.
TEST(LeaderboardTest, SettingsWithoutAFinishedTrialRankLast) {
  testing::TempDir dir;
  const SweepDir sweep(dir.path());
  SweepPlan plan{"r.yaml", "sst2", "sequence_classification", {}};
  for (const auto& [name, lr] : std::vector<std::pair<std::string, std::string>>{
           {"failed", "1e-2"}, {"pending", "1e-1"}, {"low", "1e-3"}, {"high", "1e-4"}}) {
    plan.trials.push_back({name, {{"learning_rate", lr}, {"seed", "1"}}});
    if (name == "pending") continue;
    TrialResult r;
    r.trial = name;
    r.main_metric = "accuracy";
    if (name == "failed") {
      r.error = "out of memory";
    } else {
      r.status = TrialStatus::kDone;
      r.main = name == "low" ? 0.5 : 0.9;
      r.metrics = {{"accuracy", *r.main}};
    }
    r.write(sweep.trial(name));
  }
  plan.write(sweep);
  const auto board = write_leaderboard(dir.path());
  ASSERT_EQ(board["settings"].size(), 4u);
  std::vector<std::string> order;
  for (const auto& s : board["settings"])
    order.push_back(s["hyperparameters"][0][1].get<std::string>());  // the learning rate
  EXPECT_EQ(order[0], "1e-4");                                       // high
  EXPECT_EQ(order[1], "1e-3");                                       // low
  EXPECT_EQ(std::set<std::string>(order.begin() + 2, order.end()),
            (std::set<std::string>{"1e-2", "1e-1"}));  // failed, pending
  EXPECT_EQ(board["best"]["trial"], "high");
}

}  // namespace
}  // namespace bert::recipes
