// RoBERTa, XLM-RoBERTa, DistilBERT and ELECTRA as configuration of the one BERT stack: on
// tests/fixtures/hf_families (made by HF itself, make_fixture.py beside it) the base model's
// hidden states and every task head's (and the masked-LM head's) logits, loss and gradients
// match HF's within 1e-5, the state-dict keys are exactly HF's, and config.json round-trips in
// each family's own keys.
#include <gtest/gtest.h>

#include "bert/checkpoint/family_keys.h"
#include "bert/checkpoint/load.h"
#include "bert/checkpoint/pretrained_dir.h"
#include "bert/checkpoint/safetensors.h"
#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/model/dropout.h"
#include "tasks/common/heads.h"
#include "tasks/registry.h"
#include "tests/support/test_support.h"

namespace bert::tasks {
namespace {

namespace fs = std::filesystem;
constexpr double kAtol = 1e-5;

fs::path families_dir() {
  return fs::path(BERTFT_SOURCE_DIR) / "tests" / "fixtures" / "hf_families";
}

class FamilyParityTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = families_dir() / GetParam();
    inputs_ = SafetensorsReader(dir_ / "inputs.safetensors").read_all();
    outputs_ = SafetensorsReader(dir_ / "outputs.safetensors").read_all();
    grads_ = SafetensorsReader(dir_ / "grads.safetensors").read_all();
  }

  BertConfig config(const std::string& model) const {
    return BertConfig::from_file(dir_ / "models" / model / "config.json");
  }

  Batch batch(const std::string& prefix = "") const {
    Batch b;
    b.input_ids = inputs_.at(prefix + "input_ids");
    b.attention_mask = inputs_.at(prefix + "attention_mask");
    b.token_type_ids = inputs_.at(prefix + "token_type_ids");
    return b;
  }

  /// Runs head model `name` (task `type`) on the fixture batch: logits within 1e-5 of HF's
  /// (`check` compares them), the loss too, then every gradient after backward.
  template <class Check>
  void check_head(const std::string& type, const std::string& name, Batch b, Check check) {
    const auto c = config(name);
    auto adapter = TaskRegistry::global().create(type, YamlReader(YAML::Node(), "test"));
    adapter->set_labels(c.id2label());
    auto model = adapter->build_model(c);
    const auto hf = read_weights(dir_ / "models" / name / "model.safetensors");
    const auto report = load_state_dict(*model, hf, name);
    EXPECT_TRUE(report.clean()) << report.summary();
    model->eval();

    std::vector<std::string> hf_keys, our_keys;
    for (const auto& [k, v] : hf) hf_keys.push_back(k);
    for (const auto& [k, v] : to_hf_keys(state_dict(*model), c.family())) our_keys.push_back(k);
    EXPECT_EQ(our_keys, hf_keys) << name;

    const auto logits = model->forward(b);
    check(logits);
    const auto loss = adapter->loss(logits, b);
    EXPECT_NEAR(loss.item<double>(), outputs_.at(name + ".loss").item<double>(), kAtol) << name;
    loss.backward();
    size_t compared = 0;
    for (const auto& p : model->named_parameters()) {
      const auto key = name + "." + hf_key(c.family(), p.key());
      ASSERT_TRUE(grads_.count(key)) << key;
      ASSERT_TRUE(p.value().grad().defined()) << key;
      const auto& expected = grads_.at(key);
      const double tol = 1e-5 * expected.abs().max().item<double>() + 1e-7;
      EXPECT_LT(testing::max_abs_diff(p.value().grad(), expected), tol) << key;
      ++compared;
    }
    size_t recorded = 0;
    for (const auto& [k, v] : grads_) recorded += k.rfind(name + ".", 0) == 0;
    EXPECT_EQ(compared, recorded) << name;
  }

  fs::path dir_;
  TensorMap inputs_, outputs_, grads_;
};

TEST_P(FamilyParityTest, BaseModelHiddenStates) {
  const auto c = config("base");
  EXPECT_EQ(family_model_type(c.family()), GetParam());
  BertModel model(c, c.base_has_pooler());
  const auto report = load_state_dict(*model, read_weights(dir_ / "models/base/model.safetensors"),
                                      "base", LoadOptions{});
  EXPECT_TRUE(report.clean()) << report.summary();
  model->eval();
  const auto b = batch();
  ForwardOptions options;
  options.output_hidden_states = true;
  const auto out = model->forward(b.input_ids, b.attention_mask, b.token_type_ids, options);
  EXPECT_LT(testing::max_abs_diff(out.hidden_states.at(0), outputs_.at("base.embedding_output")),
            kAtol);
  EXPECT_LT(testing::max_abs_diff(out.last_hidden_state, outputs_.at("base.last_hidden_state")),
            kAtol);
  EXPECT_EQ(out.pooler_output.defined(), outputs_.count("base.pooler_output") == 1);
  if (out.pooler_output.defined()) {
    EXPECT_LT(testing::max_abs_diff(out.pooler_output, outputs_.at("base.pooler_output")), kAtol);
  }
}

TEST_P(FamilyParityTest, SequenceClassification) {
  auto b = batch();
  b.labels = inputs_.at("seq_cls_labels");
  check_head("sequence_classification", "seqcls3", b, [&](const torch::Tensor& logits) {
    EXPECT_LT(testing::max_abs_diff(logits, outputs_.at("seqcls3.logits")), kAtol);
  });
}

TEST_P(FamilyParityTest, TokenClassification) {
  auto b = batch();
  b.labels = inputs_.at("token_cls_labels");
  check_head("token_classification", "tokcls5", b, [&](const torch::Tensor& logits) {
    EXPECT_LT(testing::max_abs_diff(logits, outputs_.at("tokcls5.logits")), kAtol);
  });
}

TEST_P(FamilyParityTest, QuestionAnswering) {
  auto b = batch();
  b.labels = torch::stack({inputs_.at("start_positions"), inputs_.at("end_positions")}, 1);
  check_head("question_answering", "qa", b, [&](const torch::Tensor& logits) {
    EXPECT_LT(testing::max_abs_diff(logits.select(2, 0), outputs_.at("qa.start_logits")), kAtol);
    EXPECT_LT(testing::max_abs_diff(logits.select(2, 1), outputs_.at("qa.end_logits")), kAtol);
  });
}

TEST_P(FamilyParityTest, MultipleChoice) {
  auto b = batch("mc_");
  b.labels = inputs_.at("mc_labels");
  check_head("multiple_choice", "mc2", b, [&](const torch::Tensor& logits) {
    EXPECT_LT(testing::max_abs_diff(logits, outputs_.at("mc2.logits")), kAtol);
  });
}

TEST_P(FamilyParityTest, MaskedLanguageModel) {
  // XxxForMaskedLM (ELECTRA's generator head) as the pretraining task's model: the decoder runs
  // on the masked positions only, so its logits are HF's rows at those positions.
  auto b = batch();
  const auto labels = inputs_.at("mlm_labels");
  b.masked_positions = labels.ne(-100).nonzero();  // [masked, 2] (row, position), in order
  b.labels = labels.index({labels.ne(-100)});
  const auto expected = outputs_.at("mlm.logits").index({labels.ne(-100)});
  check_head("pretraining", "mlm", b, [&](const torch::Tensor& logits) {
    ASSERT_EQ(logits.sizes(), expected.sizes());  // no NSP rows: these families have no NSP head
    EXPECT_LT(testing::max_abs_diff(logits, expected), kAtol);
  });
  const auto c = config("mlm");
  BertConfig exported = c;
  TaskRegistry::global()
      .create("pretraining", YamlReader(YAML::Node(), "test"))
      ->configure_export(exported);
  EXPECT_EQ(exported.architectures(), c.architectures());  // "RobertaForMaskedLM", ...
}

TEST_P(FamilyParityTest, ConfigRoundTripsInTheFamilysKeys) {
  for (const char* model : {"base", "seqcls3", "qa"}) {
    const auto file = dir_ / "models" / model / "config.json";
    const auto hf = nlohmann::json::parse(read_file(file));
    const auto c = BertConfig::from_file(file);
    const auto written = c.to_json();
    for (const auto& [key, value] : hf.items()) {
      if (key == "transformers_version" || key == "torch_dtype") continue;
      ASSERT_TRUE(written.contains(key)) << model << ": " << key;
      if (value.is_number_float())
        EXPECT_DOUBLE_EQ(written[key].get<double>(), value.get<double>()) << model << ": " << key;
      else
        EXPECT_EQ(written[key], value) << model << ": " << key;
    }
    const auto again = BertConfig::from_json(written, "written");
    EXPECT_EQ(again.to_json(), written) << model;
  }
}

INSTANTIATE_TEST_SUITE_P(HfFamilies,
                         FamilyParityTest,
                         ::testing::Values("roberta", "xlm-roberta", "distilbert", "electra"),
                         [](const auto& info) {
                           std::string name = info.param;
                           name.erase(std::remove(name.begin(), name.end(), '-'), name.end());
                           return name;
                         });

TEST(FamilyKeysTest, DistilBertNamesMapBothWays) {
  const std::string bert = "distilbert.encoder.layer.11.attention.output.LayerNorm.weight";
  EXPECT_EQ(hf_key(ModelFamily::kDistilBert, bert),
            "distilbert.transformer.layer.11.sa_layer_norm.weight");
  EXPECT_EQ(bertft_key("distilbert.transformer.layer.11.sa_layer_norm.weight"), bert);
  EXPECT_EQ(hf_key(ModelFamily::kDistilBert, "encoder.layer.0.output.dense.bias"),
            "transformer.layer.0.ffn.lin2.bias");
  EXPECT_EQ(hf_key(ModelFamily::kDistilBert, "encoder.layer.0.intermediate.dense.weight"),
            "transformer.layer.0.ffn.lin1.weight");
  EXPECT_EQ(hf_key(ModelFamily::kBert, bert), bert);  // other families keep BERT's names
  EXPECT_EQ(bertft_key("bert.encoder.layer.3.output.dense.bias"),
            "bert.encoder.layer.3.output.dense.bias");
  EXPECT_EQ(bertft_key("distilbert.transformer.layer.x.ffn.lin1.weight"),
            "distilbert.transformer.layer.x.ffn.lin1.weight");  // not a layer number
}

TEST(FamilyConfigTest, ArchitectureNamesAndErrors) {
  EXPECT_EQ(family_architecture(ModelFamily::kXlmRoberta, "BertForTokenClassification"),
            "XLMRobertaForTokenClassification");
  EXPECT_EQ(bert_architecture("XLMRobertaForTokenClassification"), "BertForTokenClassification");
  EXPECT_EQ(bert_architecture("ElectraForMultipleChoice"), "BertForMultipleChoice");
  EXPECT_EQ(TaskRegistry::global().find_by_architecture("DistilBertForQuestionAnswering"),
            TaskRegistry::global().find_by_architecture("BertForQuestionAnswering"));
  try {
    BertConfig::from_json({{"model_type", "gpt2"}}, "c.json");
    FAIL() << "gpt2 accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("c.json: key 'model_type': 'gpt2'"), std::string::npos)
        << e.what();
  }
  try {  // DistilBERT's errors name its own keys
    BertConfig::from_json({{"model_type", "distilbert"}, {"dim", 30}, {"n_heads", 4}}, "d.json");
    FAIL() << "30 / 4 accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("key 'n_heads'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(BertConfig::from_json({{"model_type", "distilbert"}, {"hidden_size", 8}}, "d.json"),
               ConfigError);
  // DistilBERT's sinusoidal position embeddings stay frozen, as in HF.
  for (const bool sinusoidal : {false, true}) {
    const auto distil = BertConfig::from_json({{"model_type", "distilbert"},
                                               {"dim", 8},
                                               {"n_heads", 2},
                                               {"n_layers", 1},
                                               {"hidden_dim", 8},
                                               {"vocab_size", 10},
                                               {"sinusoidal_pos_embds", sinusoidal}},
                                              "d.json");
    BertModel model(distil, false);
    EXPECT_EQ(model->embeddings->position_embeddings->weight.requires_grad(), !sinusoidal);
    EXPECT_TRUE(model->embeddings->token_type_embeddings.is_empty());
  }
  // RoBERTa's longest input is max_position_embeddings less pad_token_id + 1.
  auto roberta = BertConfig::from_json(
      {{"model_type", "roberta"}, {"max_position_embeddings", 514}, {"pad_token_id", 1}}, "r");
  EXPECT_EQ(roberta.max_sequence_length(), 512);
  BertModel model(roberta.hidden_size(64)
                      .num_attention_heads(2)
                      .num_hidden_layers(1)
                      .intermediate_size(8)
                      .vocab_size(10));
  EXPECT_NO_THROW(model->forward(torch::full({1, 512}, 5, torch::kLong)));
  EXPECT_THROW(model->forward(torch::full({1, 513}, 5, torch::kLong)), c10::Error);
}

// Each head drops out as its HF class does (transformers 4.31): BERT's and the others' heads
// classifier_dropout, else hidden_dropout_prob; RoBERTa's multiple choice hidden_dropout_prob;
// DistilBERT's seq_classif_dropout for sentences, its `dropout` for tokens and qa_dropout (0.1
// by default) for spans; ELECTRA's multiple choice summary_last_dropout; no dropout before the
// span head of the others. (Evaluation never shows a probability: the parity tests run eval.)
TEST(HeadDropout, EachHeadDropsAsItsHfClass) {
  const auto config = [](ModelFamily family) {
    auto c = testing::tiny_config();
    c.family(family).hidden_dropout_prob(0.2).classifier_dropout(0.3);
    if (family == ModelFamily::kRoberta) c.pad_token_id(1);
    if (family == ModelFamily::kDistilBert) c.type_vocab_size(0);
    return c;
  };
  const auto head_p = [](const BertConfig& c, HeadKind kind) -> double {
    const auto model = std::make_shared<BertTaskModelImpl>(c, kind, 3);
    for (const auto& child : model->named_children())
      if (child.key() == "dropout")
        return std::dynamic_pointer_cast<bert::DropoutImpl>(child.value())->p;
    return -1;  // none
  };
  for (const auto family : {ModelFamily::kBert, ModelFamily::kRoberta, ModelFamily::kElectra}) {
    const auto c = config(family);
    SCOPED_TRACE(family_model_type(family));
    EXPECT_DOUBLE_EQ(head_p(c, HeadKind::kPooled), 0.3);
    EXPECT_DOUBLE_EQ(head_p(c, HeadKind::kTokens), 0.3);
    EXPECT_EQ(head_p(c, HeadKind::kSpan), -1);
  }
  EXPECT_DOUBLE_EQ(head_p(config(ModelFamily::kBert), HeadKind::kChoices), 0.3);
  EXPECT_DOUBLE_EQ(head_p(config(ModelFamily::kRoberta), HeadKind::kChoices), 0.2);
  EXPECT_DOUBLE_EQ(head_p(config(ModelFamily::kElectra), HeadKind::kChoices), 0.1);
  auto distil = config(ModelFamily::kDistilBert);
  EXPECT_DOUBLE_EQ(head_p(distil, HeadKind::kPooled), 0.3);
  EXPECT_DOUBLE_EQ(head_p(distil, HeadKind::kChoices), 0.3);
  EXPECT_DOUBLE_EQ(head_p(distil, HeadKind::kTokens), 0.2);
  EXPECT_DOUBLE_EQ(head_p(distil, HeadKind::kSpan), 0.1);
  EXPECT_DOUBLE_EQ(head_p(distil.qa_dropout(0.15), HeadKind::kSpan), 0.15);
}

}  // namespace
}  // namespace bert::tasks
