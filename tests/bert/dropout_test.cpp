#include "bert/model/dropout.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "bert/model/dropout_kernel.h"
#include "bert/model/onednn_attention.h"

namespace bert {
namespace {

double kept_fraction(const torch::Tensor& y) {
  return (y != 0).to(torch::kDouble).mean().item<double>();
}

/// The kernels' mask of probability p under the keys: threshold p * 2^32, kept values scaled by
/// 1 / (1 - p).
kernels::DropoutMask mask_of(uint32_t key0, uint32_t key1, double p) {
  kernels::DropoutMask mask;
  mask.key0 = key0;
  mask.key1 = key1;
  mask.threshold = static_cast<uint32_t>(std::llround(p * 4294967296.0));
  mask.scale = static_cast<float>(1.0 / (1.0 - p));
  return mask;
}

// Bernoulli(1 - p) over n elements: the kept fraction lies within 5 standard deviations.
void expect_rate(const torch::Tensor& y, double p) {
  const double n = static_cast<double>(y.numel());
  EXPECT_NEAR(kept_fraction(y), 1 - p, 5 * std::sqrt(p * (1 - p) / n)) << "p=" << p;
}

TEST(Dropout, KeepsOneMinusPAndScalesTheRest) {
  const auto x = torch::rand({1 << 20}) + 0.5;  // no zeros of its own
  for (const double p : {0.1, 0.5, 0.9}) {
    torch::manual_seed(3);
    const auto y = hash_dropout(x, p, /*training=*/true);
    expect_rate(y, p);
    const auto kept = y != 0;
    EXPECT_TRUE(torch::equal(y.masked_select(kept),
                             (x * static_cast<float>(1 / (1 - p))).masked_select(kept)));
  }
}

TEST(Dropout, Bf16KeepsTheRateAndRoundsOnce) {
  torch::manual_seed(4);
  const auto x = (torch::rand({1 << 20}) + 0.5).to(torch::kBFloat16);
  const auto y = hash_dropout(x, 0.1, true);
  ASSERT_EQ(y.scalar_type(), torch::kBFloat16);
  expect_rate(y, 0.1);
  const auto kept = y != 0;
  const auto expected = (x.to(torch::kFloat) * static_cast<float>(1 / 0.9)).to(torch::kBFloat16);
  EXPECT_TRUE(torch::equal(y.masked_select(kept), expected.masked_select(kept)));
}

TEST(DropoutKernel, LanesGiveTheElementByElementResult) {
  // A call of one element takes the kernels' scalar loop; longer calls take 16 lanes at a time
  // for indices below 2^32. Both must give the same bits, also across 2^32 (the hash's high
  // word) and for NaN, infinity and signed zeros.
  const kernels::DropoutMask mask = mask_of(0x12345678u, 0x9ABCDEF0u, 0.25);
  const int64_t n = 203;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 17) * 0.37f - 2.0f;
  x[5] = std::nanf("");
  x[6] = INFINITY;
  x[7] = -0.0f;
  std::vector<uint16_t> xb(n);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &x[i], sizeof bits);
    xb[i] = static_cast<uint16_t>(bits >> 16);
  }
  for (const int64_t offset : {int64_t{0}, int64_t{7}, (int64_t{1} << 32) - 37}) {
    SCOPED_TRACE(offset);
    std::vector<float> y(n), one(n);
    std::vector<uint16_t> yb(n), oneb(n);
    kernels::dropout_f32(x.data(), y.data(), n, offset, mask);
    kernels::dropout_bf16(xb.data(), yb.data(), n, offset, mask);
    for (int64_t i = 0; i < n; ++i) {
      kernels::dropout_f32(&x[i], &one[i], 1, offset + i, mask);
      kernels::dropout_bf16(&xb[i], &oneb[i], 1, offset + i, mask);
    }
    EXPECT_EQ(std::memcmp(y.data(), one.data(), n * sizeof(float)), 0);
    EXPECT_EQ(yb, oneb);
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i) kept += oneb[i] != 0 && oneb[i] != 0x8000;
    EXPECT_GT(kept, n / 2);  // about 3/4 kept: not all dropped by a broken mask
    EXPECT_LT(kept, n);
  }
}

// Elements 2^32 apart get independent decisions: the index's high word enters the hash (one
// dropout call over a tensor of more than 2^32 elements would otherwise repeat its mask).
TEST(DropoutKernel, TheIndexsHighWordChangesTheMask) {
  const kernels::DropoutMask mask = mask_of(0x2468ACE0u, 0x13579BDFu, 0.5);
  const int64_t n = 4096;
  const std::vector<float> x(n, 1.0f);
  std::vector<float> low(n), high(n);
  kernels::dropout_f32(x.data(), low.data(), n, 0, mask);
  kernels::dropout_f32(x.data(), high.data(), n, int64_t{1} << 32, mask);
  int64_t differ = 0;
  for (int64_t i = 0; i < n; ++i) differ += (low[i] == 0) != (high[i] == 0);
  // Independent masks of p = 0.5 differ in half the elements (within 5 standard deviations).
  EXPECT_NEAR(static_cast<double>(differ), n / 2.0, 5 * std::sqrt(n / 4.0));
}

/// Whether two bf16 tensors hold the same bits, any NaN matching any NaN (LibTorch's vector
/// conversion keeps a NaN's sign, its scalar one and the kernels give 0x7FC0).
bool same_bf16(const torch::Tensor& a, const torch::Tensor& b) {
  const auto nan = torch::isnan(a);
  return torch::equal(nan, torch::isnan(b)) &&
         torch::equal(a.view(torch::kShort).masked_select(~nan),
                      b.view(torch::kShort).masked_select(~nan));
}

// The attention's backward takes the gradient of its dropped probabilities through the dropout
// and the softmax in one pass: the dropout's decisions as dropout_f32's (the same mask as
// forward's), then p * (d - sum p d) per row, as LibTorch's softmax backward computes it; rows
// of any length (the 16-lane loop and its tail), from any offset, also across 2^32.
TEST(DropoutKernel, SoftmaxGradientThroughTheDropoutIsLibTorchs) {
  const kernels::DropoutMask mask = mask_of(0x12345678u, 0x9ABCDEF0u, 0.1);
  torch::manual_seed(5);
  for (const int64_t cols : {int64_t{1}, int64_t{16}, int64_t{37}, int64_t{128}}) {
    const int64_t rows = 5, n = rows * cols;
    const auto p = torch::softmax(torch::randn({rows, cols}) * 3, 1);
    const auto g = torch::randn({rows, cols});
    for (const bool drop : {false, true})
      for (const int64_t offset : {int64_t{0}, int64_t{3}, (int64_t{1} << 32) - 2 * cols - 5}) {
        SCOPED_TRACE(::testing::Message()
                     << cols << " columns, dropout " << drop << ", offset " << offset);
        auto d = g.clone();
        if (drop) kernels::dropout_f32(g.data_ptr<float>(), d.data_ptr<float>(), n, offset, mask);
        const auto want = torch::_softmax_backward_data(d, p, 1, torch::kFloat);
        auto have = torch::empty({rows, cols});
        kernels::softmax_grad_f32(p.data_ptr<float>(), g.data_ptr<float>(), have.data_ptr<float>(),
                                  rows, cols, offset, drop ? &mask : nullptr);
        EXPECT_TRUE(torch::allclose(have, want, 1e-5, 1e-6))
            << (have - want).abs().max().item<float>();
        if (drop && n >= 64) {  // some element dropped: the mask is in the comparison
          EXPECT_GT((d == 0).sum().item<int64_t>(), 0);
        }
      }
  }
}

// The attention's softmax over one head's scores: LibTorch's float32 softmax within 1e-6
// (relative; both round each score less the row's maximum to float32 first, which alone moves
// e^ by up to that difference's size times 6e-8), for rows of any length (the 16-lane loop and
// its tail), masked positions (float32's and bf16's lowest) exactly 0, a fully masked row
// uniform as HF's; e^ itself within 1e-6 of the exact value down to e^-86, below e^-86.5 cut
// to 0; NaN where LibTorch's softmax gives NaN.
TEST(DropoutKernel, SoftmaxIsLibTorchsToWithinAFewRoundings) {
  torch::manual_seed(9);
  const float lowest = std::numeric_limits<float>::lowest();
  for (const int64_t cols : {1, 15, 16, 17, 37, 128, 200}) {
    SCOPED_TRACE(::testing::Message() << cols << " columns");
    auto x = torch::randn({6, cols}) * 8;
    x[1].index_put_({torch::arange(0, cols, 3)}, lowest);
    x[2].index_put_({torch::arange(cols - 1, cols)}, static_cast<float>(kBf16Lowest));
    x[3].fill_(lowest);
    const auto want = torch::softmax(x, 1).to(torch::kDouble);
    auto have = x.clone();
    kernels::softmax_f32(have.data_ptr<float>(), have.size(0), cols);
    const auto excess = (have.to(torch::kDouble) - want).abs() - 1e-6 * want;  // masked: 0 - 0
    EXPECT_LE(excess.max().item<double>(), 0.0) << have << want;
    EXPECT_EQ(have.index({torch::indexing::Slice(1, 3)}).eq(0).sum().item<int64_t>(),
              want.index({torch::indexing::Slice(1, 3)}).eq(0).sum().item<int64_t>());
    EXPECT_TRUE(have[3].eq(1.0f / static_cast<float>(cols)).all().item<bool>()) << have[3];
  }
  auto deep = torch::tensor({0.0f, -20.0f, -86.0f, -86.4f, -86.6f, -87.0f, -200.0f}).view({1, 7});
  const auto exact = torch::softmax(deep.to(torch::kDouble), 1);
  kernels::softmax_f32(deep.data_ptr<float>(), 1, 7);
  for (int64_t j = 0; j < 4; ++j)
    EXPECT_NEAR(deep[0][j].item<double>(), exact[0][j].item<double>(),
                1e-6 * exact[0][j].item<double>())
        << j;
  for (int64_t j = 4; j < 7; ++j) EXPECT_EQ(deep[0][j].item<float>(), 0.0f) << j;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  // A NaN, a +inf, only -inf: each row NaN, as LibTorch's.
  auto odd = torch::tensor({0.0f, nan, 1.0f, 2.0f, inf, 1.0f, -inf, -inf, -inf}).view({3, 3});
  EXPECT_TRUE(torch::softmax(odd, 1).isnan().all().item<bool>());
  kernels::softmax_f32(odd.data_ptr<float>(), 3, 3);
  EXPECT_TRUE(odd.isnan().all().item<bool>()) << odd;
}

TEST(DropoutKernel, Float32ToBf16IsTheFloat32DropoutRoundedOnce) {
  // The attention's bf16 path drops float32 probabilities into bf16: the same decisions as
  // dropout_f32, each product rounded to nearest even as LibTorch's conversion rounds, in the
  // lanes and in the scalar loop alike (also across 2^32 and for NaN, infinity, signed zero).
  const kernels::DropoutMask mask = mask_of(0x0BADF00Du, 0xFEEDBEEFu, 0.3);
  const int64_t n = 203;
  torch::manual_seed(3);
  auto x = torch::randn({n});
  x[5] = std::nanf("");
  x[6] = INFINITY;
  x[7] = -0.0f;
  x[8] = 1.00390625f;  // halfway between two bf16 values: rounds to the even one
  const float* xs = x.data_ptr<float>();
  for (const int64_t offset : {int64_t{0}, int64_t{7}, (int64_t{1} << 32) - 37}) {
    SCOPED_TRACE(offset);
    auto dropped = torch::empty({n});
    kernels::dropout_f32(xs, dropped.data_ptr<float>(), n, offset, mask);
    const auto want = dropped.to(torch::kBFloat16);
    auto have = torch::empty({n}, torch::kBFloat16), one = torch::empty({n}, torch::kBFloat16);
    auto* out = reinterpret_cast<uint16_t*>(have.data_ptr());
    kernels::dropout_f32_to_bf16(xs, out, n, offset, mask);
    for (int64_t i = 0; i < n; ++i)
      kernels::dropout_f32_to_bf16(xs + i, reinterpret_cast<uint16_t*>(one.data_ptr()) + i, 1,
                                   offset + i, mask);
    // Bit for bit (NaN as NaN).
    EXPECT_TRUE(same_bf16(have, want));
    EXPECT_TRUE(same_bf16(one, want));
    const int64_t dropped_count = (have == 0).sum().item<int64_t>();
    EXPECT_GT(dropped_count, n / 10);  // about 3 in 10
    EXPECT_LT(dropped_count, n / 2);
  }
  auto plain = torch::empty({n}, torch::kBFloat16);
  kernels::f32_to_bf16(xs, reinterpret_cast<uint16_t*>(plain.data_ptr()), n);
  EXPECT_TRUE(same_bf16(plain, x.to(torch::kBFloat16)));
  EXPECT_EQ(plain[8].item<float>(), 1.0f);
}

TEST(Dropout, MasksAreIndependentAcrossElementsAndCalls) {
  torch::manual_seed(5);
  const auto ones = torch::ones({1 << 20});
  const auto a = hash_dropout(ones, 0.5, true) != 0, b = hash_dropout(ones, 0.5, true) != 0;
  EXPECT_FALSE(torch::equal(a, b));
  // Neighbours and the same element in two calls: both kept with probability 1/4.
  const double n = static_cast<double>(a.numel() - 1), tolerance = 5 * std::sqrt(0.25 * 0.75 / n);
  const auto neighbours =
      a.slice(0, 0, -1).logical_and(a.slice(0, 1)).to(torch::kDouble).mean().item<double>();
  EXPECT_NEAR(neighbours, 0.25, tolerance);
  EXPECT_NEAR(a.logical_and(b).to(torch::kDouble).mean().item<double>(), 0.25, tolerance);
}

TEST(Dropout, SeedRepeatsTheMaskWhateverTheThreadCount) {
  const auto x = torch::randn({64, 1000});
  const int threads = at::get_num_threads();
  torch::manual_seed(11);
  at::set_num_threads(1);
  const auto one = hash_dropout(x, 0.3, true);
  torch::manual_seed(11);
  at::set_num_threads(std::max(2, threads));
  const auto many = hash_dropout(x, 0.3, true);
  at::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(one, many));
  // Strided input: the mask follows the element order of the logical tensor.
  torch::manual_seed(11);
  EXPECT_TRUE(torch::equal(hash_dropout(x.t().contiguous().t(), 0.3, true), one));
}

TEST(Dropout, BackwardAppliesTheForwardMask) {
  torch::manual_seed(6);
  const auto x = (torch::rand({32, 77}) + 0.5).requires_grad_();
  const auto y = hash_dropout(x, 0.2, true);
  const auto g = torch::randn({32, 77});
  y.backward(g);
  const auto expected =
      torch::where(y.detach() != 0, g * static_cast<float>(1 / 0.8), torch::zeros_like(g));
  EXPECT_TRUE(torch::equal(x.grad(), expected));
}

TEST(Dropout, IdentityWhenNotTrainingOrPZero) {
  const auto x = torch::randn({10, 10});
  EXPECT_TRUE(hash_dropout(x, 0.5, false).is_same(x));
  EXPECT_TRUE(hash_dropout(x, 0.0, true).is_same(x));
  EXPECT_EQ(hash_dropout(x, 1.0, true).abs().sum().item<float>(), 0.0f);
  EXPECT_THROW(hash_dropout(x, 1.5, true), c10::Error);

  Dropout module(0.5);
  module->eval();
  EXPECT_TRUE(torch::equal(module(x), x));
  module->train();
  EXPECT_FALSE(torch::equal(module(x), x));
  EXPECT_TRUE(module->parameters().empty());
}

TEST(Dropout, OtherDtypesUseTorchDropout) {
  torch::manual_seed(7);
  const auto y = hash_dropout(torch::ones({1 << 16}, torch::kDouble), 0.25, true);
  EXPECT_EQ(y.scalar_type(), torch::kDouble);
  expect_rate(y, 0.25);
}

}  // namespace
}  // namespace bert
