// Every fine-tuning head's export loaded by Hugging Face transformers itself: `bertft train` ->
// `bertft export` -> `bertft predict` on real data subsets (../shared/data), then the HF
// reference (../shared/tools/hf-reference: transformers 4.31, its setup.sh run into
// build/hf-reference or $BERTFT_HF_PYTHON) loads the export with AutoTokenizer and
// AutoModelFor<task>.from_pretrained (hf_export_check.py) and runs the same inputs: no missing,
// unexpected or mismatched key, HF's class, the same predictions, probabilities within 1e-5,
// and HF's tokenizer giving bertft's ids; STS-B's regression output through
// tests/support/hf_regression.py (scores within 1e-5); a multi-label classifier (generated
// topics) through tests/support/hf_multi_label.py: HF reads it as multi-label, its sigmoid
// probabilities and its text-classification pipeline's scores equal bertft predict's (--data,
// --text), its loss bertft's on the same logits. Skips where the reference or the data is absent.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "bert/common/file_util.h"
#include "tasks/sequence_classification/adapter.h"
#include "tests/support/test_support.h"

namespace bert {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct HeadCase {
  std::string name;          ///< the test's name
  std::string checker;       ///< hf_export_check.py's task: seqcls | tokcls | qa | mc; regression:
                             ///< tests/support/hf_regression.py; multi_label: hf_multi_label.py
  std::string architecture;  ///< the class HF must build from config.json
  std::string task;          ///< the recipe's task mapping
  int max_len;
  /// Enough for the head's outputs to differ from input to input (STS-B's regression head, this
  /// small, gives one score everywhere for tens of steps).
  int epochs = 2;
};

void PrintTo(const HeadCase& c, std::ostream* os) {
  *os << c.name;
}

std::vector<std::string> lines_of(const fs::path& file) {
  std::vector<std::string> lines;
  std::istringstream in(read_file(file));
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// The GLUE directory of a test case.
std::string glue_dir(const std::string& name) {
  return name == "sst2" ? "SST-2" : name == "mrpc" ? "MRPC" : "STS-B";
}

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> fields;
  std::stringstream in(line);
  for (std::string field; std::getline(in, field, '\t');) fields.push_back(field);
  return fields;
}

class HfExportTest : public ::testing::TestWithParam<HeadCase> {
 protected:
  void SetUp() override {
    if (!testing::hf_export_check_command())
      GTEST_SKIP() << "no HF reference (run ../shared/tools/hf-reference/setup.sh "
                      "build/hf-reference, or set BERTFT_HF_PYTHON)";
    if (!fs::exists(data() / "bert-vocab" / "bert-base-cased-vocab.txt"))
      GTEST_SKIP() << "no ../shared/data";
  }
  static fs::path data() { return testing::shared_dir() / "data"; }
  fs::path path(const std::string& name) const { return dir_.path() / name; }

  void bertft(const std::string& args,
              const std::string& log,
              const fs::path& input = "/dev/null") {
    const auto run = testing::run_bertft(args, path(log), "", input);
    ASSERT_EQ(run.code, 0) << args << "\n" << run.output;
  }

  /// Writes this case's examples to `file` in the format its reader and the checker take;
  /// returns how many predictions the checker compares, and (seqcls, qa) writes the texts
  /// for `bertft tokenize` to `texts`.
  int write_examples(const fs::path& file, const fs::path& texts);

  testing::TempDir dir_;
};

int HfExportTest::write_examples(const fs::path& file, const fs::path& texts) {
  const auto& name = GetParam().name;
  std::string out, text_lines;
  int n = 0;
  if (name == "sst2" || name == "mrpc" || name == "stsb") {
    const auto lines = lines_of(data() / "glue" / glue_dir(name) / "dev.tsv");
    for (size_t i = 0; i < lines.size() && n < 40; ++i) {
      out += lines[i] + "\n";
      if (i == 0) continue;
      const auto fields = split_tabs(lines[i]);
      json text = name == "sst2"   ? json{{"text", fields.at(0)}}
                  : name == "mrpc" ? json{{"text", fields.at(3)}, {"text_pair", fields.at(4)}}
                                   : json{{"text", fields.at(7)}, {"text_pair", fields.at(8)}};
      text_lines += text.dump() + "\n";
      ++n;
    }
    fs::create_directories(file.parent_path());
  } else if (name == "conll") {
    bool in_sentence = false;
    for (const auto& line : lines_of(data() / "conll2003" / "valid.txt")) {
      out += line + "\n";
      const bool blank = line.find_first_not_of(" \r") == std::string::npos;
      if (!blank && line.rfind("-DOCSTART-", 0) != 0) in_sentence = true;
      if (blank && in_sentence) {
        in_sentence = false;
        if (++n == 40) break;
      }
    }
  } else if (name == "multilabel") {
    // Generated texts: a topic's label where one of its words is in the text, none or several.
    const std::vector<std::pair<std::string, std::vector<std::string>>> topics = {
        {"animal", {"dog", "cat", "horse", "bird"}},
        {"place", {"park", "river", "city", "road"}},
        {"weather", {"rain", "sun", "snow", "wind"}}};
    const std::vector<std::string> filler = {"the", "a",   "and",  "then",
                                             "we",  "saw", "near", "with"};
    std::mt19937 rng(11);
    for (; n < 120; ++n) {
      std::vector<std::string> words;
      json labels = json::array();
      for (const auto& [label, pool] : topics)
        if (rng() % 2) {
          labels.push_back(label);
          words.push_back(pool[rng() % pool.size()]);
        }
      for (int k = 0; k < 4; ++k) words.push_back(filler[rng() % filler.size()]);
      std::shuffle(words.begin(), words.end(), rng);
      const json line = {{"text", fmt::format("{}", fmt::join(words, " "))}, {"labels", labels}};
      out += line.dump() + "\n";
      text_lines += line.dump() + "\n";
    }
  } else if (name == "squad") {
    // The first article's paragraphs short enough for one window (bertft would split a longer
    // context; the checker reads one), four questions each.
    const auto squad = json::parse(read_file(data() / "squad" / "dev-v1.1.json"));
    json paragraphs = json::array();
    for (const auto& p : squad["data"][0]["paragraphs"]) {
      if (p["context"].get<std::string>().size() > 900) continue;
      json kept = p;
      kept["qas"] = json::array();
      for (const auto& q : p["qas"]) {
        if (kept["qas"].size() == 4) break;
        kept["qas"].push_back(q);
        text_lines += json{{"text", q["question"]}, {"text_pair", p["context"]}}.dump() + "\n";
        ++n;
      }
      paragraphs.push_back(kept);
      if (paragraphs.size() == 6) break;
    }
    out = json{{"version", "1.1"}, {"data", {{{"title", "t"}, {"paragraphs", paragraphs}}}}}.dump();
  } else {
    // SWAG's columns, generated sentences: the labelled ending starts "then", the others "never".
    const std::vector<std::string> subjects = {"The dog", "A woman", "The man", "Two kids"},
                                   verbs = {"walks", "runs", "looks", "sits", "waits", "turns"},
                                   places = {"the park", "a room", "the river", "the road"};
    std::mt19937 rng(5);
    out =
        "video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,"
        "label\n";
    for (; n < 32; ++n) {
      const auto& subject = subjects[rng() % subjects.size()];
      const int label = static_cast<int>(rng() % 4);
      std::string row = "v" + std::to_string(n) + ",0,x," + subject + " " +
                        verbs[rng() % verbs.size()] + " to " + places[rng() % places.size()] + "." +
                        "," + subject + ",gold";
      for (int e = 0; e < 4; ++e)
        row += "," + (e == label ? std::string("then") : std::string("never")) + " " +
               verbs[rng() % verbs.size()] + " near " + places[rng() % places.size()] + ".";
      out += row + "," + std::to_string(label) + "\n";
    }
  }
  testing::write_bytes(file, out);
  if (!texts.empty()) testing::write_bytes(texts, text_lines);
  return n;
}

TEST_P(HfExportTest, HuggingFaceLoadsTheExportAndPredictsTheSame) {
  const auto& c = GetParam();
  const bool with_tokens = c.checker == "seqcls" || c.checker == "qa" ||
                           c.checker == "regression" || c.checker == "multi_label";
  const auto examples = c.checker == "seqcls" || c.checker == "regression"
                            ? path("glue") / glue_dir(c.name) / "dev.tsv"
                        : c.checker == "multi_label" ? path("multilabel.jsonl")
                        : c.checker == "tokcls"      ? path("conll.txt")
                        : c.checker == "qa"          ? path("squad.json")
                                                     : path("swag.csv");
  const auto texts = with_tokens ? path("texts.jsonl") : fs::path();
  const int n = write_examples(examples, texts);
  ASSERT_GT(n, 0);

  bertft("new-model --vocab " + (data() / "bert-vocab" / "bert-base-cased-vocab.txt").string() +
             " --out " + path("base").string() +
             " --hidden 32 --layers 2 --heads 2 --intermediate 64 --max-positions 512 --seed 3",
         "new-model.log");
  // Trained on the examples themselves, so that the heads' weights are far from their start.
  testing::write_bytes(path("recipe.yaml"),
                       "model: {pretrained: " + path("base").string() + "}\ntask: " + c.task +
                           "\ndata:\n  train: {path: " + examples.string() + "}\n  dev: {path: " +
                           examples.string() + "}\ntraining: {epochs: " + std::to_string(c.epochs) +
                           ", batch_size: 8, "
                           "learning_rate: 1.0e-3, precision: fp32}\n"
                           "output: {dir: " +
                           path("runs").string() + "}\n");
  bertft("--threads 1 train " + path("recipe.yaml").string(), "train.log");
  const auto model = path("export");
  bertft("export " + path("runs").string() + " --out " + model.string(), "export.log");
  const auto predicted = path(c.checker == "tokcls" ? "predicted.txt"
                              : c.checker == "qa"   ? "predicted.json"
                                                    : "predicted.jsonl");
  bertft("predict --model " + model.string() + " --data " + examples.string() + " --out " +
             predicted.string() + (c.checker == "multi_label" ? " --logits" : ""),
         "predict.log");
  auto predictions = predicted;
  if (c.checker == "tokcls") {
    // The checker reads {"words", "tags"} a sentence; predict writes CoNLL columns.
    std::string jsonl;
    std::set<std::string> distinct_tags;
    json words = json::array(), tags = json::array();
    for (const auto& line : lines_of(predicted)) {
      std::istringstream fields(line);
      std::vector<std::string> columns;
      for (std::string f; fields >> f;) columns.push_back(f);
      if (!columns.empty()) {
        words.push_back(columns.front());
        tags.push_back(columns.back());
        distinct_tags.insert(columns.back());
      } else if (!words.empty()) {
        jsonl += json{{"words", words}, {"tags", tags}}.dump() + "\n";
        words = json::array();
        tags = json::array();
      }
    }
    if (!words.empty()) jsonl += json{{"words", words}, {"tags", tags}}.dump() + "\n";
    // Agreement on one tag everywhere would say little about the head.
    EXPECT_GE(distinct_tags.size(), 3u) << fmt::format("{}", fmt::join(distinct_tags, " "));
    predictions = path("predicted.jsonl");
    testing::write_bytes(predictions, jsonl);
  }
  fs::path tokens;
  if (with_tokens) {
    tokens = path("tokens.jsonl");
    testing::write_bertft_tokens("--model " + model.string() + " --max-length " +
                                     std::to_string(c.max_len) +
                                     (c.checker == "qa" ? " --truncation only_second" : ""),
                                 texts, tokens);
  }

  if (c.checker == "multi_label") {
    const auto report = testing::run_hf_script(
        "hf_multi_label.py", model.string() + " " + texts.string() + " " + tokens.string(),
        dir_.path());
    ASSERT_TRUE(report.contains("results")) << report.dump(1);
    EXPECT_EQ(report["model_class"], c.architecture);
    EXPECT_EQ(report["problem_type"], "multi_label_classification");
    EXPECT_EQ(report["labels"], json({"animal", "place", "weather"}));  // as bertft's below
    for (const auto* key : {"missing_keys", "unexpected_keys", "mismatched_keys"})
      EXPECT_TRUE(report["loading_info"].value(key, json::array()).empty()) << report.dump(1);
    const auto ours = testing::json_lines(read_file(predictions));
    const auto gold = testing::json_lines(read_file(texts));
    ASSERT_EQ(ours.size(), static_cast<size_t>(n));
    ASSERT_EQ(report["results"].size(), ours.size());
    // The same texts on the command line, scored as HF's pipeline scores them.
    std::string raw_lines;
    for (const auto& line : gold) raw_lines += line["text"].get<std::string>() + "\n";
    testing::write_bytes(path("raw.txt"), raw_lines);
    const auto raw = testing::run_bertft("predict --model " + model.string() + " --text -",
                                         path("predict-text.log"), "", path("raw.txt"));
    ASSERT_EQ(raw.code, 0) << raw.output;
    const auto answers = testing::json_lines(raw.output);
    ASSERT_EQ(answers.size(), ours.size());
    tasks::SequenceClassificationOptions options;
    options.multi_label = true;
    tasks::SequenceClassificationAdapter adapter(options);
    const std::vector<std::string> names = {"animal", "place", "weather"};
    adapter.set_labels(names);
    std::set<std::string> predicted_sets;
    for (size_t i = 0; i < ours.size(); ++i) {
      const auto& hf = report["results"][i];
      EXPECT_EQ(hf["hf_ids"], hf["ids"]) << "input " << i;
      std::set<std::string> set;
      for (const auto& [label, p] : hf["probabilities"].items()) {
        EXPECT_NEAR(ours[i]["probabilities"][label].get<double>(), p.get<double>(), 1e-5)
            << "input " << i << " " << label;
        EXPECT_NEAR(answers[i]["scores"][label].get<double>(), hf["pipeline"][label].get<double>(),
                    1e-5)
            << "input " << i << " " << label;
        if (p.get<double>() > 0.5) set.insert(label);
      }
      EXPECT_EQ(ours[i]["labels"].get<std::set<std::string>>(), set) << "input " << i;
      EXPECT_EQ(answers[i]["labels"], ours[i]["labels"]) << "input " << i;
      predicted_sets.insert(fmt::format("{}", fmt::join(set, ",")));
      // bertft's loss on its own logits against the gold labels: HF's BCEWithLogitsLoss.
      tasks::Batch batch;
      batch.labels = torch::zeros({1, 3});
      for (const auto& label : gold[i]["labels"])
        batch.labels[0][std::find(names.begin(), names.end(), label.get<std::string>()) -
                        names.begin()] = 1.0f;
      const auto logits = torch::tensor(ours[i]["logits"].get<std::vector<float>>()).view({1, 3});
      EXPECT_NEAR(adapter.loss(logits, batch).item<double>(), hf["loss"].get<double>(), 1e-5)
          << "input " << i;
    }
    // One set everywhere would say little about the head.
    EXPECT_GE(predicted_sets.size(), 3u) << fmt::format("{}", fmt::join(predicted_sets, " | "));
    return;
  }
  if (c.checker == "regression") {
    // hf_export_check.py compares labels; a regression's single output is compared here.
    const auto report = testing::run_hf_script(
        "hf_regression.py", model.string() + " " + texts.string() + " " + tokens.string(),
        dir_.path());
    ASSERT_TRUE(report.contains("results")) << report.dump(1);
    EXPECT_EQ(report["model_class"], c.architecture);
    EXPECT_EQ(report["problem_type"], "regression");
    EXPECT_EQ(report["num_labels"], 1);
    for (const auto* key : {"missing_keys", "unexpected_keys", "mismatched_keys"})
      EXPECT_TRUE(report["loading_info"].value(key, json::array()).empty()) << report.dump(1);
    const auto ours = testing::json_lines(read_file(predictions));
    ASSERT_EQ(ours.size(), static_cast<size_t>(n));
    ASSERT_EQ(report["results"].size(), ours.size());
    double low = 1e30, high = -1e30;
    for (size_t i = 0; i < ours.size(); ++i) {
      const auto& hf = report["results"][i];
      EXPECT_EQ(hf["hf_ids"], hf["ids"]) << "input " << i;
      const double score = ours[i]["score"];
      EXPECT_NEAR(score, hf["score"].get<double>(), 1e-5) << "input " << i;
      low = std::min(low, score);
      high = std::max(high, score);
    }
    // One score everywhere would say little about the head.
    EXPECT_GT(high - low, 0.1) << low << " .. " << high;
    return;
  }
  const json report = testing::run_hf_export_check(
      fmt::format("{} {} {} {} --max-len {}{}", c.checker, model.string(), examples.string(),
                  predictions.string(), c.max_len,
                  tokens.empty() ? "" : " --bertft-tok " + tokens.string()),
      dir_.path());
  testing::expect_hf_agrees(report, c.architecture, n, with_tokens);
}

INSTANTIATE_TEST_SUITE_P(
    Heads,
    HfExportTest,
    ::testing::Values(
        HeadCase{"sst2", "seqcls", "BertForSequenceClassification",
                 "{type: sequence_classification, max_seq_length: 64}", 64},
        HeadCase{"mrpc", "seqcls", "BertForSequenceClassification",
                 "{type: sequence_classification, max_seq_length: 128}", 128},
        HeadCase{"stsb", "regression", "BertForSequenceClassification",
                 "{type: sequence_classification, max_seq_length: 128}", 128, 40},
        HeadCase{"multilabel", "multi_label", "BertForSequenceClassification",
                 "{type: sequence_classification, multi_label: true, max_seq_length: 32}", 32, 30},
        HeadCase{"conll", "tokcls", "BertForTokenClassification",
                 "{type: token_classification, max_seq_length: 128, document_context: false}", 128},
        HeadCase{"squad", "qa", "BertForQuestionAnswering",
                 "{type: question_answering, max_seq_length: 384}", 384},
        HeadCase{"swag", "mc", "BertForMultipleChoice",
                 "{type: multiple_choice, max_seq_length: 64}", 64}),
    [](const ::testing::TestParamInfo<HeadCase>& info) { return info.param.name; });

}  // namespace
}  // namespace bert
