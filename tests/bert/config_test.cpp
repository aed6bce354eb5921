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
  EXPECT_NE(error_of({{"pruned_heads", {{"0", {1}}}}})
                .find("key 'pruned_heads': {\"0\":[1]} is unsupported: bertft builds every layer "
                      "with all its heads"),
            std::string::npos);
  EXPECT_NO_THROW(BertConfig::from_json(json{{"vocab_size", 10},
                                             {"hidden_size", 8},
                                             {"num_hidden_layers", 1},
                                             {"num_attention_heads", 2},
                                             {"intermediate_size", 16},
                                             {"pruned_heads", json::object()}},
                                        "config.json"));  // none pruned, as HF writes it
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

// A config.json that leaves keys out gets its family's defaults as transformers 4.31's config
// classes have them, and the parameter count (the checkpoint-size check's) is HF's
// `num_parameters()` of each family's base model at those defaults.
TEST(BertConfigTest, AbsentKeysTakeTheFamilysHfDefaults) {
  const auto of = [](const char* type) {
    return BertConfig::from_json({{"model_type", type}}, "config.json");
  };
  const auto bert = of("bert");
  EXPECT_EQ(bert.vocab_size(), 30522);
  EXPECT_EQ(bert.pad_token_id(), 0);
  EXPECT_EQ(bert.encoder_parameters(), 109482240);  // BertModel(BertConfig())
  const auto roberta = of("roberta");
  EXPECT_EQ(roberta.vocab_size(), 50265);
  EXPECT_EQ(roberta.pad_token_id(), 1);
  EXPECT_EQ(roberta.encoder_parameters(), 124644864);
  const auto xlmr = of("xlm-roberta");
  EXPECT_EQ(xlmr.vocab_size(), 30522);
  EXPECT_EQ(xlmr.pad_token_id(), 1);
  const auto electra = of("electra");
  EXPECT_EQ(electra.embedding_dim(), 128);
  EXPECT_EQ(electra.hidden_size(), 256);
  EXPECT_EQ(electra.num_attention_heads(), 4);
  EXPECT_EQ(electra.intermediate_size(), 1024);
  EXPECT_EQ(electra.num_hidden_layers(), 12);
  EXPECT_EQ(electra.encoder_parameters(), 13483008);
  const auto distil = of("distilbert");
  EXPECT_EQ(distil.num_hidden_layers(), 6);
  EXPECT_EQ(distil.classifier_dropout(), 0.2);  // seq_classif_dropout
  EXPECT_EQ(distil.qa_dropout(), 0.1);
  EXPECT_EQ(distil.encoder_parameters(), 66362880);
  const auto written = distil.to_json();
  EXPECT_EQ(written["n_layers"], 6);
  EXPECT_EQ(written["seq_classif_dropout"], 0.2);
  EXPECT_EQ(written["qa_dropout"], 0.1);
  // A DistilBERT config built in code without a classifier dropout writes HF's default.
  EXPECT_EQ(BertConfig().family(ModelFamily::kDistilBert).to_json()["seq_classif_dropout"], 0.2);
}

// Limits at their edges: dropout 1 (nothing kept), a padding id just outside the vocabulary, a
// negative embedding width, an id2label key that is not a whole number. DistilBERT's problems
// name its own keys.
TEST(BertConfigTest, BoundsAreCheckedAtTheirEdges) {
  const json base = {{"vocab_size", 10}, {"hidden_size", 8}, {"num_attention_heads", 2}};
  const auto with = [&](const json& more) {
    json j = base;
    j.update(more);
    return error_of(j);
  };
  EXPECT_EQ(with({{"hidden_dropout_prob", 0.999}}), "");
  EXPECT_NE(
      with({{"hidden_dropout_prob", 1.0}}).find("key 'hidden_dropout_prob': must be in [0, 1)"),
      std::string::npos);
  EXPECT_NE(with({{"attention_probs_dropout_prob", 1}}).find("attention_probs_dropout_prob"),
            std::string::npos);
  EXPECT_EQ(with({{"pad_token_id", 9}}), "");
  EXPECT_NE(with({{"pad_token_id", 10}}).find("key 'pad_token_id': 10 is outside the vocabulary"),
            std::string::npos);
  EXPECT_NE(with({{"model_type", "electra"}, {"embedding_size", -1}}).find("key 'embedding_size'"),
            std::string::npos);
  EXPECT_NE(with({{"id2label", {{"0", "A"}, {"1x", "B"}}}}).find("entry \"1x\""),
            std::string::npos);
  const auto distil = error_of({{"model_type", "distilbert"}, {"dim", "wide"}});
  EXPECT_NE(distil.find("key 'dim': expected an integer"), std::string::npos) << distil;
  EXPECT_EQ(distil.find("hidden_size"), std::string::npos) << distil;
}

}  // namespace
}  // namespace bert
