#include "bert/model/layer_norm.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bert/model/bert_model.h"
#include "bert/model/bf16_twin.h"
#include "bert/model/norm_kernel.h"
#include "bert/model/onednn_linear.h"
#include "tests/support/test_support.h"

namespace bert {
namespace {

using testing::max_abs_diff;
using testing::TwoThreads;

/// A LayerNorm over `cols` with random (not the initial ones and zeros) weight and bias.
torch::nn::LayerNorm random_norm(int64_t cols, double eps) {
  torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({cols}).eps(eps));
  torch::NoGradGuard no_grad;
  norm->weight.copy_(torch::randn({cols}) * 0.5 + 1);
  norm->bias.copy_(torch::randn({cols}) * 0.3);
  return norm;
}

// The sizes the kernel meets (bert-base rows split over threads) and those its 16-lane loops
// leave a tail of (37, 100) or none of (16).
const std::vector<std::vector<int64_t>> kShapes = {
    {2, 3, 768}, {5, 37}, {1, 16}, {4, 7, 100}, {8, 128, 768}};

TEST(AddLayerNorm, IsTheModuleOnTheSum) {
  const TwoThreads threads;
  torch::manual_seed(0);
  torch::NoGradGuard no_grad;
  for (const auto& shape : kShapes)
    for (const double eps : {1e-12, 1e-5})
      for (const bool bf16 : {false, true})
        for (const bool with_residual : {true, false}) {
          if (bf16 && !with_residual) continue;  // a bf16 x alone is the module's
          auto norm = random_norm(shape.back(), eps);
          auto x = torch::randn(shape) * 2 + 3;
          if (bf16) x = x.to(torch::kBFloat16);
          const auto residual = with_residual ? torch::randn(shape) : torch::Tensor();
          const std::string what =
              fmt::format("{} eps {} {}{}", fmt::join(shape, "x"), eps, bf16 ? "bf16" : "fp32",
                          with_residual ? " + residual" : "");
          ASSERT_TRUE(add_layer_norm_fused(*norm, x, residual)) << what;
          const auto fused = add_layer_norm(*norm, x, residual);
          const auto sum = with_residual ? x.to(torch::kFloat) + residual : x;
          const auto expected = norm(sum);
          EXPECT_EQ(fused.scalar_type(), torch::kFloat) << what;
          EXPECT_EQ(fused.sizes(), x.sizes()) << what;
          EXPECT_LE(max_abs_diff(fused, expected), 1e-5) << what;
        }
}

// A strided x (a transpose) and a strided residual are read as their values.
TEST(AddLayerNorm, TakesStridedOperands) {
  torch::manual_seed(1);
  torch::NoGradGuard no_grad;
  auto norm = random_norm(48, 1e-12);
  const auto x = torch::randn({48, 6}).t();
  const auto residual = torch::randn({48, 6}).t();
  ASSERT_FALSE(x.is_contiguous());
  EXPECT_LE(max_abs_diff(add_layer_norm(*norm, x, residual), norm(x + residual)), 1e-5);
}

// Training and evaluation give the same values bit for bit (one kernel), and the gradients are
// the module's to every operand that asks for one, whichever do: x's in x's dtype.
TEST(AddLayerNorm, GradientsAreTheModulesAndTheForwardIsTheSame) {
  const TwoThreads threads;
  torch::manual_seed(2);
  for (const auto& shape : kShapes)
    for (const bool bf16 : {false, true})
      for (const int residual_kind : {0, 1, 2}) {  // none, needing no gradient, needing one
        if (bf16 && residual_kind == 0) continue;
        for (const bool frozen : {false, true}) {
          auto norm = random_norm(shape.back(), 1e-12);
          for (auto& p : norm->parameters()) p.requires_grad_(!frozen);
          auto x = (torch::randn(shape) * 2 + 3).to(bf16 ? torch::kBFloat16 : torch::kFloat);
          x.requires_grad_(true);
          torch::Tensor residual;
          if (residual_kind > 0) residual = torch::randn(shape).requires_grad_(residual_kind == 2);
          const auto upstream = torch::randn(shape);
          const std::string what =
              fmt::format("{} {} residual {}{}", fmt::join(shape, "x"), bf16 ? "bf16" : "fp32",
                          residual_kind, frozen ? " frozen" : "");

          const auto fused = add_layer_norm(*norm, x, residual);
          ASSERT_TRUE(fused.grad_fn()) << what;
          EXPECT_NE(fused.grad_fn()->name().find("AddLayerNorm"), std::string::npos) << what;
          {
            torch::NoGradGuard no_grad;
            EXPECT_TRUE(torch::equal(add_layer_norm(*norm, x, residual), fused.detach())) << what;
          }
          const auto params = norm->parameters();
          std::vector<torch::Tensor> inputs = {x};
          if (residual_kind == 2) inputs.push_back(residual);
          if (!frozen) inputs.insert(inputs.end(), params.begin(), params.end());
          const auto got = torch::autograd::grad({fused}, inputs, {upstream});
          const auto plain = norm(residual.defined() ? x + residual : x);
          const auto want = torch::autograd::grad({plain}, inputs, {upstream});
          ASSERT_EQ(got.size(), want.size());
          for (size_t i = 0; i < got.size(); ++i) {
            EXPECT_EQ(got[i].scalar_type(), inputs[i].scalar_type()) << what << " input " << i;
            // bf16 gradients: within one rounding of the module's.
            const double scale = want[i].abs().max().item<double>();
            EXPECT_LE(max_abs_diff(got[i], want[i]), (bf16 && i == 0 ? 1e-2 : 2e-5) * scale)
                << what << " input " << i;
          }
        }
      }
}

// What the kernel does not take is the module's own: a bf16 residual or x alone, float64, a
// residual to broadcast, a norm over more than the last dimension or without an affine.
TEST(AddLayerNorm, LeavesTheRestToTheModule) {
  torch::manual_seed(3);
  torch::NoGradGuard no_grad;
  auto norm = random_norm(32, 1e-12);
  const auto x = torch::randn({4, 32});
  const auto residual = torch::randn({4, 32});
  const auto expect_module = [&](torch::nn::LayerNormImpl& n, const torch::Tensor& a,
                                 const torch::Tensor& r, const char* what) {
    EXPECT_FALSE(add_layer_norm_fused(n, a, r)) << what;
    EXPECT_TRUE(torch::equal(add_layer_norm(n, a, r), n.forward(r.defined() ? a + r : a))) << what;
  };
  expect_module(*norm, x, residual.to(torch::kBFloat16), "bf16 residual");
  // (LibTorch 1.13's own layer_norm refuses a bf16 x beside float32 weights outside autocast.)
  EXPECT_FALSE(add_layer_norm_fused(*norm, x.to(torch::kBFloat16)));
  torch::nn::LayerNorm in_double = random_norm(32, 1e-12);
  in_double->to(torch::kDouble);
  expect_module(*in_double, x.to(torch::kDouble), residual.to(torch::kDouble), "float64");
  expect_module(*norm, x, residual[0], "a residual to broadcast");
  torch::nn::LayerNorm two_dims(torch::nn::LayerNormOptions({4, 32}));
  expect_module(*two_dims, x, residual, "two normalized dimensions");
  torch::nn::LayerNorm plain(torch::nn::LayerNormOptions({32}).elementwise_affine(false));
  expect_module(*plain, x, residual, "no affine");
  auto bf16_bias = random_norm(32, 1e-12);
  bf16_bias->bias = bf16_bias->bias.to(torch::kBFloat16);
  EXPECT_FALSE(add_layer_norm_fused(*bf16_bias, x, residual)) << "a bf16 bias";
  EXPECT_FALSE(add_layer_norm_fused(*norm, torch::randn({0, 32}), torch::randn({0, 32})));
}

// The kernel's outputs for the backward: the sum itself and each row's mean and rstd, as
// LibTorch's layer_norm computes them.
TEST(AddLayerNormKernel, KeepsTheSumAndTheMoments) {
  torch::manual_seed(4);
  for (const int64_t cols : {16, 37, 768}) {
    const int64_t rows = 5;
    const auto x = torch::randn({rows, cols}) * 2 + 3;
    const auto residual = torch::randn({rows, cols});
    const auto gamma = torch::randn({cols});
    const auto beta = torch::randn({cols});
    auto out = torch::empty({rows, cols});
    auto sum = torch::empty({rows, cols});
    auto mean = torch::empty({rows});
    auto rstd = torch::empty({rows});
    kernels::LayerNormOutputs to;
    to.out = out.data_ptr<float>();
    to.sum = sum.data_ptr<float>();
    to.mean = mean.data_ptr<float>();
    to.rstd = rstd.data_ptr<float>();
    kernels::add_layer_norm_f32(x.data_ptr<float>(), /*x_bf16=*/false, residual.data_ptr<float>(),
                                gamma.data_ptr<float>(), beta.data_ptr<float>(), rows, cols, 1e-5f,
                                to);
    const auto s = x + residual;
    EXPECT_TRUE(torch::equal(sum, s)) << cols;
    const auto [y, m, r] = torch::native_layer_norm(s, {cols}, gamma, beta, 1e-5);
    EXPECT_LE(max_abs_diff(out, y), 1e-5) << cols;
    EXPECT_LE(max_abs_diff(mean, m.view({rows})), 1e-6) << cols;
    EXPECT_LE(max_abs_diff(rstd, r.view({rows})), 1e-6 * r.max().item<double>()) << cols;
    // In place: the output written over x itself.
    auto in_place = x.clone();
    kernels::LayerNormOutputs over;
    over.out = in_place.data_ptr<float>();
    kernels::add_layer_norm_f32(in_place.data_ptr<float>(), /*x_bf16=*/false,
                                residual.data_ptr<float>(), gamma.data_ptr<float>(),
                                beta.data_ptr<float>(), rows, cols, 1e-5f, over);
    EXPECT_TRUE(torch::equal(in_place, out)) << cols;
  }
}

// Under bf16 autocast without autograd the LayerNorm also writes its output's bf16 rounding
// (bert/model/bf16_twin.h), which the cast of that same tensor then returns: bit for bit the
// cast's value, for every shape the kernel splits over threads, float32 or bf16 x, inside and
// outside InferenceMode.
TEST(Bf16Twin, IsTheLayerNormOutputsCast) {
  const TwoThreads threads;
  torch::manual_seed(5);
  for (const auto& shape : kShapes)
    for (const bool bf16_x : {false, true})
      for (const bool inference_mode : {false, true}) {
        const std::string what =
            fmt::format("{}{}{}", fmt::join(shape, "x"), bf16_x ? " bf16 x" : "",
                        inference_mode ? " InferenceMode" : " no_grad");
        auto norm = random_norm(shape.back(), 1e-12);
        const auto x = torch::randn(shape) * 3;
        const auto residual = torch::randn(shape);
        const torch::NoGradGuard no_grad;
        c10::optional<c10::InferenceMode> inference;
        if (inference_mode) inference.emplace();
        const testing::CpuBf16Autocast autocast;
        const auto before = bf16_twin::answered();
        const auto out = add_layer_norm(*norm, bf16_x ? x.to(torch::kBFloat16) : x, residual);
        ASSERT_EQ(out.scalar_type(), torch::kFloat) << what;
        const auto twin = bf16_twin::cast(out);
        EXPECT_EQ(bf16_twin::answered(), before + 1) << what;
        EXPECT_EQ(twin.scalar_type(), torch::kBFloat16) << what;
        EXPECT_TRUE(
            torch::equal(twin.view(torch::kShort), out.to(torch::kBFloat16).view(torch::kShort)))
            << what;
        // The same twin again (the next projection of the same output), not another cast.
        EXPECT_EQ(bf16_twin::cast(out).data_ptr(), twin.data_ptr()) << what;
        EXPECT_EQ(bf16_twin::answered(), before + 2) << what;
      }
}

// The twin answers only for the tensor it was made from, unchanged: not after an in-place write,
// not for another tensor (a copy, a view), not once the tensor is gone; none is made with
// autograd recording, outside bf16 autocast, or with twins switched off.
TEST(Bf16Twin, AnswersOnlyForItsOwnUnchangedTensor) {
  torch::manual_seed(6);
  auto norm = random_norm(48, 1e-12);
  const auto x = torch::randn({48, 48});
  const auto residual = torch::randn({48, 48});
  const auto fresh_cast = [](const torch::Tensor& t, const char* what) {
    const auto before = bf16_twin::answered();
    const auto low = bf16_twin::cast(t);
    EXPECT_EQ(bf16_twin::answered(), before) << what;
    EXPECT_TRUE(torch::equal(low.view(torch::kShort), t.to(torch::kBFloat16).view(torch::kShort)))
        << what;
  };
  {
    const testing::CpuBf16Autocast autocast;
    const torch::NoGradGuard no_grad;
    auto out = add_layer_norm(*norm, x, residual);
    fresh_cast(out.clone(), "a copy");
    fresh_cast(out.view({24, 96}), "a view");
    fresh_cast(out.t(), "a view of the same sizes");
    out.add_(1);  // its version moves on: the twin is stale
    fresh_cast(out, "written in place");
    {
      const bf16_twin::ScopedBf16Twins off(false);
      fresh_cast(add_layer_norm(*norm, x, residual), "twins off");
    }
    // The twin lives in its tensor's memory: released with it, even while still remembered.
    using Weak = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
    Weak twin{c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>()};
    {
      const auto gone = add_layer_norm(*norm, x, residual);
      twin = Weak{bf16_twin::cast(gone).getIntrusivePtr()};
      EXPECT_FALSE(twin.expired());
    }
    EXPECT_TRUE(twin.expired()) << "the twin outlived its tensor";
    fresh_cast(torch::randn({48, 48}), "another tensor once the first is gone");
  }
  {
    const torch::NoGradGuard no_grad;
    fresh_cast(add_layer_norm(*norm, x, residual), "outside autocast");
  }
  const testing::CpuBf16Autocast autocast;
  const auto recorded = add_layer_norm(*norm, x.clone().requires_grad_(true), residual);
  ASSERT_TRUE(recorded.requires_grad());
  const torch::NoGradGuard no_grad;
  fresh_cast(recorded, "made with autograd recording");
}

// The bf16 linear from a plain bf16 weight (where oneDNN's kernels read the plain layout, or
// BERTFT_BF16_PACK=off) takes the twin as the packed one does, with the same product.
TEST(Bf16Twin, TheCastWeightsLinearTakesItToo) {
  if (!onednn_built() || !onednn_bf16_available())
    GTEST_SKIP() << "this CPU's oneDNN has no bf16 products";
  torch::manual_seed(8);
  auto norm = random_norm(64, 1e-12);
  const auto x = torch::randn({2, 9, 64});
  const auto w = torch::randn({40, 64}).to(torch::kBFloat16);
  const auto b = torch::randn({40});
  const torch::NoGradGuard no_grad;
  const testing::CpuBf16Autocast autocast;
  const auto out = add_layer_norm(*norm, x, torch::randn({2, 9, 64}));
  const auto before = bf16_twin::answered();
  const auto got = onednn_linear_bf16_cast(out, w, b, /*gelu=*/true);
  EXPECT_EQ(bf16_twin::answered(), before + 1);
  const auto expected = onednn_linear_bf16_cast(out.clone(), w, b, /*gelu=*/true);
  EXPECT_EQ(bf16_twin::answered(), before + 1);
  EXPECT_TRUE(torch::equal(got, expected));
}

// A bert-base-like encoder's bf16 inference through oneDNN's projections takes the twins (each
// layer's query, key, value and first FFN projections) and gives the same outputs bit for bit
// as with the twins off.
TEST(Bf16Twin, Bf16InferenceTakesTheTwinsAndGivesTheSameOutputs) {
  if (!onednn_built() || !onednn_bf16_available())
    GTEST_SKIP() << "this CPU's oneDNN has no bf16 products";
  const ScopedFp32Gemm onednn(Fp32Gemm::kOneDnn);
  torch::manual_seed(7);
  BertConfig config = testing::tiny_config();
  config.hidden_size(64).num_attention_heads(4).intermediate_size(128).num_hidden_layers(2);
  BertModel model(config);
  model->eval();
  const auto ids = torch::randint(1, 99, {3, 20}, torch::kLong);
  auto mask = torch::ones({3, 20}, torch::kLong);
  mask[2].slice(0, 12).fill_(0);
  const auto run = [&](bool twins) {
    const bf16_twin::ScopedBf16Twins choice(twins);
    const c10::InferenceMode inference;
    const testing::CpuBf16Autocast autocast;
    const auto before = bf16_twin::answered();
    const auto out = model->forward(ids, mask, torch::zeros_like(ids));
    return std::pair{out.last_hidden_state, bf16_twin::answered() - before};
  };
  const auto [with, answered] = run(true);
  const auto [without, none] = run(false);
  // Per layer: query, key and value take the previous LayerNorm's twin, the FFN's first
  // projection the attention's; the pooler takes a row of the last one (a view: cast).
  EXPECT_EQ(answered, 4 * config.num_hidden_layers());
  EXPECT_EQ(none, 0);
  EXPECT_TRUE(torch::equal(with, without));
}

}  // namespace
}  // namespace bert
