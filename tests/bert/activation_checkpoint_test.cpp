#include "bert/model/activation_checkpoint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "bert/common/autocast.h"
#include "bert/model/bert_model.h"
#include "bert/model/onednn_linear.h"
#include "tests/support/test_support.h"

namespace bert {
namespace {

using testing::max_abs_diff;

using Bf16Autocast = testing::CpuBf16Autocast;

struct Run {
  torch::Tensor output;
  std::map<std::string, torch::Tensor> grads;
  torch::Tensor next_random;  ///< a draw after backward: the generator state it left behind
};

// A training step's forward and backward over a tiny BERT with dropout on (0.1 everywhere),
// in fp32 or under bf16 autocast, with or without checkpointed layers.
Run train_step(BertModel& model, bool checkpoint, bool bf16) {
  model->encoder->set_activation_checkpointing(checkpoint);
  model->zero_grad();
  torch::manual_seed(11);
  const auto ids = torch::randint(5, 99, {3, 9}, torch::kLong);
  auto mask = torch::ones({3, 9}, torch::kLong);
  mask[1].slice(0, 6).fill_(0);
  const auto weights = torch::randn({32});
  Run run;
  torch::Tensor loss;
  {
    const Bf16Autocast autocast(bf16);
    const auto out = model->forward(ids, mask);
    run.output = out.last_hidden_state.to(torch::kFloat).detach();
    loss = (out.last_hidden_state.to(torch::kFloat) * weights).tanh().sum() +
           out.pooler_output.to(torch::kFloat).pow(2).sum();
  }
  loss.backward();
  for (const auto& p : model->named_parameters()) run.grads[p.key()] = p.value().grad().clone();
  run.next_random = torch::rand({4});
  return run;
}

void expect_same_step(bool bf16, double tolerance) {
  torch::manual_seed(0);
  BertModel model(testing::tiny_config());
  model->train();
  const Run plain = train_step(model, false, bf16);
  const Run recomputed = train_step(model, true, bf16);
  EXPECT_LE(max_abs_diff(plain.output, recomputed.output), tolerance);
  ASSERT_EQ(plain.grads.size(), recomputed.grads.size());
  for (const auto& [name, grad] : plain.grads) {
    ASSERT_TRUE(recomputed.grads.at(name).defined()) << name;
    // Relative to the gradient's scale: bf16's products round to 2^-8 of their size.
    const double scale = std::max(1.0, grad.abs().max().item<double>());
    EXPECT_LE(max_abs_diff(grad, recomputed.grads.at(name)), tolerance * scale)
        << name << " (largest " << grad.abs().max().item<double>() << ")";
  }
  // Backward replayed the dropout masks of forward and put the generator back: later draws
  // are those of a run without checkpointing.
  EXPECT_TRUE(torch::equal(plain.next_random, recomputed.next_random));
}

TEST(ActivationCheckpoint, GradientsEqualThePlainStepWithDropout) {
  expect_same_step(false, 1e-6);
}

TEST(ActivationCheckpoint, GradientsEqualThePlainStepWithDropoutInTheHeadByHeadAttention) {
  // With every fp32 product on oneDNN the attention is onednn_attention_training's, whose
  // dropout keys the recomputation must draw again from the restored generator.
  if (!onednn_built()) GTEST_SKIP() << "this build has no oneDNN";
  const ScopedFp32Gemm onednn(Fp32Gemm::kOneDnn);
  expect_same_step(false, 1e-6);
}

TEST(ActivationCheckpoint, GradientsEqualThePlainStepUnderBf16Autocast) {
  // The recomputed graph sums the gradient reaching a layer's input (residual, Q, K, V) in
  // another order; in fp32 that is invisible, through the next layer's bf16 products it moves
  // a gradient by up to a rounding step of bf16 (2^-8 relative) where oneDNN computes them.
  // Where it has no bf16 kernels (an AVX2-only CPU) LibTorch's own bf16 GEMM does, and there
  // the reordering moved a gradient by 0.9% of its largest element (an AMD EPYC with AVX2):
  // as much as bf16 itself moves it from fp32 (1.4%), so two rounding steps are allowed.
  expect_same_step(true, onednn_bf16_available() ? 1.0 / 128 : 1.0 / 64);
}

// The trainer's switch reaches the encoder inside a task model and says how many it switched
// (the count it logs): one in a model, none in a module without an encoder.
TEST(ActivationCheckpoint, TheSwitchFindsEveryEncoderInAModule) {
  torch::nn::Sequential task(BertModel(testing::tiny_config()), torch::nn::Linear(32, 2));
  const auto& encoder = task[0]->as<BertModel>()->encoder;
  EXPECT_EQ(set_activation_checkpointing(*task, true), 1);
  EXPECT_TRUE(encoder->activation_checkpointing());
  EXPECT_EQ(set_activation_checkpointing(*task, false), 1);
  EXPECT_FALSE(encoder->activation_checkpointing());
  torch::nn::Linear plain(2, 2);
  EXPECT_EQ(set_activation_checkpointing(*plain, true), 0);
}

TEST(ActivationCheckpoint, KeepsOnlyTheLayerInputs) {
  torch::manual_seed(0);
  BertModel model(testing::tiny_config());
  model->train();
  model->encoder->set_activation_checkpointing(true);
  const auto ids = torch::randint(5, 99, {2, 7}, torch::kLong);
  const auto out = model->forward(ids);
  // The last layer is one checkpointed node whose only saved tensor is its input.
  ASSERT_TRUE(out.last_hidden_state.grad_fn());
  EXPECT_NE(out.last_hidden_state.grad_fn()->name().find("CheckpointFunction"), std::string::npos)
      << out.last_hidden_state.grad_fn()->name();
  // Without grad (evaluation) and where attentions are asked for, layers run as they are.
  {
    torch::NoGradGuard no_grad;
    EXPECT_FALSE(model->forward(ids).last_hidden_state.grad_fn());
  }
  ForwardOptions options;
  options.output_attentions = true;
  const auto with_attentions = model->forward(ids, {}, {}, options);
  EXPECT_EQ(with_attentions.attentions.size(), 2u);
  EXPECT_EQ(with_attentions.last_hidden_state.grad_fn()->name().find("CheckpointFunction"),
            std::string::npos);
}

// Frozen embeddings: the layers' input needs no gradient, their parameters still get theirs.
TEST(ActivationCheckpoint, LayersTrainBehindFrozenEmbeddings) {
  torch::manual_seed(0);
  BertModel model(testing::tiny_config());
  model->train();
  for (auto& p : model->embeddings->parameters()) p.requires_grad_(false);
  std::map<std::string, torch::Tensor> plain;
  for (const bool checkpoint : {false, true}) {
    model->encoder->set_activation_checkpointing(checkpoint);
    model->zero_grad();
    torch::manual_seed(5);
    const auto ids = torch::randint(5, 99, {2, 7}, torch::kLong);
    model->forward(ids).last_hidden_state.pow(2).sum().backward();
    for (const auto& p : model->encoder->named_parameters()) {
      ASSERT_TRUE(p.value().grad().defined()) << p.key() << (checkpoint ? " checkpointed" : "");
      if (!checkpoint)
        plain[p.key()] = p.value().grad().clone();
      else
        EXPECT_LE(max_abs_diff(plain.at(p.key()), p.value().grad()), 1e-6) << p.key();
    }
  }
}

TEST(ActivationCheckpoint, PlainFunctionGradientReachesInputAndCapturedParameters) {
  const auto w = torch::randn({5, 5}, torch::requires_grad());
  const auto x = torch::randn({3, 5}, torch::requires_grad());
  const auto f = [&](const torch::Tensor& h) { return torch::matmul(h, w).relu().sum(1); };
  f(x).pow(2).sum().backward();
  const auto gx = x.grad().clone(), gw = w.grad().clone();
  x.mutable_grad().zero_();
  w.mutable_grad().zero_();
  checkpointed(f, x).pow(2).sum().backward();
  EXPECT_TRUE(torch::allclose(x.grad(), gx));
  EXPECT_TRUE(torch::allclose(w.grad(), gw));
}

// The recomputation runs under the autocast setting of the first run, not under the one
// backward happens to be called in (here none, as after a trainer's autocast scope closes), and
// leaves the caller's setting as it found it.
TEST(ActivationCheckpoint, RecomputesUnderTheFirstRunsAutocast) {
  const auto w = torch::randn({4, 4}, torch::requires_grad());
  const auto x = torch::randn({2, 4}, torch::requires_grad());
  std::vector<std::pair<bool, torch::ScalarType>> runs;  // autocast on, the product's type
  const auto f = [&](const torch::Tensor& h) {
    const auto product = torch::matmul(h, w);
    runs.emplace_back(autocast::enabled(c10::kCPU), product.scalar_type());
    return product.to(torch::kFloat).sum(1);
  };
  torch::Tensor out;
  {
    const Bf16Autocast autocast;
    out = checkpointed(f, x);
  }
  out.sum().backward();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[1], runs[0]);
  EXPECT_EQ(runs[1], std::make_pair(true, torch::kBFloat16));
  EXPECT_FALSE(autocast::enabled(c10::kCPU));
}

}  // namespace
}  // namespace bert
