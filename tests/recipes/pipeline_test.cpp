#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 keeps it there only)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "bert/checkpoint/pretrained_dir.h"
#include "bert/common/file_util.h"
#include "bert/tokenizer/factory.h"
#include "recipes/runner/export.h"
#include "tasks/token_classification/entities.h"
#include "tests/support/predict_log.h"
#include "tests/support/test_support.h"

namespace bert {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

/// A task model of the HF fixture (config.json + model.safetensors, saved by transformers) with a
/// made-up uncased vocabulary of its 99 ids, so that raw text can reach it: [PAD] [UNK] [CLS]
/// [SEP] [MASK], then `tokens`, then w<id> up to id 98.
fs::path model_with_vocab(const std::string& model,
                          const fs::path& out,
                          const std::vector<std::string>& tokens = {}) {
  const auto from = testing::hf_fixture_dir() / "models" / model;
  fs::create_directories(out);
  fs::copy_file(from / "config.json", out / "config.json");
  fs::copy_file(from / "model.safetensors", out / "model.safetensors");
  std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
  for (const auto& t : tokens) vocab += t + "\n";
  for (auto i = 5 + tokens.size(); i < 99; ++i) vocab += "w" + std::to_string(i) + "\n";
  testing::write_bytes(out / "vocab.txt", vocab);
  testing::write_bytes(out / "tokenizer_config.json", R"({"do_lower_case": true})");
  return out;
}

/// `labels` as the id2label and label2id of `dir`'s config.json.
void set_labels(const fs::path& dir, const std::vector<std::string>& labels) {
  auto config = json::parse(read_file(dir / "config.json"));
  config["id2label"] = json::object();
  config["label2id"] = json::object();
  for (size_t i = 0; i < labels.size(); ++i) {
    config["id2label"][std::to_string(i)] = labels[i];
    config["label2id"][labels[i]] = i;
  }
  testing::write_bytes(dir / "config.json", config.dump(2));
}

/// CoNLL-2003's nine labels.
const std::vector<std::string> kConllLabels = {"O",     "B-PER", "I-PER",  "B-ORG", "I-ORG",
                                               "B-LOC", "I-LOC", "B-MISC", "I-MISC"};

/// The fixture's token classifier (tokcls9) with `labels` (kConllLabels by default) in place of
/// LABEL_0..8 and model_with_vocab's vocabulary.
fs::path ner_model(const fs::path& out,
                   const std::vector<std::string>& tokens = {},
                   const std::vector<std::string>& labels = kConllLabels) {
  const auto dir = model_with_vocab("tokcls9", out, tokens);
  set_labels(dir, labels);
  return dir;
}

class PipelineTest : public testing::SeededTest {
 protected:
  /// What `predict --data` prints for `contents` written to `name`: the reference the raw-text
  /// paths must reproduce.
  std::vector<json> predict_data(const std::string& model,
                                 const std::string& name,
                                 const std::string& contents) {
    testing::write_bytes(dir_.path() / name, contents);
    const auto run = testing::run_bertft(
        "predict --logits --model " + model + " --data " + (dir_.path() / name).string(),
        dir_.path() / (name + ".log"));
    EXPECT_EQ(run.code, 0) << run.output;
    return testing::json_lines(run.output);
  }
  /// The JSON lines of `bertft predict <args>` (stdin from `input`), which must succeed (log:
  /// `name`.log).
  std::vector<json> predict(const std::string& args,
                            const std::string& name,
                            const fs::path& input = "/dev/null") {
    const auto run =
        testing::run_bertft("predict " + args, dir_.path() / (name + ".log"), "", input);
    EXPECT_EQ(run.code, 0) << run.output;
    return testing::json_lines(run.output);
  }

  /// bertft's entities on `texts` with each aggregation strategy are HF's (below).
  void expect_hfs_entities(const fs::path& model, const std::vector<std::string>& texts);

  testing::TempDir dir_;
};

// Raw text gives what `predict --data` gives for the same input, as {"label", "score"}.
TEST_F(PipelineTest, ClassificationOnRawTextMatchesTheDataPath) {
  BERTFT_REQUIRE_PATH(testing::hf_fixture_dir() / "models" / "seqcls3" / "model.safetensors");
  const auto model = model_with_vocab("seqcls3", dir_.path() / "m").string();
  const auto want = predict_data(model, "in.jsonl",
                                 R"({"text": "w7 w9 W11 w40", "text_pair": "w12 w13"})"
                                 "\n"
                                 R"({"text": "w50 w60"})"
                                 "\n");
  ASSERT_EQ(want.size(), 2u);
  // Gold labels that are not the model's (its are LABEL_0..2) leave the file unscored with a
  // warning; the predictions are the same (it was an error, and nothing was predicted).
  const auto foreign = testing::run_bertft("predict --logits --model " + model + " --data " +
                                               (dir_.path() / "in.jsonl").string() + " --out " +
                                               (dir_.path() / "foreign.jsonl").string(),
                                           dir_.path() / "foreign.log");
  testing::write_bytes(dir_.path() / "labelled.jsonl",
                       R"({"text": "w7 w9 W11 w40", "text_pair": "w12 w13", "label": "LABEL_1"})"
                       "\n"
                       R"({"text": "w50 w60", "label": "maybe"})"
                       "\n");
  const auto labelled = testing::run_bertft(
      "predict --logits --model " + model + " --data " + (dir_.path() / "labelled.jsonl").string() +
          " --out " + (dir_.path() / "labelled_out.jsonl").string(),
      dir_.path() / "labelled.log");
  ASSERT_EQ(labelled.code, 0) << labelled.output;
  EXPECT_NE(labelled.output.find("labelled.jsonl:2: label 'maybe' is not one of the model's "
                                 "labels (LABEL_0, LABEL_1, LABEL_2): the predictions are not "
                                 "scored against the file's labels"),
            std::string::npos)
      << labelled.output;
  EXPECT_EQ(labelled.output.find("gold labels found"), std::string::npos) << labelled.output;
  ASSERT_EQ(foreign.code, 0) << foreign.output;
  EXPECT_EQ(read_file(dir_.path() / "labelled_out.jsonl"),
            read_file(dir_.path() / "foreign.jsonl"));
  // A label on some lines only: the same predictions, unscored, the count and first line said.
  testing::write_bytes(dir_.path() / "partial.jsonl",
                       R"({"text": "w7 w9 W11 w40", "text_pair": "w12 w13", "label": "LABEL_1"})"
                       "\n"
                       R"({"text": "w50 w60"})"
                       "\n");
  const auto partial = testing::run_bertft(
      "predict --logits --model " + model + " --data " + (dir_.path() / "partial.jsonl").string() +
          " --out " + (dir_.path() / "partial_out.jsonl").string(),
      dir_.path() / "partial.log");
  ASSERT_EQ(partial.code, 0) << partial.output;
  EXPECT_NE(partial.output.find("1 of 2 examples have no gold label (the first: " +
                                (dir_.path() / "partial.jsonl").string() +
                                ":2: example '1'): the predictions are not scored"),
            std::string::npos)
      << partial.output;
  EXPECT_EQ(partial.output.find("gold labels found"), std::string::npos) << partial.output;
  EXPECT_EQ(foreign.output.find("have no gold label"), std::string::npos) << foreign.output;
  EXPECT_EQ(read_file(dir_.path() / "partial_out.jsonl"), read_file(dir_.path() / "foreign.jsonl"));

  const std::string pair = " --text 'w7 w9 W11 w40' --text-pair 'w12 w13'";
  const auto got = predict("--model " + model + pair, "one");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["label"], want[0]["label"]);
  EXPECT_NEAR(got[0]["score"].get<double>(), want[0]["probability"].get<double>(), 1e-9);
  EXPECT_EQ(got[0]["text_pair"], "w12 w13");
  EXPECT_FALSE(got[0].contains("logits")) << got[0].dump();
  // --logits: the raw scores --data gives.
  const auto with_logits = predict("--logits --model " + model + pair, "raw");
  ASSERT_EQ(with_logits.size(), 1u);
  ASSERT_EQ(with_logits[0]["logits"].size(), 3u) << with_logits[0].dump();
  for (size_t c = 0; c < 3; ++c)
    EXPECT_NEAR(with_logits[0]["logits"][c].get<double>(), want[0]["logits"][c].get<double>(),
                1e-6);  // float rounding: --data ran two texts in one padded batch
  // --targets is for a pre-training model's masks.
  const auto targets = testing::run_bertft(
      "predict --model " + model + " --text 'w7 w9' --targets w10", dir_.path() / "targets.log");
  EXPECT_EQ(targets.code, 2) << targets.output;
  EXPECT_NE(targets.output.find("predict --targets: restricts the candidates"), std::string::npos)
      << targets.output;

  testing::write_bytes(dir_.path() / "stdin.txt", "w7 w9 W11 w40\tw12 w13\n\nw50 w60\n");
  const auto lines = testing::run_bertft("predict --model " + model + " --text -",
                                         dir_.path() / "lines.log", "", dir_.path() / "stdin.txt");
  ASSERT_EQ(lines.code, 0) << lines.output;
  const auto each = testing::json_lines(lines.output);
  ASSERT_EQ(each.size(), 2u) << lines.output;
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(each[i]["label"], want[i]["label"]) << i;
    EXPECT_NEAR(each[i]["score"].get<double>(), want[i]["probability"].get<double>(), 1e-9) << i;
  }
  EXPECT_FALSE(each[1].contains("text_pair"));
  // --logits with a text per line: each line's own scores.
  const auto each_logits =
      predict("--logits --model " + model + " --text -", "lines_logits", dir_.path() / "stdin.txt");
  ASSERT_EQ(each_logits.size(), 2u);
  for (size_t i = 0; i < 2; ++i)
    for (size_t c = 0; c < 3; ++c)
      EXPECT_NEAR(each_logits[i]["logits"][c].get<double>(), want[i]["logits"][c].get<double>(),
                  1e-6)
          << i;
  // --precision int8: the encoder's projections in dynamic int8; the scores stay close.
  const auto int8 = testing::run_bertft("predict --precision int8 --model " + model + " --text -",
                                        dir_.path() / "int8.log", "", dir_.path() / "stdin.txt");
  ASSERT_EQ(int8.code, 0) << int8.output;
  EXPECT_NE(int8.output.find("[predict] int8: 12 encoder projections in dynamic int8"),
            std::string::npos)
      << int8.output;
  const auto rounded = testing::json_lines(int8.output);
  ASSERT_EQ(rounded.size(), 2u) << int8.output;
  for (size_t i = 0; i < 2; ++i)
    EXPECT_NEAR(rounded[i]["score"].get<double>(), each[i]["score"].get<double>(), 0.02) << i;
  // Options of other heads are refused, naming the option.
  for (const auto& [option, message] : std::vector<std::pair<std::string, std::string>>{
           {"--top-k 2", "predict --top-k: candidates of a pre-training model's masks"},
           {"--aggregation simple", "predict --aggregation: how a token classification model's"}}) {
    const auto refused = testing::run_bertft(
        "predict --model " + model + " --text 'w7 w9' " + option, dir_.path() / "refused.log");
    EXPECT_EQ(refused.code, 2) << refused.output;
    EXPECT_NE(refused.output.find(message), std::string::npos) << refused.output;
  }
  // --glue-task names the columns of a GLUE file whose directory does not (here SST-2's
  // unlabelled test layout); the predictions are the JSON lines' above.
  fs::create_directories(dir_.path() / "mine");
  testing::write_bytes(dir_.path() / "mine" / "test.tsv", "index\tsentence\n0\tw50 w60\n");
  const auto glue_lines = predict("--model " + model + " --format glue --glue-task sst2 --data " +
                                      (dir_.path() / "mine" / "test.tsv").string(),
                                  "glue");
  ASSERT_EQ(glue_lines.size(), 1u);
  EXPECT_EQ(glue_lines[0]["label"], want[1]["label"]);
  EXPECT_NEAR(glue_lines[0]["probability"].get<double>(), want[1]["probability"].get<double>(),
              1e-6);

  // --out: the same lines in the file (written whole), nothing on stdout.
  const auto file = dir_.path() / "answers.jsonl";
  const auto to_file =
      testing::run_bertft("predict --model " + model + " --text - --out " + file.string(),
                          dir_.path() / "file.log", "", dir_.path() / "stdin.txt");
  ASSERT_EQ(to_file.code, 0) << to_file.output;
  EXPECT_EQ(to_file.output.find("\"label\""), std::string::npos) << to_file.output;
  EXPECT_EQ(testing::json_lines(read_file(file)), each);
  // A text longer than the model takes is truncated with a warning naming where it came from,
  // not the scratch file it went through.
  std::string longer;
  for (int i = 0; i < 300; ++i) longer += "w7 ";
  testing::write_bytes(dir_.path() / "long.txt", "w50 w60\n" + longer + "\n");
  const auto truncated =
      testing::run_bertft("predict --model " + model + " --text -", dir_.path() / "long.log", "",
                          dir_.path() / "long.txt");
  ASSERT_EQ(truncated.code, 0) << truncated.output;
  EXPECT_NE(truncated.output.find("[task] stdin: 1 of 2 examples were longer than max_seq_length"),
            std::string::npos)
      << truncated.output;
}

// The answer, its character span in the context (past a two-byte character) and its probability.
TEST_F(PipelineTest, QuestionAnsweringGivesTheSpanInCharacters) {
  BERTFT_REQUIRE_PATH(testing::hf_fixture_dir() / "models" / "qa" / "model.safetensors");
  const auto model = model_with_vocab("qa", dir_.path() / "m").string();
  const std::string context = "é w20 w21 w22 w23 w24 w25 w26 w27 w28";
  const std::string question =
      "--model " + model + " --question 'w21 w5' --context '" + context + "'";
  const auto got = predict(question, "qa");
  ASSERT_EQ(got.size(), 1u);
  const auto answer = got[0]["answer"].get<std::string>();
  ASSERT_FALSE(answer.empty()) << got[0].dump();  // a v1.1 model always answers
  const auto start = got[0]["start"].get<int64_t>(), end = got[0]["end"].get<int64_t>();
  // Characters, not bytes: "é" is one character (two bytes) before every other token.
  const std::u32string chars = U"é w20 w21 w22 w23 w24 w25 w26 w27 w28";
  const auto span = [&](const json& from, const json& to) {
    std::string text;
    for (auto i = static_cast<size_t>(from.get<int64_t>()); i < to.get<size_t>(); ++i)
      text += chars[i] == U'é' ? std::string("é") : std::string(1, static_cast<char>(chars[i]));
    return text;
  };
  EXPECT_EQ(span(start, end), answer);
  EXPECT_GT(got[0]["score"].get<double>(), 0.0);
  EXPECT_LE(got[0]["score"].get<double>(), 1.0);

  // The same question through --data answers the same.
  const json squad = {
      {"version", "1.1"},
      {"data",
       {{{"title", "t"},
         {"paragraphs",
          {{{"context", context},
            {"qas", {{{"id", "q"}, {"question", "w21 w5"}, {"answers", json::array()}}}}}}}}}}};
  testing::write_bytes(dir_.path() / "q.json", squad.dump());
  const auto data = testing::run_bertft(
      "predict --model " + model + " --data " + (dir_.path() / "q.json").string(),
      dir_.path() / "data.log");
  ASSERT_EQ(data.code, 0) << data.output;
  EXPECT_NE(data.output.find(json(answer).dump()), std::string::npos) << data.output;

  // --top-k 3: the same answer, and the n-best's first three under "answers", best first, the
  // first of them that answer; spans in characters again. Not for --data.
  const auto top = predict(question + " --top-k 3", "three");
  ASSERT_EQ(top.size(), 1u);
  const auto three = top[0].dump();
  EXPECT_EQ(top[0]["answer"], answer);
  ASSERT_EQ(top[0]["answers"].size(), 3u) << three;
  EXPECT_EQ(top[0]["answers"][0]["answer"], answer) << three;
  EXPECT_EQ(top[0]["answers"][0]["start"], start) << three;
  for (size_t r = 1; r < 3; ++r) {
    const auto& a = top[0]["answers"][r];
    EXPECT_LE(a["score"].get<double>(), top[0]["answers"][r - 1]["score"].get<double>());
    EXPECT_NE(a["answer"], answer) << three;
    EXPECT_EQ(span(a["start"], a["end"]), a["answer"].get<std::string>()) << three;
  }
  EXPECT_FALSE(got[0].contains("answers")) << got[0].dump();
  const auto with_data = testing::run_bertft(
      "predict --top-k 3 --model " + model + " --data " + (dir_.path() / "q.json").string(),
      dir_.path() / "data3.log");
  EXPECT_EQ(with_data.code, 2) << with_data.output;
  EXPECT_NE(with_data.output.find("--top-k: for raw text"), std::string::npos) << with_data.output;
  // A model without bertft_task.yaml takes the task's default lengths within its 64 positions:
  // a context of 100 words is windowed (it ran past the positions at the default 384 and failed).
  std::string longer;
  for (int i = 0; i < 100; ++i) longer += "w" + std::to_string(20 + i % 70) + " ";
  const auto windows = testing::run_bertft(
      "predict --model " + model + " --question 'w21 w5' --context '" + longer + "'",
      dir_.path() / "windows.log");
  ASSERT_EQ(windows.code, 0) << windows.output;
  EXPECT_NE(windows.output.find("config.json: max_seq_length 64 (the model's longest input)"),
            std::string::npos)
      << windows.output;
  EXPECT_NE(windows.output.find("[task] --question and --context: 1 of 1 contexts need several "
                                "windows"),
            std::string::npos)
      << windows.output;
}

// NER on raw text: the words' tags are what `predict --data` gives for the same words in CoNLL
// columns, and every entity's span slices its words out of the text.
TEST_F(PipelineTest, TokenClassificationOnRawTextGroupsTheDataPathsTags) {
  BERTFT_REQUIRE_PATH(testing::hf_fixture_dir() / "models" / "tokcls9" / "model.safetensors");
  // "O" not first: the outside label is found by its name. Here it is the label the model gives
  // most of these words (id 6), and the first one (id 0) is given to some too.
  const std::vector<std::string> labels = {"B-PER", "I-PER", "B-ORG",  "I-ORG", "B-LOC",
                                           "I-LOC", "O",     "B-MISC", "I-MISC"};
  const auto dir = ner_model(dir_.path() / "m", {}, labels);
  const std::string text = "w7 w8, w9 w10 w11 w12 w13 w14 w15 w16 w17 w18";
  const auto run = testing::run_bertft("predict --model " + dir.string() + " --text '" + text + "'",
                                       dir_.path() / "ner.log");
  ASSERT_EQ(run.code, 0) << run.output;
  const auto got = testing::json_lines(run.output);
  ASSERT_EQ(got.size(), 1u) << run.output;
  // Every word of this text is one token of the vocabulary ("," included).
  const auto tokenizer = tok::load_tokenizer(PretrainedDir::find(dir), 99);
  const auto words = tasks::text_subtokens(text, *tokenizer);
  std::string conll;
  for (size_t w = 0; w < words.size(); ++w) {
    ASSERT_EQ(words[w].word, w) << words[w].token;
    conll += words[w].token + " O\n";
  }
  testing::write_bytes(dir_.path() / "in.conll", conll + "\n");
  const auto data = testing::run_bertft("predict --model " + dir.string() + " --data " +
                                            (dir_.path() / "in.conll").string() + " --format conll",
                                        dir_.path() / "data.log");
  ASSERT_EQ(data.code, 0) << data.output;
  std::vector<std::string> tags;
  std::istringstream lines(data.output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string x; fields >> x;) f.push_back(x);
    if (f.size() == 3) tags.push_back(f[2]);
  }
  ASSERT_EQ(tags.size(), words.size()) << data.output;
  // The data path's tags as certain one-token words, grouped.
  std::vector<tasks::TokenPrediction> tokens;
  for (size_t w = 0; w < words.size(); ++w) {
    tasks::TokenPrediction t;
    t.token = words[w].token;
    t.word = w;
    t.start = words[w].start;
    t.end = words[w].end;
    t.probabilities.assign(labels.size(), 0.0f);
    t.probabilities[static_cast<size_t>(std::find(labels.begin(), labels.end(), tags[w]) -
                                        labels.begin())] = 1;
    tokens.push_back(std::move(t));
  }
  const auto want =
      tasks::aggregate_entities(tokens, labels, tasks::Aggregation::kFirst, "O", *tokenizer);
  const auto& entities = got[0]["entities"];
  ASSERT_EQ(entities.size(), want.size()) << run.output << "\n" << data.output;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(entities[i]["entity_group"], want[i]["entity_group"]);
    EXPECT_EQ(entities[i]["word"], want[i]["word"]);
    const auto start = entities[i]["start"].get<size_t>(), end = entities[i]["end"].get<size_t>();
    EXPECT_EQ(text.substr(start, end - start), want[i]["word"].get<std::string>());  // ASCII text
    EXPECT_GT(entities[i]["score"].get<double>(), 0.0);
    EXPECT_LE(entities[i]["score"].get<double>(), 1.0);
  }
}

// NER on raw text gives what HF 4.31's token-classification pipeline gives with each
// aggregation strategy (its own post-processing, on HF's logits for bertft's ids and offsets):
// the same entities with the same labels, words, spans and indices, scores within 1e-5.
void PipelineTest::expect_hfs_entities(const fs::path& model,
                                       const std::vector<std::string>& texts) {
  std::string lines, inputs;
  for (const auto& t : texts) {
    lines += t + "\n";
    inputs += json{{"text", t}}.dump() + "\n";
  }
  testing::write_bytes(dir_.path() / "texts.txt", lines);
  testing::write_bytes(dir_.path() / "inputs.jsonl", inputs);
  testing::write_bertft_tokens("--model " + model.string(), dir_.path() / "texts.txt",
                               dir_.path() / "tokens.jsonl");
  const std::vector<std::string> strategies = {"none", "simple", "first", "average", "max"};
  const auto hf = testing::run_hf_script(
      "hf_ner_pipeline.py",
      fmt::format("{} {} {} {}", model.string(), (dir_.path() / "inputs.jsonl").string(),
                  (dir_.path() / "tokens.jsonl").string(), fmt::join(strategies, " ")),
      dir_.path());
  ASSERT_EQ(hf["results"].size(), texts.size()) << hf.dump();
  std::set<std::string> distinct;  // the strategies' answers must not all be one
  for (const auto& strategy : strategies) {
    const auto run = testing::run_bertft(
        "predict --model " + model.string() + " --text - --aggregation " + strategy,
        dir_.path() / (strategy + ".log"), "", dir_.path() / "texts.txt");
    ASSERT_EQ(run.code, 0) << run.output;
    const auto got = testing::json_lines(run.output);
    ASSERT_EQ(got.size(), texts.size()) << run.output;
    for (size_t i = 0; i < texts.size(); ++i) {
      const auto& ours = got[i]["entities"];
      const auto& theirs = hf["results"][i][strategy];
      ASSERT_EQ(ours.size(), theirs.size())
          << strategy << " " << texts[i] << "\nbertft: " << ours.dump()
          << "\nHF: " << theirs.dump();
      for (size_t e = 0; e < ours.size(); ++e) {
        const json& a = ours[e];
        const json& b = theirs[e];
        EXPECT_EQ(a.size(), b.size()) << a.dump() << " " << b.dump();
        for (auto it = b.begin(); it != b.end(); ++it) {
          if (it.key() == "score") {
            EXPECT_NEAR(a.value("score", -1.0), it->get<double>(), 1e-5) << a.dump();
          } else {
            EXPECT_EQ(a.value(it.key(), json()), *it) << strategy << " " << it.key();
          }
        }
      }
      distinct.insert(ours.dump());
    }
  }
  EXPECT_GT(distinct.size(), texts.size() + 2) << "the strategies hardly differ on these texts";
}

TEST_F(PipelineTest, TokenClassificationAggregatesAsHfsPipeline) {
  BERTFT_REQUIRE_PATH(testing::hf_fixture_dir() / "models" / "tokcls9" / "model.safetensors");
  if (!testing::hf_python()) GTEST_SKIP() << "the HF reference kit is not set up";
  // Words of several pieces, punctuation, an unknown word, capitals and an accent.
  const auto dir = ner_model(
      dir_.path() / "m", {".",    ",",   "'",   "-",     "(",      ")",    "the", "met",   "in",
                          "at",   "and", "of",  "new",   "office", "city", "jo",  "##nas", "bren",
                          "##nt", "kir", "##o", "##val", "u",      "s",    "caf", "##e",   "mar",
                          "##ta", "##s", "lin", "##den", "##berg", "x",    "##y"});
  expect_hfs_entities(dir,
                      {"Jonas Brennt met Marta Lindenberg at Kiroval, the U.S. office in New City.",
                       "Café xy ☃ jo-nas (Kiroval) marta's office",
                       "kirval kiroval linden-berg of the new new city in u.s."});
}

/// HF's XxxForTokenClassification fixture of `family` (tests/fixtures/hf_families) with the
/// labels O, B-PER, I-PER, B-LOC, I-LOC and the family's tokenizer (RoBERTa's base files, the
/// shared SentencePiece model for XLM-R), in `out`; empty where the files are absent.
fs::path family_ner_model(const std::string& family, const fs::path& out) {
  const auto from = fs::path(BERTFT_SOURCE_DIR) / "tests" / "fixtures" / "hf_families" / family;
  const auto spm =
      testing::shared_dir() / "data" / "sentencepiece" / "transformers_test_sentencepiece.model";
  if (!fs::exists(from / "models" / "tokcls5" / "model.safetensors") ||
      (family == "xlm-roberta" && !fs::exists(spm)))
    return {};
  fs::create_directories(out);
  for (const char* f : {"config.json", "model.safetensors"})
    fs::copy_file(from / "models" / "tokcls5" / f, out / f);
  if (family == "xlm-roberta")
    fs::copy_file(spm, out / "sentencepiece.bpe.model");
  else
    for (const char* f : {"vocab.json", "merges.txt", "tokenizer_config.json"})
      fs::copy_file(from / "models" / "base" / f, out / f);
  set_labels(out, {"O", "B-PER", "I-PER", "B-LOC", "I-LOC"});
  return out;
}

// RoBERTa's tokenizer marks no sub-word, so HF's pipeline tokenizes the text whole and groups
// words by its space heuristic ("U.S." and "ruto's" one word each, the text's words with their
// spaces); bertft must give its entities too (HF's RobertaForTokenClassification fixture).
TEST_F(PipelineTest, RobertaTokenClassificationAggregatesAsHfsPipeline) {
  if (!testing::hf_python()) GTEST_SKIP() << "the HF reference kit is not set up";
  const auto dir = family_ner_model("roberta", dir_.path() / "m");
  if (dir.empty()) GTEST_SKIP() << "the RoBERTa fixture is absent";
  expect_hfs_entities(
      dir, {"kalo mine U.S. ruto's sa-vipo (zean) popo", "Kane  elel.kalo, mine zean\u00e9 vipo",
            "sa sa popo kane's elel ruto kalo"});
}

// XLM-R's SentencePiece pieces have no sub-word mark either, and their spans take the space
// before them: the same heuristic, and the entities' words through the Metaspace decoder.
TEST_F(PipelineTest, XlmRobertaTokenClassificationAggregatesAsHfsPipeline) {
  if (!testing::hf_python()) GTEST_SKIP() << "the HF reference kit is not set up";
  const auto dir = family_ner_model("xlm-roberta", dir_.path() / "m");
  if (dir.empty()) GTEST_SKIP() << "the XLM-R fixture or the shared SentencePiece model is absent";
  expect_hfs_entities(
      dir, {"This is a test of New York, U.S. and falsé \u2603 words.",
            "Text  with two spaces: I was born in 92000.", "it's the end (of it) for them"});
}

// Each raw text is its own document: a model trained with document context (CoNLL-2003's
// recipe) does not take the other stdin lines as context, so a line's entities are those it
// gets alone, as HF's pipeline takes each text.
TEST_F(PipelineTest, TokenClassificationTakesEachRawTextAlone) {
  BERTFT_REQUIRE_PATH(testing::hf_fixture_dir() / "models" / "tokcls9" / "model.safetensors");
  const auto dir = ner_model(dir_.path() / "m");
  testing::write_bytes(dir / "bertft_task.yaml",
                       "task:\n  type: token_classification\n  document_context: true\n");
  const std::vector<std::string> texts = {"w7 w8 w9 w10", "w11 w12 w13 w14 w15 w16 w17"};
  // A line of spaces between them: no entity, as HF's pipeline gives for it (it was an error that
  // ended the whole batch).
  testing::write_bytes(dir_.path() / "lines.txt", texts[0] + "\n   \n" + texts[1] + "\n");
  const auto run =
      testing::run_bertft("predict --aggregation none --model " + dir.string() + " --text -",
                          dir_.path() / "lines.log", "", dir_.path() / "lines.txt");
  ASSERT_EQ(run.code, 0) << run.output;
  auto together = testing::json_lines(run.output);
  ASSERT_EQ(together.size(), 3u) << run.output;
  EXPECT_EQ(together[1], json({{"text", "   "}, {"entities", json::array()}})) << run.output;
  together.erase(together.begin() + 1);
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto alone =
        predict("--aggregation none --model " + dir.string() + " --text '" + texts[i] + "'",
                "alone" + std::to_string(i));
    ASSERT_EQ(alone.size(), 1u);
    const auto& a = alone[0]["entities"];
    const auto& b = together[i]["entities"];
    ASSERT_EQ(a.size(), b.size()) << a.dump() << "\n" << b.dump();
    ASSERT_FALSE(a.empty()) << "no sub-token labelled: nothing compared";
    for (size_t e = 0; e < a.size(); ++e) {
      EXPECT_EQ(a[e]["entity"], b[e]["entity"]);
      EXPECT_NEAR(a[e]["score"].get<double>(), b[e]["score"].get<double>(), 1e-6);
    }
  }
}

// A data file whose columns have other names, or no header row, is read with --column
// ROLE=COLUMN (and --no-header), a recipe's columns: on the command line; predict had no way to
// name them and told the user of a recipe key.
TEST_F(PipelineTest, DataColumnsAreNamedOnTheCommandLine) {
  BERTFT_REQUIRE_PATH(testing::hf_fixture_dir() / "models" / "seqcls3" / "model.safetensors");
  const auto model = model_with_vocab("seqcls3", dir_.path() / "m").string();
  const auto want = predict_data(model, "in.jsonl",
                                 R"({"text": "w7 w9 W11 w40", "text_pair": "w12 w13"})"
                                 "\n"
                                 R"({"text": "w50 w60", "text_pair": "w8"})"
                                 "\n");
  ASSERT_EQ(want.size(), 2u);
  testing::write_bytes(dir_.path() / "named.csv",
                       "first,second,key\nw7 w9 W11 w40,w12 w13,a\nw50 w60,w8,b\n");
  testing::write_bytes(dir_.path() / "bare.tsv", "a\tw12 w13\tw7 w9 W11 w40\nb\tw8\tw50 w60\n");
  for (const auto& [file, options] : std::vector<std::pair<std::string, std::string>>{
           {"named.csv", "--column text_a=first --column text_b=second --column id=key"},
           {"bare.tsv", "--no-header --column text_a=2 --column text_b=1 --column id=0"}}) {
    const auto got = predict(
        "--logits --model " + model + " --data " + (dir_.path() / file).string() + " " + options,
        file);
    ASSERT_EQ(got.size(), 2u) << file;
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(got[i]["id"], i == 0 ? "a" : "b") << file;
      EXPECT_EQ(got[i]["label"], want[i]["label"]) << file;
      EXPECT_NEAR(got[i]["probability"].get<double>(), want[i]["probability"].get<double>(), 1e-6)
          << file;
    }
  }
  // Without them, the message says how; a malformed --column and an unknown role are named.
  for (const auto& [options, code, message] :
       std::vector<std::tuple<std::string, int, std::string>>{
           {"", 1,
            "named.csv: no text column (text_a | text | sentence | sentence1); name it with "
            "columns: {text_a: <column>} (on the command line --column text_a=<column>)"},
           {"--column text_a", 2, "--column 'text_a': expected ROLE=COLUMN (e.g. text_a=review)"},
           {"--column text_a=first --column text_a=second", 2,
            "--column 'text_a=second': role 'text_a' given twice"},
           {"--column sentence=first", 2,
            "named.csv: columns: unknown role 'sentence' (valid: text_a, text_b, label, labels, "
            "id)"}}) {
    const auto run = testing::run_bertft("predict --model " + model + " --data " +
                                             (dir_.path() / "named.csv").string() + " " + options,
                                         dir_.path() / "bad.log");
    EXPECT_EQ(run.code, code) << options << "\n" << run.output;
    EXPECT_NE(run.output.find(message), std::string::npos) << options << "\n" << run.output;
  }
  // embed reads its table the same way; a .txt file is lines, so --column there is refused.
  const auto embed = testing::run_bertft("embed --model " + model + " --data " +
                                             (dir_.path() / "bare.tsv").string() +
                                             " --no-header --column text_a=2 --column id=0 --out " +
                                             (dir_.path() / "e.safetensors").string(),
                                         dir_.path() / "embed.log");
  ASSERT_EQ(embed.code, 0) << embed.output;
  EXPECT_NE(embed.output.find("[embed] 2 texts"), std::string::npos) << embed.output;
  testing::write_bytes(dir_.path() / "lines.txt", "w7 w9\n");
  const auto lines = testing::run_bertft(
      "embed --model " + model + " --data " + (dir_.path() / "lines.txt").string() +
          " --column text_a=0 --out " + (dir_.path() / "l.safetensors").string(),
      dir_.path() / "lines.log");
  EXPECT_EQ(lines.code, 2) << lines.output;
  EXPECT_NE(lines.output.find("lines.txt: a .txt file is read as lines, one text each, without "
                              "columns"),
            std::string::npos)
      << lines.output;
}

// Multiple choice on raw text picks what `predict --data` picks for the same context and choices.
TEST_F(PipelineTest, MultipleChoiceOnRawTextMatchesTheDataPath) {
  BERTFT_REQUIRE_PATH(testing::hf_fixture_dir() / "models" / "mc2" / "model.safetensors");
  const auto model = model_with_vocab("mc2", dir_.path() / "m").string();
  const auto want =
      predict_data(model, "in.jsonl",
                   R"({"context": "w7 w8 w9", "ending0": "w10 w11", "ending1": "w30 w31 w32"})"
                   "\n");
  ASSERT_EQ(want.size(), 1u);
  const auto run = testing::run_bertft("predict --logits --model " + model +
                                           " --text 'w7 w8 w9' --choice 'w10 w11' --choice 'w30 "
                                           "w31 w32'",
                                       dir_.path() / "mc.log");
  ASSERT_EQ(run.code, 0) << run.output;
  const auto got = testing::json_lines(run.output);
  ASSERT_EQ(got.size(), 1u) << run.output;
  EXPECT_EQ(got[0]["choice"], want[0]["label"]);
  EXPECT_EQ(got[0]["choice_text"], got[0]["choice"] == 0 ? "w10 w11" : "w30 w31 w32");
  EXPECT_NEAR(got[0]["score"].get<double>(), want[0]["probability"].get<double>(), 1e-9);
  ASSERT_EQ(got[0]["logits"].size(), 2u) << run.output;
  for (size_t c = 0; c < 2; ++c)
    EXPECT_NEAR(got[0]["logits"][c].get<double>(), want[0]["logits"][c].get<double>(), 1e-6);
  const auto one = testing::run_bertft("predict --model " + model + " --text 'w7' --choice 'w10'",
                                       dir_.path() / "one.log");
  EXPECT_EQ(one.code, 2) << one.output;
}

// score --task multiple_choice reads the file `predict --data` wrote: its accuracy is the share
// of predicted choices equal to the gold ones, as predict found it; a prediction that is no
// choice index is named.
TEST_F(PipelineTest, MultipleChoiceScoreReadsWhatPredictWrote) {
  BERTFT_REQUIRE_PATH(testing::hf_fixture_dir() / "models" / "mc2" / "model.safetensors");
  const auto model = model_with_vocab("mc2", dir_.path() / "m").string();
  std::string examples;
  for (int i = 0; i < 6; ++i)
    examples += json{{"id", "q" + std::to_string(i)},
                     {"context", fmt::format("w{} w{}", 7 + i, 20 + i)},
                     {"ending0", fmt::format("w{} w{}", 30 + i, 40 + i)},
                     {"ending1", fmt::format("w{}", 50 + 3 * i)},
                     {"label", i % 2}}
                    .dump() +
                "\n";
  const auto data = dir_.path() / "mc.jsonl", out = dir_.path() / "mc_pred.jsonl";
  testing::write_bytes(data, examples);
  const auto run = testing::run_bertft(
      "predict --model " + model + " --data " + data.string() + " --out " + out.string(),
      dir_.path() / "predict.log");
  ASSERT_EQ(run.code, 0) << run.output;
  const auto predictions = testing::json_lines(read_file(out));
  ASSERT_EQ(predictions.size(), 6u);
  int right = 0;
  for (int i = 0; i < 6; ++i) right += predictions[static_cast<size_t>(i)]["label"] == i % 2;
  const auto score = [&](const fs::path& file) {
    return testing::run_bertft(
        "score --task multiple_choice --data " + data.string() + " --predictions " + file.string(),
        dir_.path() / "score.log");
  };
  const auto scored = score(out);
  ASSERT_EQ(scored.code, 0) << scored.output;
  const auto metrics = json::parse(scored.output.substr(scored.output.find('{')));
  EXPECT_EQ(metrics["examples"], 6);
  EXPECT_DOUBLE_EQ(metrics["accuracy"].get<double>(), right / 6.0) << scored.output;
  EXPECT_DOUBLE_EQ(testing::gold_metrics(run.output)["accuracy"].get<double>(), right / 6.0);
  testing::write_bytes(dir_.path() / "bad.txt", "0\n1\nfirst\n0\n1\n0\n");
  const auto bad = score(dir_.path() / "bad.txt");
  EXPECT_EQ(bad.code, 1) << bad.output;
  EXPECT_NE(bad.output.find("'first' is not a number"), std::string::npos) << bad.output;
}

TEST_F(PipelineTest, RawTextNeedsAModelThatTakesIt) {
  BERTFT_REQUIRE_PATH(testing::hf_fixture_dir() / "models" / "qa" / "model.safetensors");
  const auto model = model_with_vocab("qa", dir_.path() / "m").string();
  const auto run =
      testing::run_bertft("predict --model " + model + " --text 'w5 w6'", dir_.path() / "bad.log");
  EXPECT_EQ(run.code, 2) << run.output;
  EXPECT_NE(run.output.find("--question"), std::string::npos) << run.output;
  const auto none = testing::run_bertft("predict --model " + model, dir_.path() / "none.log");
  EXPECT_EQ(none.code, 2) << none.output;
}

// An HF multi-label classifier (problem_type multi_label_classification, no bertft_task.yaml)
// is read as one: each label scored by its own sigmoid, as HF's text-classification pipeline
// scores such a model, the labels over 0.5 given; read as one softmax its scores were wrong.
TEST_F(PipelineTest, MultiLabelClassifiersScoreEachLabelWithASigmoid) {
  BERTFT_REQUIRE_PATH(testing::hf_fixture_dir() / "models" / "seqcls3" / "model.safetensors");
  const auto model = model_with_vocab("seqcls3", dir_.path() / "m");
  auto config = json::parse(read_file(model / "config.json"));
  config["problem_type"] = "multi_label_classification";
  testing::write_bytes(model / "config.json", config.dump());
  const auto run = testing::run_bertft(
      "predict --model " + model.string() + " --text 'w7 w9' --logits", dir_.path() / "multi.log");
  ASSERT_EQ(run.code, 0) << run.output;
  const auto lines = testing::json_lines(run.output);
  ASSERT_EQ(lines.size(), 1u) << run.output;
  const auto& out = lines[0];
  EXPECT_FALSE(out.contains("label")) << out.dump();
  const auto names = config["id2label"];
  ASSERT_EQ(out["logits"].size(), names.size()) << out.dump();
  ASSERT_EQ(out["scores"].size(), names.size()) << out.dump();
  json over = json::array();
  double sum = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const auto name = names[std::to_string(i)].get<std::string>();
    const double p = 1 / (1 + std::exp(-out["logits"][i].get<double>()));
    EXPECT_NEAR(out["scores"][name].get<double>(), p, 1e-6) << name;
    if (p > 0.5) over.push_back(name);
    sum += p;
  }
  EXPECT_EQ(out["labels"], over);
  EXPECT_GT(std::abs(sum - 1), 1e-3) << "the scores of one softmax";
  const auto inspected =
      testing::run_bertft("inspect " + model.string(), dir_.path() / "inspect.log");
  EXPECT_EQ(inspected.code, 0) << inspected.output;
  EXPECT_NE(inspected.output.find(
                "loaded as  BertForSequenceClassification (multi_label_classification)"),
            std::string::npos)
      << inspected.output;
}

// Raw text that is not UTF-8 (from an option or a stdin line) is a data error naming where it
// came from, with no prediction printed: it could be neither tokenized nor echoed as JSON.
TEST_F(PipelineTest, RawTextThatIsNotUtf8IsNamed) {
  BERTFT_REQUIRE_PATH(testing::hf_fixture_dir() / "models" / "seqcls3" / "model.safetensors");
  const auto model = model_with_vocab("seqcls3", dir_.path() / "m").string();
  const auto expect_error = [&](const std::string& args, const std::string& where,
                                const fs::path& input) {
    const auto run = testing::run_bertft("predict --model " + model + " " + args,
                                         dir_.path() / "bad.log", "", input);
    EXPECT_EQ(run.code, 1) << args << "\n" << run.output;
    EXPECT_NE(run.output.find(where + ": invalid UTF-8 at byte 3 (0xFF)"), std::string::npos)
        << args << "\n"
        << run.output;
    EXPECT_TRUE(testing::json_lines(run.output).empty()) << run.output;
  };
  expect_error("--text 'w7 \xFFw9'", "--text", "/dev/null");
  expect_error("--text 'w7' --text-pair 'w8 \xFF'", "--text-pair", "/dev/null");
  testing::write_bytes(dir_.path() / "stdin.txt", "w7 w9\n\nw8 \xFF\n");
  expect_error("--text -", "<stdin>:3", dir_.path() / "stdin.txt");

  BERTFT_REQUIRE_PATH(testing::hf_fixture_dir() / "models" / "qa" / "model.safetensors");
  const auto qa = model_with_vocab("qa", dir_.path() / "qa").string();
  const auto run = testing::run_bertft(
      "predict --model " + qa + " --question 'w21' --context 'w20 \xC3('", dir_.path() / "qa.log");
  EXPECT_EQ(run.code, 1) << run.output;
  EXPECT_NE(run.output.find("--context: invalid UTF-8 at byte 4 (0xC3)"), std::string::npos)
      << run.output;
}

}  // namespace
}  // namespace bert
