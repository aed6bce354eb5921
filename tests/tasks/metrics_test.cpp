// Metrics against hand-computed cases and the values published in the reference tools'
// documentation (scikit-learn, scipy, seqeval, the SQuAD scripts); how `score` lines a
// prediction file up with the examples.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "tasks/metrics/classification.h"
#include "tasks/metrics/metric_info.h"
#include "tasks/metrics/regression.h"
#include "tasks/metrics/span_f1.h"
#include "tasks/metrics/squad.h"
#include "tasks/scoring.h"
#include "tests/support/test_support.h"

namespace bert::tasks::metrics {
namespace {

using Tags = std::vector<std::vector<std::string>>;

TEST(ClassificationMetrics, PublishedScikitLearnExamples) {
  // sklearn.metrics.matthews_corrcoef docs: y_true [+1,+1,+1,-1], y_pred [+1,-1,+1,+1] -> -0.33...
  EXPECT_NEAR(matthews_corrcoef({1, -1, 1, 1}, {1, 1, 1, -1}), -1.0 / 3.0, 1e-12);
  // sklearn.metrics.f1_score docs: y_true [0,1,2,0,1,2], y_pred [0,2,1,0,0,1] -> macro 0.26...
  EXPECT_NEAR(f1_macro({0, 2, 1, 0, 0, 1}, {0, 1, 2, 0, 1, 2}), 0.26666666666666666, 1e-12);
  // accuracy_score docs: [0,2,1,3] vs [0,1,2,3] -> 0.5
  EXPECT_DOUBLE_EQ(accuracy({0, 2, 1, 3}, {0, 1, 2, 3}), 0.5);
}

TEST(ClassificationMetrics, HandComputedBinaryF1AndMcc) {
  const std::vector<int64_t> gold = {1, 1, 1, 0, 0, 0, 1, 0};
  const std::vector<int64_t> pred = {1, 0, 1, 1, 0, 0, 1, 0};
  // tp 3, fp 1, fn 1 -> F1 = 6 / 8
  EXPECT_DOUBLE_EQ(f1_binary(pred, gold, 1), 0.75);
  // tn 3: MCC = (3*3 - 1*1) / sqrt(4*4*4*4) = 0.5
  EXPECT_NEAR(matthews_corrcoef(pred, gold), 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(matthews_corrcoef({1, 1, 1}, {0, 1, 0}), 0.0);  // constant prediction
  EXPECT_DOUBLE_EQ(f1_binary({0, 0}, {0, 0}, 1), 0.0);
  EXPECT_THROW(accuracy({1}, {1, 0}), std::invalid_argument);
  // Macro F1 averages over the classes of both lists (scikit-learn's unique_labels): class 2,
  // only predicted, counts with F1 0. Class 0: tp 1, fn 1 -> 2/3; class 1: 1.
  EXPECT_NEAR(f1_macro({0, 2, 1, 1}, {0, 0, 1, 1}), (2.0 / 3 + 1 + 0) / 3, 1e-12);
}

// Which way each metric improves, as best-checkpoint keeping, early stopping and the leaderboard
// read it: losses and the squared error go down, every other score up; an unknown name goes up.
// Multi-label sets as scikit-learn reads indicator matrices, worked by hand: gold {0,1} {1} {2}
// {}, predicted {0} {1,2} {2} {1}: TP 3, FP 2, FN 1 pooled; per label F1 1, 1/2, 2/3 and 0
// for a fourth label never gold nor predicted (sklearn's zero_division counts it 0).
TEST(ClassificationMetrics, MultiLabelSetsAsIndicatorMatrices) {
  const LabelSets gold = {{0, 1}, {1}, {2}, {}}, predicted = {{0}, {1, 2}, {2}, {1}};
  EXPECT_NEAR(f1_micro(predicted, gold), 6.0 / 9.0, 1e-12);
  EXPECT_NEAR(f1_macro(predicted, gold, 3), (1.0 + 0.5 + 2.0 / 3.0) / 3.0, 1e-12);
  EXPECT_NEAR(f1_macro(predicted, gold, 4), (1.0 + 0.5 + 2.0 / 3.0) / 4.0, 1e-12);
  EXPECT_DOUBLE_EQ(subset_accuracy(predicted, gold), 0.25);
  EXPECT_DOUBLE_EQ(subset_accuracy(gold, gold), 1.0);
  EXPECT_DOUBLE_EQ(f1_micro(gold, gold), 1.0);
  // Nothing gold and nothing predicted: every score 0, as sklearn's zero_division.
  const LabelSets none = {{}, {}};
  EXPECT_DOUBLE_EQ(f1_micro(none, none), 0.0);
  EXPECT_DOUBLE_EQ(f1_macro(none, none, 2), 0.0);
  EXPECT_THROW(f1_micro(predicted, none), std::invalid_argument);
  EXPECT_THROW(f1_macro(predicted, gold, 2), std::invalid_argument);  // label 2 of 2
}

TEST(MetricInfo, LossesAndErrorsAreMinimisedEveryScoreMaximised) {
  for (const auto& m : metric_table()) {
    const bool lower_is_better =
        m.name == "mse" || (m.name.size() > 4 && m.name.compare(m.name.size() - 4, 4, "loss") == 0);
    EXPECT_EQ(metric_goal(m.name), lower_is_better ? MetricGoal::kMinimize : MetricGoal::kMaximize)
        << m.name;
    EXPECT_EQ(improves(metric_goal(m.name), 0.5, 0.6), lower_is_better) << m.name;
    EXPECT_FALSE(improves(metric_goal(m.name), 0.6, 0.6)) << m.name;  // a tie keeps the first
  }
  EXPECT_EQ(metric_goal("mlm_loss"), MetricGoal::kMinimize);
  EXPECT_EQ(metric_goal("no_such_metric"), MetricGoal::kMaximize);
  EXPECT_STREQ(goal_name(MetricGoal::kMinimize), "minimize");
}

TEST(RegressionMetrics, PublishedScipyExamples) {
  // scipy.stats.pearsonr docs: ([1,2,3,4,5], [10,9,2.5,6,4]) -> -0.7426106572325057
  EXPECT_NEAR(pearson({1, 2, 3, 4, 5}, {10, 9, 2.5, 6, 4}), -0.7426106572325057, 1e-12);
  // scipy.stats.spearmanr docs: ([1,2,3,4,5], [5,6,7,8,7]) -> 0.8207826816681233
  EXPECT_NEAR(spearman({1, 2, 3, 4, 5}, {5, 6, 7, 8, 7}), 0.8207826816681233, 1e-12);
  EXPECT_EQ(average_ranks({10, 20, 10, 30}), (std::vector<double>{1.5, 3, 1.5, 4}));
}

// Where scipy gives NaN (no pairs, or one side constant: a model that predicts one score) the
// leaderboard gets 0, for either side and for Spearman too; and a perfect correlation is 1 (or
// -1) exactly, though these sums round to 1 + 2^-52 before the clamp.
TEST(RegressionMetrics, DegenerateInputsAndRoundingStayInRange) {
  EXPECT_EQ(pearson({}, {}), 0.0);
  EXPECT_EQ(spearman({}, {}), 0.0);
  EXPECT_EQ(pearson({1, 2, 3}, {5, 5, 5}), 0.0);
  EXPECT_EQ(pearson({5, 5, 5}, {1, 2, 3}), 0.0);
  EXPECT_EQ(spearman({1, 2, 3}, {0.5, 0.5, 0.5}), 0.0);
  EXPECT_EQ(pearson({2.8, 4.0, 0.3}, {0.38, 0.5, 0.13}), 1.0);
  EXPECT_EQ(pearson({2.8, 4.0, 0.3}, {-0.38, -0.5, -0.13}), -1.0);
  EXPECT_THROW(pearson({1, 2}, {1}), std::invalid_argument);
}

TEST(SquadMetric, OfficialNormalisation) {
  EXPECT_EQ(normalize_answer("The  Denver Broncos!"), "denver broncos");
  EXPECT_EQ(normalize_answer("an apple, a day"), "apple day");
  EXPECT_EQ(normalize_answer("theater"), "theater");             // articles only as whole words
  EXPECT_EQ(normalize_answer("Élan\u00A0VITAL"), "élan vital");  // Unicode lower-case and spaces
  EXPECT_EQ(normalize_answer("“quoted”"), "“quoted”");           // only ASCII punctuation goes
  EXPECT_EQ(normalize_answer("1,000"), "1000");
  EXPECT_EQ(normalize_answer("Don't"), "dont");  // string.punctuation has the apostrophe
  // \b(a|an|the)\b: Python's \w has every letter and number, "½" (No) and "²" included.
  EXPECT_EQ(normalize_answer("the½ cup, a² b"), "the½ cup a² b");
}

TEST(SquadMetric, ExactMatchAndTokenF1) {
  EXPECT_EQ(squad_exact("the Broncos", "Broncos"), 1.0);
  // pred {denver, broncos, team} vs gold {broncos}: P 1/3, R 1 -> F1 0.5
  EXPECT_DOUBLE_EQ(squad_f1("Denver Broncos team", "Broncos"), 0.5);
  EXPECT_DOUBLE_EQ(squad_f1("x b b", "b b c"), 2 * (2.0 / 3) * (2.0 / 3) / (4.0 / 3));
  EXPECT_DOUBLE_EQ(squad_f1("a b b", "b b c"), 0.8);  // the article goes first: P 1, R 2/3
  EXPECT_DOUBLE_EQ(squad_f1("", ""), 1.0);
  EXPECT_DOUBLE_EQ(squad_f1("the", "Broncos"), 0.0);  // normalises to empty
}

TEST(SquadMetric, V11TakesTheBestGoldAnswer) {
  const std::vector<SquadGold> gold = {{"q1", {"Denver Broncos", "Broncos"}, false},
                                       {"q2", {"1976"}, false}};
  const auto s = score_squad(gold, {{"q1", "the Broncos"}, {"q2", "in 1976 AD"}}, "1.1");
  EXPECT_DOUBLE_EQ(s["exact_match"].get<double>(), 50.0);
  // q1 F1 = 1; q2: pred {in, 1976, ad} vs {1976} -> 0.5
  EXPECT_DOUBLE_EQ(s["f1"].get<double>(), 75.0);
  const auto missing = score_squad(gold, {{"q1", "Broncos"}}, "1.1");
  EXPECT_DOUBLE_EQ(missing["exact_match"].get<double>(), 50.0);
  EXPECT_EQ(missing["missing"].get<int>(), 1);
}

// Each version's rule for answers with no tokens: the official v1.1 script scores an empty
// prediction against a gold answer that normalises to empty (".") F1 0 (nothing shared), EM 1;
// v2.0's scores it 1.
TEST(SquadMetric, EmptyAnswersFollowTheirVersionsRule) {
  EXPECT_DOUBLE_EQ(squad_f1("", ".", /*v2=*/false), 0.0);
  EXPECT_DOUBLE_EQ(squad_f1("", ".", /*v2=*/true), 1.0);
  const std::vector<SquadGold> gold = {{"q", {"."}, false}};
  const auto v11 = score_squad(gold, {{"q", ""}}, "1.1");
  EXPECT_DOUBLE_EQ(v11["f1"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(v11["exact_match"].get<double>(), 100.0);
  // v2.0 drops gold answers that normalise to empty: "the" is no answer to match an empty
  // prediction when "Paris" is there, and a question with only such answers has none.
  const std::vector<SquadGold> v2_gold = {{"q", {"the", "Paris"}, false}, {"r", {"a"}, false}};
  const auto v2 = score_squad(v2_gold, {{"q", ""}, {"r", ""}}, "v2.0");
  EXPECT_DOUBLE_EQ(v2["exact"].get<double>(), 50.0);
  EXPECT_EQ(v2["HasAns_total"].get<int>(), 1);
  EXPECT_EQ(v2["NoAns_total"].get<int>(), 1);
}

TEST(SquadMetric, V20SplitsAndBestThreshold) {
  const std::vector<SquadGold> gold = {
      {"a", {"Paris"}, false}, {"b", {}, true}, {"c", {"blue sky"}, false}, {"d", {}, true}};
  const std::map<std::string, std::string> preds = {
      {"a", "Paris"}, {"b", ""}, {"c", "sky"}, {"d", "London"}};
  const auto s = score_squad(gold, preds, "v2.0");
  EXPECT_DOUBLE_EQ(s["exact"].get<double>(), 50.0);                         // a, b
  EXPECT_NEAR(s["f1"].get<double>(), 100.0 * (1 + 1 + 2.0 / 3) / 4, 1e-9);  // c: P 1, R 1/2
  EXPECT_DOUBLE_EQ(s["HasAns_exact"].get<double>(), 50.0);
  EXPECT_EQ(s["HasAns_total"].get<int>(), 2);
  EXPECT_DOUBLE_EQ(s["NoAns_exact"].get<double>(), 50.0);
  // No-answer scores: answering only questions with na_prob <= t. Sorted: a 0.1, c 0.3, d 0.6, b
  // 0.9. start = 2 (both NoAns right); +a 1 -> 3 (t 0.1); +c: exact 0, F1 2/3 -> 3.67 (t 0.3); +d
  // -1 (answered a NoAns question); +b 0 (its prediction is empty).
  const std::map<std::string, double> na = {{"a", 0.1}, {"b", 0.9}, {"c", 0.3}, {"d", 0.6}};
  const auto t = score_squad(gold, preds, "v2.0", &na);
  EXPECT_DOUBLE_EQ(t["best_exact"].get<double>(), 75.0);
  EXPECT_DOUBLE_EQ(t["best_exact_thresh"].get<double>(), 0.1);
  EXPECT_NEAR(t["best_f1"].get<double>(), 100.0 * (3 + 2.0 / 3) / 4, 1e-9);
  EXPECT_DOUBLE_EQ(t["best_f1_thresh"].get<double>(), 0.3);
  // A no-answer probability above the threshold (1.0 unless given) makes the answer empty; one
  // equal to it does not (the official script's `na_probs[qid] > na_prob_thresh`).
  const std::map<std::string, double> at = {{"a", 0.5}, {"b", 0.5}, {"c", 1.0}, {"d", 1.0}};
  EXPECT_DOUBLE_EQ(score_squad(gold, preds, "v2.0", &at)["exact"].get<double>(), 50.0);
  const auto above = score_squad(gold, preds, "v2.0", &at, 0.5);  // c and d above, a and b not
  EXPECT_DOUBLE_EQ(above["exact"].get<double>(), 75.0);           // a, b, d (now empty) right
}

TEST(EntityMetric, SeqevalDocumentationExamples) {
  // HF datasets' seqeval metric card, "Partial match": overall P = R = F1 = 0.5, accuracy 0.8.
  const Tags references = {{"O", "O", "O", "B-MISC", "I-MISC", "I-MISC", "O"},
                           {"B-PER", "I-PER", "O"}};
  const Tags predictions = {{"O", "O", "B-MISC", "I-MISC", "I-MISC", "I-MISC", "O"},
                            {"B-PER", "I-PER", "O"}};
  const auto s = score_entities(references, predictions);
  EXPECT_DOUBLE_EQ(s.overall.precision(), 0.5);
  EXPECT_DOUBLE_EQ(s.overall.recall(), 0.5);
  EXPECT_DOUBLE_EQ(s.overall.f1(), 0.5);
  EXPECT_DOUBLE_EQ(s.accuracy(), 0.8);
  EXPECT_DOUBLE_EQ(s.by_type.at("MISC").f1(), 0.0);
  EXPECT_DOUBLE_EQ(s.by_type.at("PER").f1(), 1.0);
  // "Minimal values": 'I-PER', '0', 'I-PER' gives PER x2 and a '_' entity from the odd tag '0'.
  const auto m = score_entities({{"B-MISC", "O", "O"}, {"I-PER", "0", "I-PER"}},
                                {{"O", "B-MISC", "I-MISC"}, {"B-PER", "I-PER", "O"}});
  EXPECT_EQ(m.by_type.at("PER").gold, 2);
  EXPECT_EQ(m.by_type.at("_").gold, 1);
  EXPECT_EQ(m.by_type.at("MISC").gold, 1);
  EXPECT_DOUBLE_EQ(m.overall.f1(), 0.0);
  EXPECT_DOUBLE_EQ(m.accuracy(), 0.0);
}

TEST(EntityMetric, ConllevalChunkRulesForIob1AndIobes) {
  // IOB1: I- opens an entity; B- separates two adjacent entities of the same type.
  EXPECT_EQ(lenient_entities({{"I-PER", "I-PER", "B-PER", "O", "I-LOC"}}),
            (std::vector<Entity>{{"PER", 0, 1}, {"PER", 2, 2}, {"LOC", 4, 4}}));
  EXPECT_EQ(lenient_entities({{"S-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"}}),
            (std::vector<Entity>{{"PER", 0, 0}, {"LOC", 1, 3}, {"LOC", 4, 4}}));
  // After E- (or S-) an I- or E- opens a new entity, of the same type too.
  EXPECT_EQ(lenient_entities({{"B-PER", "E-PER", "I-PER", "O", "S-LOC", "E-LOC"}}),
            (std::vector<Entity>{{"PER", 0, 1}, {"PER", 2, 2}, {"LOC", 4, 4}, {"LOC", 5, 5}}));
  // A type change inside an entity ends it (conlleval).
  EXPECT_EQ(lenient_entities({{"B-PER", "I-LOC"}}),
            (std::vector<Entity>{{"PER", 0, 0}, {"LOC", 1, 1}}));
  // A sentence's end ends its entity (an "O" between sentences, as conlleval's blank line):
  // positions count that separator.
  EXPECT_EQ(lenient_entities({{"B-PER"}, {"I-PER"}}),
            (std::vector<Entity>{{"PER", 0, 0}, {"PER", 2, 2}}));
  EXPECT_EQ(strict_entities({{"B-PER"}, {"I-PER"}}, TagScheme::kIob2),
            (std::vector<Entity>{{"PER", 0, 0}}));
  EXPECT_DOUBLE_EQ(
      score_entities({{"B-PER"}, {"I-PER"}}, {{"B-PER"}, {"B-PER"}}, false).overall.f1(), 1.0);
}

TEST(EntityMetric, StrictModeDropsIllFormedEntities) {
  const Tags gold = {{"B-PER", "I-PER", "O", "B-LOC"}};
  const Tags pred = {{"I-PER", "I-PER", "O", "B-LOC"}};  // PER starts with I-: ill-formed in IOB2
  EXPECT_DOUBLE_EQ(score_entities(gold, pred, /*strict=*/false).overall.f1(), 1.0);
  const auto strict = score_entities(gold, pred, /*strict=*/true, TagScheme::kIob2);
  EXPECT_EQ(strict.overall.predicted, 1);
  EXPECT_DOUBLE_EQ(strict.overall.recall(), 0.5);
  EXPECT_EQ(strict_entities({{"B-X", "I-X", "O", "S-Y", "B-Z", "I-Z"}}, TagScheme::kIobes),
            (std::vector<Entity>{{"Y", 3, 3}}));
  // IOBES: an entity closes with an E- of its own type only.
  EXPECT_EQ(strict_entities({{"B-X", "I-X", "E-Y", "B-X", "E-X"}}, TagScheme::kIobes),
            (std::vector<Entity>{{"X", 3, 4}}));
}

TEST(EntityMetric, TagSchemeConversionKeepsEntities) {
  const std::vector<std::string> iob1 = {"I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-LOC", "I-LOC"};
  const auto iob2 = convert_tags(iob1, TagScheme::kIob1, TagScheme::kIob2);
  EXPECT_EQ(iob2,
            (std::vector<std::string>{"B-PER", "I-PER", "B-PER", "O", "B-LOC", "I-LOC", "I-LOC"}));
  const auto iobes = convert_tags(iob2, TagScheme::kIob2, TagScheme::kIobes);
  EXPECT_EQ(iobes,
            (std::vector<std::string>{"B-PER", "E-PER", "S-PER", "O", "B-LOC", "I-LOC", "E-LOC"}));
  EXPECT_EQ(convert_tags(iobes, TagScheme::kIobes, TagScheme::kIob1), iob1);
}

TEST(EntityMetric, ConllevalReportFormat) {
  const auto s = score_entities({{"B-PER", "O"}}, {{"B-PER", "B-LOC"}});
  const auto report = conlleval_report(s);
  EXPECT_NE(report.find("processed 2 tokens with 1 phrases; found: 2 phrases; correct: 1."),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("precision:  50.00%; recall: 100.00%; FB1:  66.67"), std::string::npos)
      << report;
}

// Predictions go to examples by id only when every line has one; one line without an id puts
// them all in file order (numbered and ordered lines are never mixed).
TEST(Scoring, PredictionsGoByIdOnlyWhenEveryLineHasOne) {
  bert::testing::TempDir dir;
  const std::vector<std::string> ids = {"a", "b"}, wheres = {"dev:2", "dev:3"};
  const auto aligned = [&](const std::string& lines) {
    const auto path = dir.path() / "pred.jsonl";
    bert::testing::write_bytes(path, lines);
    return align_predictions(ids, wheres, read_line_predictions(path), path);
  };
  EXPECT_EQ(aligned("{\"id\": \"b\", \"label\": \"1\"}\n{\"id\": \"a\", \"label\": \"0\"}\n"),
            (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(aligned("{\"id\": \"b\", \"label\": \"1\"}\n{\"label\": \"0\"}\n"),
            (std::vector<std::string>{"1", "0"}));
  EXPECT_EQ(aligned("pos\n\n  neg \n"), (std::vector<std::string>{"pos", "neg"}));
  const auto missing = bert::testing::error_message(
      [&] { aligned("{\"id\": \"b\", \"label\": \"1\"}\n{\"id\": \"c\", \"label\": \"0\"}\n"); });
  EXPECT_NE(missing.find("no prediction for id 'a' (dev:2)"), std::string::npos) << missing;
  const auto count = bert::testing::error_message([&] { aligned("pos\n"); });
  EXPECT_NE(count.find("1 predictions for 2 examples"), std::string::npos) << count;
}

}  // namespace
}  // namespace bert::tasks::metrics
