// Inputs built to break a parser (issue 14's crash classes: deep nesting, long chains, huge
// sizes, bad types): each must end in exit 1 or 2 with one line naming the file and what is
// wrong, no C++ backtrace, within a 4 GiB address-space limit.
#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "bert/checkpoint/pretrained_dir.h"
#include "bert/common/file_util.h"
#include "tests/support/test_support.h"

namespace bert::recipes {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string nested(size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

class HostileInputTest : public ::testing::Test {
 protected:
  /// bertft under a 4 GiB address-space limit.
  testing::BertftRun bertft(const std::string& args, const std::string& stdin_text = "") {
    std::string env = "ulimit -v 4194304;";
    if (!stdin_text.empty()) {
      testing::write_bytes(dir_.path() / "stdin.txt", stdin_text);
      return testing::run_bertft(args, dir_.path() / "cli.log", env, dir_.path() / "stdin.txt");
    }
    return testing::run_bertft(args, dir_.path() / "cli.log", env);
  }
  /// Exit `code`, exactly one line of output, containing every one of `parts`, no backtrace.
  static void expect_one_line(const testing::BertftRun& run,
                              int code,
                              const std::vector<std::string>& parts) {
    EXPECT_EQ(run.code, code) << run.output;
    EXPECT_EQ(std::count(run.output.begin(), run.output.end(), '\n'), 1) << run.output;
    EXPECT_EQ(run.output.find("Exception raised from"), std::string::npos) << run.output;
    for (const auto& part : parts) EXPECT_NE(run.output.find(part), std::string::npos) << part;
  }
  /// A model directory: config.json (the tiny test config unless `config` is given) and
  /// `weights_name` holding `weights`.
  fs::path model_dir(const std::string& weights_name,
                     const std::string& weights,
                     const std::string& config = "") {
    const auto dir = dir_.path() / "model";
    fs::create_directories(dir);
    testing::write_bytes(dir / "config.json",
                         config.empty() ? testing::tiny_config().to_json().dump() : config);
    testing::write_bytes(dir / weights_name, weights);
    return dir;
  }
  static std::string torch_zip(const std::string& pickle, size_t padding = 0) {
    std::string zip;
    caffe2::serialize::PyTorchStreamWriter writer([&zip](const void* bytes, size_t n) {
      zip.append(static_cast<const char*>(bytes), n);
      return n;
    });
    writer.writeRecord("data.pkl", pickle.data(), pickle.size());
    const std::string pad(padding, '\0');
    if (padding > 0) writer.writeRecord("data/pad", pad.data(), pad.size());
    writer.writeEndOfFile();
    return zip;
  }
  /// dev.json: SQuAD `version` (none where empty) with one paragraph, "Alpha beta.", asked `qas`.
  void write_squad(const json& qas, const std::string& version = "v2.0") {
    json squad = {
        {"data", {{{"title", "T"}, {"paragraphs", {{{"context", "Alpha beta."}, {"qas", qas}}}}}}}};
    if (!version.empty()) squad["version"] = version;
    testing::write_bytes(dir_.path() / "dev.json", squad.dump());
  }
  testing::TempDir dir_;
};

TEST_F(HostileInputTest, DeeplyNestedJsonInConfigIsAParseErrorNotAStackOverflow) {
  const auto dir =
      model_dir("model.safetensors", "", R"({"vocab_size": 99, "extra": )" + nested(100000) + "}");
  expect_one_line(bertft("inspect " + dir.string()), 2,
                  {"config.json: invalid JSON", "nested deeper than 128 levels"});
  // The same depth as the value of a typed key, whose error message would print it.
  testing::write_bytes(dir / "config.json", R"({"vocab_size": )" + nested(100000) + "}");
  expect_one_line(bertft("inspect " + dir.string()), 2, {"config.json", "nested deeper"});
}

TEST_F(HostileInputTest, DeeplyNestedSafetensorsHeaderIsRefused) {
  const std::string header =
      R"({"a": {"dtype": "F32", "shape": )" + nested(100000) + R"(, "data_offsets": [0, 0]}})";
  std::string bytes(8, '\0');
  for (int k = 0; k < 8; ++k) bytes[k] = static_cast<char>((header.size() >> (8 * k)) & 0xFF);
  const auto dir = model_dir("model.safetensors", bytes + header);
  expect_one_line(bertft("inspect " + dir.string()), 1,
                  {"model.safetensors: header is not valid JSON", "nested deeper"});
}

TEST_F(HostileInputTest, LongPickleChainsAreFreedWithoutRecursion) {
  // NONE, then 100 000 TUPLE1: a tuple nested 100 000 deep.
  const std::string tuples = "\x80\x02N" + std::string(100000, '\x85') + ".";
  const auto dir = model_dir("pytorch_model.bin", torch_zip(tuples));
  expect_one_line(bertft("inspect " + dir.string()), 1,
                  {"pytorch_model.bin: the pickle is not a state dict"});
  // 100 000 empty lists, each APPENDed into the one before: a list chain as deep.
  const std::string lists = "\x80\x02" + std::string(100000, ']') + std::string(99999, 'a') + ".";
  testing::write_bytes(dir / "pytorch_model.bin", torch_zip(lists));
  expect_one_line(bertft("inspect " + dir.string()), 1, {"the pickle is not a state dict"});
}

TEST_F(HostileInputTest, APickleListThatWouldHoldItselfIsRefused) {
  // EMPTY_LIST, MEMOIZE, BINGET 0, APPEND: the list appended to itself.
  const std::string pickle = std::string("\x80\x04]\x94h\x00", 6) + "a.";
  const auto dir = model_dir("pytorch_model.bin", torch_zip(pickle, 70000));
  expect_one_line(bertft("inspect " + dir.string()), 1,
                  {"pytorch_model.bin", "a container would contain itself"});
}

TEST_F(HostileInputTest, AZipRecordClaimingMoreBytesThanTheFileIsRefusedBeforeReading) {
  std::string zip = torch_zip("\x80\x02}.", 70000);
  // The central directory entry of data/pad: its sizes claim 0xFFFFFFFE bytes.
  const auto entry = zip.rfind(std::string("PK\x01\x02", 4));
  ASSERT_NE(entry, std::string::npos);
  for (size_t at : {entry + 20, entry + 24}) zip.replace(at, 4, "\xFE\xFF\xFF\xFF");
  const auto dir = model_dir("pytorch_model.bin", zip);
  expect_one_line(bertft("inspect " + dir.string()), 1,
                  {"pytorch_model.bin: malformed zip archive: record", "claims 4294967294 bytes"});
}

TEST_F(HostileInputTest, HugeConfigSizesAreRefusedBeforeAnythingIsBuilt) {
  auto config = testing::tiny_config().to_json();
  config["num_hidden_layers"] = 1048576;
  const auto dir = model_dir("model.safetensors", "", config.dump());
  expect_one_line(bertft("inspect " + dir.string()), 2,
                  {"config.json: key 'num_hidden_layers': 1048576 is above the supported "
                   "maximum 256"});
  // Within the maxima, but more parameters than the weights file could hold.
  config["num_hidden_layers"] = 200;
  testing::write_bytes(dir / "config.json", config.dump());
  expect_one_line(bertft("inspect " + dir.string()), 1,
                  {"config.json: config.json describes an encoder of", "have 0 bytes"});
}

TEST_F(HostileInputTest, TokenizerLengthsAreBoundedAndBadUtf8NamesItsLine) {
  testing::write_bytes(dir_.path() / "vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\n");
  const auto vocab = (dir_.path() / "vocab.txt").string();
  const auto huge = bertft("tokenize --vocab " + vocab + " --max-length 2147483647 --pad");
  EXPECT_EQ(huge.code, 2) << huge.output;
  EXPECT_NE(huge.output.find("--max-length"), std::string::npos) << huge.output;
  EXPECT_NE(huge.output.find("1048576"), std::string::npos) << huge.output;
  const auto bad = bertft("tokenize --no-casing-check --vocab " + vocab, "a\na\na \xff b\na\n");
  EXPECT_EQ(bad.code, 1) << bad.output;
  EXPECT_NE(bad.output.find("<stdin>:3: "), std::string::npos) << bad.output;
}

TEST_F(HostileInputTest, ASweepAboveTheMaximumIsAConfigurationError) {
  std::string values = "[";
  for (int k = 0; k < 100; ++k) values += (k ? ", " : "") + std::to_string(k + 1);
  values += "]";
  testing::write_bytes(dir_.path() / "r.yaml",
                       "model: {pretrained: m}\ntask: {type: sequence_classification}\n"
                       "data: {train: t.tsv, dev: d.tsv}\nsweep:\n  grid:\n    epochs: " +
                           values + "\n    batch_size: " + values + "\n    max_steps: " + values +
                           "\n  seeds: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n");
  const auto run = bertft("validate " + (dir_.path() / "r.yaml").string());
  EXPECT_EQ(run.code, 2) << run.output;
  EXPECT_NE(run.output.find("r.yaml:6:5: sweep.grid: the grid times the seeds makes more than "
                            "10000 trials"),
            std::string::npos)
      << run.output;
}

TEST_F(HostileInputTest, ASweepGridKeyThatIsNotANameIsAConfigurationError) {
  // Found by fuzz_recipe_yaml: a null key was looked up again by its text and ended the process.
  testing::write_bytes(dir_.path() / "r.yaml",
                       "model: {pretrained: m}\ntask: {type: sequence_classification}\n"
                       "data: {train: t.tsv, dev: d.tsv}\nsweep:\n  grid:\n    : [3]\n");
  const auto run = bertft("validate " + (dir_.path() / "r.yaml").string());
  EXPECT_EQ(run.code, 2) << run.output;
  EXPECT_NE(run.output.find("r.yaml:6:5: sweep.grid: a key must be a name"), std::string::npos)
      << run.output;
}

TEST_F(HostileInputTest, SquadTypeErrorsNameTheFileAndJsonPath) {
  write_squad({{{"id", "q1"},
                {"question", "Which?"},
                {"answers", json::array()},
                {"is_impossible", "yes"}}});
  testing::write_bytes(dir_.path() / "pred.json", R"({"q1": ""})");
  const auto run =
      bertft("score --task question_answering --data " + (dir_.path() / "dev.json").string() +
             " --predictions " + (dir_.path() / "pred.json").string());
  expect_one_line(run, 1,
                  {"dev.json: data[0].paragraphs[0].qas[0]: 'is_impossible' must be true or "
                   "false"});
}

// A SQuAD file without "version" is v1.1, as the official script of v1.1 reads it: exact_match
// and f1 only, no v2.0 split by answerability.
TEST_F(HostileInputTest, SquadWithoutAVersionIsScoredAsV11) {
  write_squad({{{"id", "q1"},
                {"question", "Which?"},
                {"answers", {{{"text", "beta"}, {"answer_start", 6}}}}}},
              "");
  testing::write_bytes(dir_.path() / "pred.json", R"({"q1": "beta"})");
  const auto run =
      bertft("score --task question_answering --data " + (dir_.path() / "dev.json").string() +
             " --predictions " + (dir_.path() / "pred.json").string());
  EXPECT_EQ(run.code, 0) << run.output;
  EXPECT_NE(run.output.find("\"exact_match\""), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("HasAns"), std::string::npos) << run.output;
}

TEST_F(HostileInputTest, ValidNoAnswerProbabilitiesAreReadAndDeepOnesRefused) {
  write_squad(
      {{{"id", "q1"},
        {"question", "Which?"},
        {"answers", {{{"text", "beta"}, {"answer_start", 6}}}},
        {"is_impossible", false}},
       {{"id", "q2"}, {"question", "None?"}, {"answers", json::array()}, {"is_impossible", true}}});
  testing::write_bytes(dir_.path() / "pred.json", R"({"q1": "beta", "q2": "Alpha"})");
  testing::write_bytes(dir_.path() / "na.json", R"({"q1": 0.1, "q2": 0.9})");
  const std::string score = "score --task question_answering --data " +
                            (dir_.path() / "dev.json").string() + " --predictions " +
                            (dir_.path() / "pred.json").string() + " --na-probs " +
                            (dir_.path() / "na.json").string();
  const auto run = bertft(score);
  EXPECT_EQ(run.code, 0) << run.output;
  EXPECT_NE(run.output.find("best_exact"), std::string::npos) << run.output;
  testing::write_bytes(dir_.path() / "na.json", R"({"q1": )" + nested(100000) + "}");
  expect_one_line(bertft(score), 1, {"na.json", "nested deeper than 128 levels"});
}

}  // namespace
}  // namespace bert::recipes
