#include "bert/model/linear.h"

#include <gtest/gtest.h>

#include "bert/model/bert_model.h"
#include "tests/support/test_support.h"

namespace bert {
namespace {

#define REQUIRE_INT8_ENGINE() \
  if (int8_engine().empty()) GTEST_SKIP() << "this LibTorch has no quantized engine"

double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).norm() / b.norm()).item<double>();
}

TEST(Int8Linear, CloseToFp32WithTheSameParameters) {
  REQUIRE_INT8_ENGINE();
  torch::manual_seed(0);
  Linear linear(64, 96);
  const auto x = torch::randn({2, 7, 64});
  torch::NoGradGuard no_grad;
  const auto fp32 = linear(x);
  const auto weight = linear->weight.clone();
  linear->quantize_int8();
  ASSERT_TRUE(linear->is_int8());
  const auto int8 = linear(x);
  EXPECT_EQ(int8.sizes(), fp32.sizes());
  EXPECT_EQ(int8.scalar_type(), torch::kFloat);
  // Per-row int8 weights and per-call int8 activations: about 1% of the output's norm.
  EXPECT_LT(relative_error(int8, fp32), 0.03);
  EXPECT_GT(relative_error(int8, fp32), 0.0);  // it did run the int8 path
  // The parameters (and so the state dict and an export) are untouched.
  EXPECT_TRUE(torch::equal(linear->weight, weight));
}

TEST(Int8Linear, QuantizesTheEncoderProjectionsOnly) {
  REQUIRE_INT8_ENGINE();
  torch::manual_seed(0);
  BertModel model(testing::tiny_config());
  model->eval();
  const auto ids = torch::randint(5, 99, {3, 12}, torch::kLong);
  torch::NoGradGuard no_grad;
  const auto fp32 = model->forward(ids);
  // Q, K, V, attention output, intermediate, output: 6 per layer; pooler and embeddings stay.
  EXPECT_EQ(quantize_dynamic_int8(*model), 6 * 2);
  const auto int8 = model->forward(ids);
  EXPECT_LT(relative_error(int8.last_hidden_state, fp32.last_hidden_state), 0.05);
  EXPECT_LT(relative_error(int8.pooler_output, fp32.pooler_output), 0.05);
}

}  // namespace
}  // namespace bert
