// Parity with Hugging Face transformers v4.31 on the golden fixture (see its README for the
// tolerances: they pass fp32 noise and catch LayerNorm-eps, GELU and mask bugs).
#include <gtest/gtest.h>

#include <fstream>

#include "bert/checkpoint/load.h"
#include "bert/checkpoint/pretrained_dir.h"
#include "bert/checkpoint/safetensors.h"
#include "bert/model/bert_model.h"
#include "bert/model/onednn_linear.h"
#include "bert/model/pretraining.h"
#include "tests/support/test_support.h"

namespace bert {
namespace {

namespace fs = std::filesystem;

constexpr double kHiddenAtol = 1e-5;
constexpr double kLogitsAtol = 5e-6;
constexpr double kLossRtol = 1e-6;

struct Fixture {
  TensorMap inputs, base, pretraining;
};

Fixture read_fixture() {
  const auto dir = testing::hf_fixture_dir();
  return {SafetensorsReader(dir / "inputs.safetensors").read_all(),
          SafetensorsReader(dir / "outputs_base.safetensors").read_all(),
          SafetensorsReader(dir / "outputs_pretraining.safetensors").read_all()};
}

/// (model directory, weights file) for every model and both formats.
class ParityTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    BERTFT_REQUIRE_PATH(testing::hf_fixture_dir() / "inputs.safetensors");
    fixture_ = read_fixture();
  }
  TensorMap weights(const std::string& model) const {
    return read_weights(testing::hf_fixture_dir() / "models" / model / GetParam());
  }
  BertConfig config(const std::string& model) const {
    return BertConfig::from_file(testing::hf_fixture_dir() / "models" / model / "config.json");
  }
  void expect_base_outputs(const BertModelOutput& out) const {
    for (int i = 0; fixture_.base.count("hidden_states." + std::to_string(i)); ++i) {
      const auto name = "hidden_states." + std::to_string(i);
      EXPECT_LT(testing::max_abs_diff(out.hidden_states[i], fixture_.base.at(name)), kHiddenAtol)
          << name;
    }
    EXPECT_LT(testing::max_abs_diff(out.last_hidden_state, fixture_.base.at("last_hidden_state")),
              kHiddenAtol);
    EXPECT_LT(testing::max_abs_diff(out.pooler_output, fixture_.base.at("pooler_output")),
              kHiddenAtol);
  }
  Fixture fixture_;
};

TEST_P(ParityTest, BertModelMatchesHf) {
  BERTFT_REQUIRE_FIXTURE_MODEL("bert_model");
  BertModel model(config("bert_model"));
  const auto report = load_state_dict(*model, weights("bert_model"), GetParam());
  EXPECT_EQ(report.loaded, testing::fixture_model_keys("bert_model"));
  model->eval();
  torch::NoGradGuard no_grad;
  const auto& in = fixture_.inputs;
  const auto out = model->forward(in.at("input_ids"), in.at("attention_mask"),
                                  in.at("token_type_ids"), {/*output_hidden_states=*/true});
  expect_base_outputs(out);
}

TEST_P(ParityTest, BertModelMatchesHfWithOneDnnGemms) {
  BERTFT_REQUIRE_FIXTURE_MODEL("bert_model");
  if (!onednn_built()) GTEST_SKIP() << "this build has no oneDNN";
  const ScopedFp32Gemm onednn(Fp32Gemm::kOneDnn);  // every projection, whatever its size
  BertModel model(config("bert_model"));
  load_state_dict(*model, weights("bert_model"), GetParam());
  model->eval();
  torch::NoGradGuard no_grad;
  const auto& in = fixture_.inputs;
  expect_base_outputs(model->forward(in.at("input_ids"), in.at("attention_mask"),
                                     in.at("token_type_ids"), {/*output_hidden_states=*/true}));
}

TEST_P(ParityTest, BertModelFromTaskCheckpointStripsPrefix) {
  // A BertForSequenceClassification checkpoint ("bert." keys + classifier) loads into BertModel
  // with the head reported as unexpected, as HF does.
  BERTFT_REQUIRE_FIXTURE_MODEL("seqcls3");
  BertModel model(config("seqcls3"));
  LoadOptions options;
  options.strict = false;
  const auto report = load_state_dict(*model, weights("seqcls3"), GetParam(), options);
  EXPECT_EQ(report.loaded, testing::fixture_model_keys("seqcls3", "bert."));
  EXPECT_TRUE(report.missing.empty());
  EXPECT_EQ(report.unexpected, (std::vector<std::string>{"classifier.bias", "classifier.weight"}));
  model->eval();
  torch::NoGradGuard no_grad;
  const auto& in = fixture_.inputs;
  expect_base_outputs(
      model->forward(in.at("input_ids"), in.at("attention_mask"), in.at("token_type_ids"), {true}));
}

TEST_P(ParityTest, PreTrainingHeadsMatchHf) {
  BERTFT_REQUIRE_FIXTURE_MODEL("pretraining");
  BertForPreTraining model(config("pretraining"));
  LoadOptions options;
  options.tied_aliases = BertForPreTrainingImpl::tied_aliases();
  const auto report = load_state_dict(*model, weights("pretraining"), GetParam(), options);
  EXPECT_TRUE(report.clean()) << report.summary();
  model->eval();
  torch::NoGradGuard no_grad;
  const auto& in = fixture_.inputs;
  const auto out = model->forward(in.at("input_ids"), in.at("attention_mask"),
                                  in.at("token_type_ids"), {/*output_hidden_states=*/true});
  expect_base_outputs(out.encoder);
  const auto& ref = fixture_.pretraining;
  EXPECT_LT(testing::max_abs_diff(out.prediction_logits, ref.at("prediction_logits")), kLogitsAtol);
  EXPECT_LT(testing::max_abs_diff(out.seq_relationship_logits, ref.at("seq_relationship_logits")),
            kLogitsAtol);

  const auto loss =
      BertForPreTrainingImpl::loss(out, in.at("mlm_labels"), in.at("next_sentence_label"));
  for (const auto& [name, value] : {std::pair{"loss", loss.total}, std::pair{"mlm_loss", loss.mlm},
                                    std::pair{"nsp_loss", loss.nsp}}) {
    const double expected = ref.at(name).item<double>();
    EXPECT_NEAR(value.item<double>(), expected, kLossRtol * std::abs(expected)) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(BothFormats,
                         ParityTest,
                         ::testing::Values("model.safetensors", "pytorch_model.bin"),
                         [](const auto& info) {
                           return std::string(info.param) == "model.safetensors" ? "safetensors"
                                                                                 : "pytorch_bin";
                         });

TEST(ParityFormatsTest, TorchBinAndSafetensorsHoldTheSameTensors) {
  const auto dir = testing::hf_fixture_dir() / "models" / "pretraining";
  BERTFT_REQUIRE_PATH(dir);
  const auto bin = read_weights(dir / "pytorch_model.bin");
  const auto st = read_weights(dir / "model.safetensors");
  EXPECT_EQ(bin.size(), st.size() + 2);  // + the two tied aliases
  for (const auto& [name, t] : st) {
    ASSERT_TRUE(bin.count(name)) << name;
    EXPECT_TRUE(torch::equal(bin.at(name), t)) << name;
  }
  // The aliases share storage with their targets in the pickle, as torch.save wrote them.
  EXPECT_EQ(bin.at("cls.predictions.decoder.weight").data_ptr(),
            bin.at("bert.embeddings.word_embeddings.weight").data_ptr());
}

TEST(ParityFormatsTest, RestrictedUnpicklerAgreesWithTorchPickleLoad) {
  const auto path = testing::hf_fixture_dir() / "models" / "seqcls3" / "pytorch_model.bin";
  BERTFT_REQUIRE_PATH(path);
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto dict = torch::pickle_load(bytes).toGenericDict();
  const auto ours = read_weights(path);
  ASSERT_EQ(static_cast<size_t>(dict.size()), ours.size());
  for (const auto& item : dict) {
    const auto name = item.key().toStringRef();
    EXPECT_TRUE(torch::equal(item.value().toTensor(), ours.at(name))) << name;
  }
}

}  // namespace
}  // namespace bert
