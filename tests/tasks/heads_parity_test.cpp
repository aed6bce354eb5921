// The four task heads reproduce HF's BertFor{SequenceClassification, MultipleChoice,
// QuestionAnswering, TokenClassification}: logits and losses on the golden fixture within
// 1e-5, and the recorded gradients after backward; on the test device (a GPU machine's CUDA too,
// BERTFT_TEST_DEVICE).
#include <gtest/gtest.h>

#include <iostream>

#include "bert/checkpoint/load.h"
#include "bert/checkpoint/pretrained_dir.h"
#include "bert/checkpoint/safetensors.h"
#include "bert/model/onednn_linear.h"
#include "tasks/common/heads.h"
#include "tasks/registry.h"
#include "tests/support/test_support.h"

namespace bert::tasks {
namespace {

constexpr double kAtol = 1e-5;

class HeadParityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BERTFT_REQUIRE_PATH(testing::hf_fixture_dir() / "outputs_heads.safetensors");
    inputs_ = SafetensorsReader(testing::hf_fixture_dir() / "inputs.safetensors").read_all();
    outputs_ =
        SafetensorsReader(testing::hf_fixture_dir() / "outputs_heads.safetensors").read_all();
  }

  /// The adapter `type` with the fixture model `name` loaded strictly, in eval mode.
  std::pair<std::unique_ptr<TaskAdapter>, TaskModel> load(const std::string& type,
                                                          const std::string& name) {
    const auto dir = testing::hf_fixture_dir() / "models" / name;
    const auto config = BertConfig::from_file(dir / "config.json");
    auto adapter = TaskRegistry::global().create(type, YamlReader(YAML::Node(), "test"));
    adapter->set_labels(config.id2label());
    auto model = adapter->build_model(config);
    const auto report = load_state_dict(*model, read_weights(dir / "model.safetensors"), name);
    EXPECT_TRUE(report.clean()) << report.summary();
    model->to(device_);
    model->eval();
    return {std::move(adapter), model};
  }

  /// The fixture's input `key` on the test device.
  torch::Tensor in(const std::string& key) const { return inputs_.at(key).to(device_); }

  Batch batch(const std::string& prefix = "") const {
    Batch b;
    b.input_ids = in(prefix + "input_ids");
    b.attention_mask = in(prefix + "attention_mask");
    b.token_type_ids = in(prefix + "token_type_ids");
    return b;
  }

  void expect_loss(const torch::Tensor& loss, const std::string& key) const {
    EXPECT_NEAR(loss.item<double>(), outputs_.at(key).item<double>(), kAtol) << key;
  }

  /// The seqcls3 model's loss and every gradient after one backward, against HF's.
  void expect_gradients_match_hf() {
    const auto train =
        SafetensorsReader(testing::hf_fixture_dir() / "train_seqcls3.safetensors").read_all();
    BERTFT_REQUIRE_FIXTURE_MODEL("seqcls3");
    auto [adapter, model] = load("sequence_classification", "seqcls3");
    auto b = batch();
    b.labels = in("seq_cls_labels");
    const auto loss = adapter->loss(model->forward(b), b);
    EXPECT_NEAR(loss.item<double>(), train.at("loss_before_step1").item<double>(), 1e-6);
    loss.backward();
    size_t compared = 0;
    for (const auto& p : model->named_parameters()) {
      const auto& expected = train.at("grad." + p.key());
      ASSERT_TRUE(p.value().grad().defined()) << p.key();
      // The fixture README's tolerance: 1e-5 of the tensor's largest gradient (key.bias gets only
      // rounding noise, hence the small absolute floor).
      const double tol = 1e-5 * expected.abs().max().item<double>() + 1e-7;
      EXPECT_LT(testing::max_abs_diff(p.value().grad(), expected), tol) << p.key();
      ++compared;
    }
    EXPECT_EQ(compared, testing::fixture_model_keys("seqcls3"));
  }

  TensorMap inputs_, outputs_;
  const torch::Device device_{testing::test_device()};
};

TEST_F(HeadParityTest, SequenceClassification) {
  BERTFT_REQUIRE_FIXTURE_MODEL("seqcls3");
  auto [adapter, model] = load("sequence_classification", "seqcls3");
  auto b = batch();
  b.labels = in("seq_cls_labels");
  const auto logits = model->forward(b);
  EXPECT_LT(testing::max_abs_diff(logits, outputs_.at("seqcls3.logits")), kAtol);
  expect_loss(adapter->loss(logits, b), "seqcls3.loss");
}

TEST_F(HeadParityTest, Regression) {
  BERTFT_REQUIRE_FIXTURE_MODEL("seqreg1");
  auto [adapter, model] = load("sequence_classification", "seqreg1");
  auto b = batch();
  b.labels = in("seq_reg_labels");
  const auto logits = model->forward(b);
  EXPECT_EQ(logits.sizes(), torch::IntArrayRef({b.input_ids.size(0), 1}));
  EXPECT_LT(testing::max_abs_diff(logits, outputs_.at("seqreg1.logits")), kAtol);
  expect_loss(adapter->loss(logits, b), "seqreg1.loss");
}

TEST_F(HeadParityTest, TokenClassificationWithIgnoredLabels) {
  BERTFT_REQUIRE_FIXTURE_MODEL("tokcls9");
  auto [adapter, model] = load("token_classification", "tokcls9");
  auto b = batch();
  b.labels = in("token_cls_labels");
  ASSERT_TRUE((b.labels == kIgnoreIndex).any().item<bool>());
  const auto logits = model->forward(b);
  EXPECT_LT(testing::max_abs_diff(logits, outputs_.at("tokcls9.logits")), kAtol);
  expect_loss(adapter->loss(logits, b), "tokcls9.loss");
}

TEST_F(HeadParityTest, QuestionAnswering) {
  BERTFT_REQUIRE_FIXTURE_MODEL("qa");
  auto [adapter, model] = load("question_answering", "qa");
  auto b = batch();
  b.labels = torch::stack({in("start_positions"), in("end_positions")}, 1);
  const auto logits = model->forward(b);  // [3, 16, 2]
  EXPECT_LT(testing::max_abs_diff(logits.select(2, 0), outputs_.at("qa.start_logits")), kAtol);
  EXPECT_LT(testing::max_abs_diff(logits.select(2, 1), outputs_.at("qa.end_logits")), kAtol);
  expect_loss(adapter->loss(logits, b), "qa.loss");
}

TEST_F(HeadParityTest, MultipleChoice) {
  BERTFT_REQUIRE_FIXTURE_MODEL("mc2");
  auto [adapter, model] = load("multiple_choice", "mc2");
  auto b = batch("mc_");
  b.labels = in("mc_labels");
  const auto logits = model->forward(b);
  EXPECT_LT(testing::max_abs_diff(logits, outputs_.at("mc2.logits")), kAtol);
  expect_loss(adapter->loss(logits, b), "mc2.loss");
}

TEST_F(HeadParityTest, GradientsAfterBackwardMatchHf) {
  expect_gradients_match_hf();
}

TEST_F(HeadParityTest, GradientsAfterBackwardMatchHfWithOneDnnGemms) {
  if (!onednn_built()) GTEST_SKIP() << "this build has no oneDNN";
  // Every projection, forward and backward, through oneDNN's matmul (the fixture's are small
  // enough that bert::Linear would otherwise keep LibTorch's BLAS path).
  const ScopedFp32Gemm onednn(Fp32Gemm::kOneDnn);
  expect_gradients_match_hf();
}

TEST_F(HeadParityTest, StateDictKeysAreHfs) {
  for (const auto& [type, name] :
       {std::pair<const char*, const char*>{"sequence_classification", "seqcls3"},
        {"token_classification", "tokcls9"},
        {"question_answering", "qa"},
        {"multiple_choice", "mc2"}}) {
    if (!std::filesystem::exists(testing::hf_fixture_dir() / "models" / name)) {
      std::cout << "[ SKIPPED  ] " << type << ": the fixture has no model " << name << "\n";
      continue;
    }
    auto [adapter, model] = load(type, name);
    const auto hf = read_weights(testing::hf_fixture_dir() / "models" / name / "model.safetensors");
    const auto ours = state_dict(*model);
    std::vector<std::string> a, b;
    for (const auto& [k, v] : hf) a.push_back(k);
    for (const auto& [k, v] : ours) b.push_back(k);
    EXPECT_EQ(a, b) << type;
  }
}

}  // namespace
}  // namespace bert::tasks
