#include <gtest/gtest.h>

#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/model/bert_config.h"
#include "tests/support/test_support.h"

namespace bert {
namespace {

using json = nlohmann::json;

std::string error_of(const json& j) {
  try {
    BertConfig::from_json(j, "config.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(BertConfigTest, ReadsHfFixtureConfig) {
  const auto path = testing::hf_fixture_dir() / "models" / "seqcls3" / "config.json";
  BERTFT_REQUIRE_PATH(path);
  const auto c = BertConfig::from_file(path);
  // The values the fixture's generator set (its manifest.json), the rest HF's defaults.
  const auto m = nlohmann::json::parse(read_file(testing::hf_fixture_dir() / "manifest.json"));
  const auto& want = m.at("config");
  EXPECT_EQ(c.vocab_size(), want.at("vocab_size").get<int64_t>());
  EXPECT_EQ(c.hidden_size(), want.at("hidden_size").get<int64_t>());
  EXPECT_EQ(c.num_hidden_layers(), want.at("num_hidden_layers").get<int64_t>());
  EXPECT_EQ(c.num_attention_heads(), want.at("num_attention_heads").get<int64_t>());
  EXPECT_EQ(c.intermediate_size(), want.at("intermediate_size").get<int64_t>());
  EXPECT_EQ(c.max_position_embeddings(), want.at("max_position_embeddings").get<int64_t>());
  EXPECT_EQ(c.type_vocab_size(), want.at("type_vocab_size").get<int64_t>());
  EXPECT_DOUBLE_EQ(c.initializer_range(), want.at("initializer_range").get<double>());
  EXPECT_DOUBLE_EQ(c.layer_norm_eps(), want.value("layer_norm_eps", 1e-12));
  EXPECT_EQ(c.hidden_act(), Activation::kGelu);
  EXPECT_EQ(c.id2label(), (std::vector<std::string>{"LABEL_0", "LABEL_1", "LABEL_2"}));
  EXPECT_EQ(c.architectures(), (std::vector<std::string>{"BertForSequenceClassification"}));
  EXPECT_FALSE(c.classifier_dropout().has_value());
}

TEST(BertConfigTest, RoundTripKeepsUnknownKeysAndLabels) {
  json j = {{"vocab_size", 10},        {"hidden_size", 8},
            {"num_hidden_layers", 1},  {"num_attention_heads", 2},
            {"intermediate_size", 16}, {"hidden_act", "gelu_new"},
            {"custom_note", "kept"},   {"id2label", {{"0", "NEG"}, {"1", "POS"}}}};
  const auto c = BertConfig::from_json(j, "config.json");
  const json out = c.to_json();
  EXPECT_EQ(out["custom_note"], "kept");
  EXPECT_EQ(out["hidden_act"], "gelu_new");
  EXPECT_EQ(out["label2id"]["POS"], 1);
  const auto again = BertConfig::from_json(out, "again");
  EXPECT_EQ(again.to_json(), out);
}

TEST(BertConfigTest, UnsupportedValuesNameTheKey) {
  EXPECT_NE(
      error_of({{"hidden_act", "swish"}}).find("key 'hidden_act': unsupported activation 'swish'"),
      std::string::npos);
  EXPECT_NE(
      error_of({{"position_embedding_type", "relative_key"}}).find("key 'position_embedding_type'"),
      std::string::npos);
  EXPECT_NE(error_of({{"is_decoder", true}}).find("key 'is_decoder'"), std::string::npos);
  EXPECT_NE(error_of({{"hidden_size", "768"}}).find("key 'hidden_size': expected an integer"),
            std::string::npos);
  EXPECT_NE(error_of({{"hidden_size", 100}, {"num_attention_heads", 12}}).find("divisible"),
            std::string::npos);
  EXPECT_NE(error_of({{"model_type", "gpt2"}}).find("key 'model_type'"), std::string::npos);
  EXPECT_NE(error_of({{"id2label", {{"0", "A"}, {"2", "C"}}}}).find("without gaps"),
            std::string::npos);
}

TEST(BertConfigTest, ReportsAllProblemsAtOnce) {
  try {
    BertConfig::from_json({{"hidden_act", "swish"}, {"vocab_size", -1}, {"is_decoder", true}},
                          "c.json");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.problems().size(), 2u);  // type/value problems first; validate() runs after
  }
}

TEST(BertConfigTest, InvalidJsonFileNamesTheFile) {
  testing::TempDir dir;
  testing::write_bytes(dir.path() / "config.json", "{\"vocab_size\": 3,");
  try {
    BertConfig::from_file(dir.path() / "config.json");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("config.json: invalid JSON"), std::string::npos);
  }
}

}  // namespace
}  // namespace bert
