#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "bert/common/file_util.h"
#include "tests/support/test_support.h"

namespace bert {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

/// A task model of the HF fixture (config.json + model.safetensors, saved by transformers) with a
/// made-up uncased vocabulary of its 99 ids, so that raw text can reach it.
fs::path model_with_vocab(const std::string& model, const fs::path& out) {
  const auto from = testing::hf_fixture_dir() / "models" / model;
  fs::create_directories(out);
  fs::copy_file(from / "config.json", out / "config.json");
  fs::copy_file(from / "model.safetensors", out / "model.safetensors");
  std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
  for (int i = 5; i < 99; ++i) vocab += "w" + std::to_string(i) + "\n";
  testing::write_bytes(out / "vocab.txt", vocab);
  testing::write_bytes(out / "tokenizer_config.json", R"({"do_lower_case": true})");
  return out;
}

std::vector<json> json_lines(const std::string& output) {
  std::vector<json> out;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] == '{') out.push_back(json::parse(line));
  return out;
}

class PipelineTest : public testing::SeededTest {
 protected:
  testing::TempDir dir_;
};

// Raw text gives what `predict --data` gives for the same input, as {"label", "score"}.
TEST_F(PipelineTest, ClassificationOnRawTextMatchesTheDataPath) {
  BERTFT_REQUIRE_PATH(testing::hf_fixture_dir() / "models" / "seqcls3" / "model.safetensors");
  const auto model = model_with_vocab("seqcls3", dir_.path() / "m").string();
  testing::write_bytes(dir_.path() / "in.jsonl",
                       R"({"text": "w7 w9 W11 w40", "text_pair": "w12 w13"})"
                       "\n"
                       R"({"text": "w50 w60"})"
                       "\n");
  const auto reference = testing::run_bertft(
      "predict --model " + model + " --data " + (dir_.path() / "in.jsonl").string(),
      dir_.path() / "ref.log");
  ASSERT_EQ(reference.code, 0) << reference.output;
  const auto want = json_lines(reference.output);
  ASSERT_EQ(want.size(), 2u) << reference.output;

  const auto one = testing::run_bertft(
      "predict --model " + model + " --text 'w7 w9 W11 w40' --text-pair 'w12 w13'",
      dir_.path() / "one.log");
  ASSERT_EQ(one.code, 0) << one.output;
  const auto got = json_lines(one.output);
  ASSERT_EQ(got.size(), 1u) << one.output;
  EXPECT_EQ(got[0]["label"], want[0]["label"]);
  EXPECT_NEAR(got[0]["score"].get<double>(), want[0]["probability"].get<double>(), 1e-9);
  EXPECT_EQ(got[0]["text_pair"], "w12 w13");

  testing::write_bytes(dir_.path() / "stdin.txt", "w7 w9 W11 w40\tw12 w13\n\nw50 w60\n");
  const auto lines = testing::run_bertft("predict --model " + model + " --text -",
                                         dir_.path() / "lines.log", "", dir_.path() / "stdin.txt");
  ASSERT_EQ(lines.code, 0) << lines.output;
  const auto each = json_lines(lines.output);
  ASSERT_EQ(each.size(), 2u) << lines.output;
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(each[i]["label"], want[i]["label"]) << i;
    EXPECT_NEAR(each[i]["score"].get<double>(), want[i]["probability"].get<double>(), 1e-9) << i;
  }
  EXPECT_FALSE(each[1].contains("text_pair"));
}

// The answer, its character span in the context (past a two-byte character) and its probability.
TEST_F(PipelineTest, QuestionAnsweringGivesTheSpanInCharacters) {
  BERTFT_REQUIRE_PATH(testing::hf_fixture_dir() / "models" / "qa" / "model.safetensors");
  const auto model = model_with_vocab("qa", dir_.path() / "m").string();
  const std::string context = "é w20 w21 w22 w23 w24 w25 w26 w27 w28";
  const auto run = testing::run_bertft(
      "predict --model " + model + " --question 'w21 w5' --context '" + context + "'",
      dir_.path() / "qa.log");
  ASSERT_EQ(run.code, 0) << run.output;
  const auto got = json_lines(run.output);
  ASSERT_EQ(got.size(), 1u) << run.output;
  const auto answer = got[0]["answer"].get<std::string>();
  ASSERT_FALSE(answer.empty()) << run.output;  // a v1.1 model always answers
  const auto start = got[0]["start"].get<int64_t>(), end = got[0]["end"].get<int64_t>();
  // Characters, not bytes: "é" is one character (two bytes) before every other token.
  const std::u32string chars = U"é w20 w21 w22 w23 w24 w25 w26 w27 w28";
  std::string span;
  for (int64_t i = start; i < end; ++i)
    span += chars[static_cast<size_t>(i)] == U'é'
                ? std::string("é")
                : std::string(1, static_cast<char>(chars[static_cast<size_t>(i)]));
  EXPECT_EQ(span, answer);
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

}  // namespace
}  // namespace bert
