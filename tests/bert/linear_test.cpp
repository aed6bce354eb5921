#include "bert/model/linear.h"

#include <ATen/record_function.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "bert/common/autocast.h"
#include "bert/common/threads.h"
#include "bert/model/attention_kernel.h"
#include "bert/model/bert_model.h"
#include "bert/model/dropout.h"
#include "bert/model/layer.h"
#include "bert/model/onednn_attention.h"
#include "bert/model/onednn_linear.h"
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

// One scale per output row: a row a thousand times smaller than the others keeps its own
// precision (under one scale for the whole weight it would round to zeros).
TEST(Int8Linear, EachOutputRowHasItsOwnScale) {
  REQUIRE_INT8_ENGINE();
  torch::manual_seed(0);
  Linear linear(64, 32);
  torch::NoGradGuard no_grad;
  linear->weight.narrow(0, 0, 8).mul_(1e-3);
  const auto x = torch::randn({4, 64});
  const auto fp32 = linear(x).narrow(1, 0, 8) - linear->bias.narrow(0, 0, 8);
  linear->quantize_int8();
  const auto int8 = linear(x).narrow(1, 0, 8) - linear->bias.narrow(0, 0, 8);
  EXPECT_LT(relative_error(int8, fp32), 0.05);
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

#define REQUIRE_ONEDNN() \
  if (!onednn_built()) GTEST_SKIP() << "this build has no oneDNN"

/// For the tests that call oneDNN's bf16 products directly (none below AVX-512 in oneDNN 2.6).
#define REQUIRE_ONEDNN_BF16() \
  REQUIRE_ONEDNN();           \
  if (!onednn_bf16_available()) GTEST_SKIP() << "this CPU's oneDNN has no bf16 products"

/// torch::linear's output and gradients against onednn_linear's for `input`.
void expect_same_as_torch_linear(const torch::Tensor& input, bool with_bias, bool input_grad) {
  torch::manual_seed(1);
  const int64_t in = input.size(-1), out = 48;
  const auto w = torch::randn({out, in}).requires_grad_(true);
  const auto b = with_bias ? torch::randn({out}).requires_grad_(true) : torch::Tensor();
  const auto x = input.detach().requires_grad_(input_grad);
  const auto ref = torch::linear(x, w, b);
  const auto got = onednn_linear(x, w, b);
  ASSERT_EQ(got.sizes(), ref.sizes());
  EXPECT_LT(relative_error(got, ref), 1e-6);
  // A gradient that is not contiguous (a transposed view), as autograd hands out at times.
  const auto upstream = torch::randn(ref.sizes()).transpose(0, -1).contiguous().transpose(0, -1);
  const auto wanted = torch::autograd::grad(
      {ref}, with_bias ? torch::autograd::variable_list{w, b} : torch::autograd::variable_list{w},
      {upstream});
  const auto given = torch::autograd::grad(
      {got}, with_bias ? torch::autograd::variable_list{w, b} : torch::autograd::variable_list{w},
      {upstream});
  for (size_t i = 0; i < wanted.size(); ++i) EXPECT_LT(relative_error(given[i], wanted[i]), 1e-6);
  if (input_grad) {
    const auto dx_ref = torch::autograd::grad({torch::linear(x, w, b)}, {x}, {upstream})[0];
    const auto dx = torch::autograd::grad({onednn_linear(x, w, b)}, {x}, {upstream})[0];
    EXPECT_LT(relative_error(dx, dx_ref), 1e-6);
  }
}

TEST(OneDnnLinear, EqualsTorchLinearForwardAndBackward) {
  REQUIRE_ONEDNN();
  expect_same_as_torch_linear(torch::randn({3, 17, 64}), /*with_bias=*/true, /*input_grad=*/true);
  expect_same_as_torch_linear(torch::randn({5, 64}), /*with_bias=*/false, /*input_grad=*/true);
  expect_same_as_torch_linear(torch::randn({1, 64}), /*with_bias=*/true, /*input_grad=*/false);
  // A transposed input (column-major rows) and a non-contiguous 3-D one.
  expect_same_as_torch_linear(torch::randn({64, 9}).t(), true, true);
  expect_same_as_torch_linear(torch::randn({7, 4, 64}).transpose(0, 1), true, true);
}

TEST(OneDnnLinear, WithoutAutogradAndForEmptyInputs) {
  REQUIRE_ONEDNN();
  const auto w = torch::randn({8, 16}), b = torch::randn({8});
  torch::NoGradGuard no_grad;
  const auto x = torch::randn({2, 3, 16});
  EXPECT_LT(relative_error(onednn_linear(x, w, b), torch::linear(x, w, b)), 1e-6);
  EXPECT_EQ(onednn_linear(torch::randn({0, 16}), w, b).sizes(), (std::vector<int64_t>{0, 8}));
  EXPECT_TRUE(
      torch::equal(onednn_linear(torch::randn({2, 0}), torch::randn({8, 0}), b), b.expand({2, 8})));
  EXPECT_THROW(onednn_linear(x.to(torch::kDouble), w, b), c10::Error);
  EXPECT_THROW(onednn_linear(torch::randn({2, 15}), w, b), c10::Error);
}

TEST(OneDnnLinear, FusedGeluEqualsGeluOfTheProjection) {
  REQUIRE_ONEDNN();
  const auto x = torch::randn({4, 11, 32}) * 3, w = torch::randn({40, 32}), b = torch::randn({40});
  {
    torch::NoGradGuard no_grad;
    const auto plain = torch::gelu(torch::linear(x, w, b));
    const auto fused = onednn_linear_gelu(x, w, b);
    EXPECT_LT(testing::max_abs_diff(fused, plain), 1e-5 * plain.abs().max().item<double>());
  }
  EXPECT_THROW(onednn_linear_gelu(x, w.clone().requires_grad_(true), b), c10::Error);
}

TEST(OneDnnMatmul, EqualsTorchMatmulOnHeadViewsWithTheMaskAdded) {
  REQUIRE_ONEDNN();
  torch::manual_seed(2);
  const int64_t batch = 3, seq = 7, heads = 4, dim = 8, hidden = heads * dim;
  const auto heads_of = [&](const torch::Tensor& x) {
    return x.view({batch, seq, heads, dim}).transpose(1, 2);  // a view, not contiguous
  };
  const auto qp = torch::randn({batch, seq, hidden}).requires_grad_(true);
  const auto kp = torch::randn({batch, seq, hidden}).requires_grad_(true);
  auto mask = torch::zeros({batch, 1, 1, seq});
  mask.index_put_({1, 0, 0, torch::indexing::Slice(4, seq)}, -3.4e38);
  const auto ref = torch::matmul(heads_of(qp), heads_of(kp).transpose(-1, -2)) + mask;
  const auto got = onednn_matmul(heads_of(qp), heads_of(kp).transpose(-1, -2), mask);
  ASSERT_EQ(got.sizes(), ref.sizes());
  EXPECT_TRUE(got.is_contiguous());
  EXPECT_LT(testing::max_abs_diff(got.masked_fill(mask < -1, 0), ref.masked_fill(mask < -1, 0)),
            1e-5);
  EXPECT_TRUE(torch::equal(got < -1e38, ref < -1e38));
  // Gradients equal torch's, and come back in the projections' [batch, seq, hidden] order.
  const auto upstream = torch::randn(ref.sizes()).masked_fill(mask < -1, 0);
  const auto want = torch::autograd::grad({ref}, {qp, kp}, {upstream});
  const auto have = torch::autograd::grad({got}, {qp, kp}, {upstream});
  for (int i = 0; i < 2; ++i) {
    EXPECT_LT(relative_error(have[i], want[i]), 1e-6);
    EXPECT_TRUE(have[i].is_contiguous());
  }
}

TEST(OneDnnAttention, EqualsSoftmaxOfTheScaledMaskedScoresTimesV) {
  REQUIRE_ONEDNN();
  torch::manual_seed(4);
  const int64_t batch = 4, seq = 9, heads = 3, dim = 8, hidden = heads * dim;
  const auto heads_of = [&](const torch::Tensor& x) {
    return x.view({batch, seq, heads, dim}).transpose(1, 2);  // the projections' head views
  };
  const auto q = heads_of(torch::randn({batch, seq, hidden}));
  const auto k = heads_of(torch::randn({batch, seq, hidden}));
  const auto v = heads_of(torch::randn({batch, seq, hidden}));
  auto mask = torch::zeros({batch, 1, 1, seq});
  const float lowest = std::numeric_limits<float>::lowest();           // what HF's mask holds
  mask.index_put_({1, 0, 0, torch::indexing::Slice(5, seq)}, lowest);  // padding at the end
  mask.index_put_({2, 0, 0, 3}, lowest);                               // one masked position
  mask.index_put_({3}, lowest);  // every position masked: HF's rows come out uniform
  const double scale = 1.0 / std::sqrt(8.0);
  const auto reference = [&](const torch::Tensor& m) {
    auto scores = torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(8.0);
    if (m.defined()) scores = scores + m;
    return torch::matmul(torch::softmax(scores, -1), v)
        .transpose(1, 2)
        .reshape({batch, seq, hidden});
  };
  const auto k6 = k.narrow(2, 0, 6).contiguous(), v6 = v.narrow(2, 0, 6).contiguous();
  {
    torch::NoGradGuard no_grad;
    for (const auto& m : {mask, torch::Tensor()}) {
      const auto got = onednn_attention(q, k, v, m, scale);
      ASSERT_EQ(got.sizes(), (std::vector<int64_t>{batch, seq, hidden}));
      EXPECT_LT(testing::max_abs_diff(got, reference(m)), 1e-5) << "masked " << m.defined();
    }
    // Keys and values of another length (kv_seq 6), and copies in other layouts.
    const auto mask6 = mask.narrow(-1, 0, 6).contiguous();
    const auto want = torch::matmul(
        torch::softmax(torch::matmul(q, k6.transpose(-1, -2)) * scale + mask6, -1), v6);
    EXPECT_LT(testing::max_abs_diff(onednn_attention(q.contiguous(), k6, v6, mask6, scale),
                                    want.transpose(1, 2).reshape({batch, seq, hidden})),
              1e-5);
    EXPECT_THROW(onednn_attention(q, k6, v, mask, scale), c10::Error);
  }
  // With autograd on, an operand that needs a gradient is refused.
  EXPECT_THROW(onednn_attention(q.clone().requires_grad_(true), k, v, mask, scale), c10::Error);
}

TEST(OneDnnMatmul, WritesTheResultInTheLayoutAsked) {
  REQUIRE_ONEDNN();
  const int64_t batch = 2, heads = 3, seq = 5, dim = 4, hidden = heads * dim;
  const auto probs = torch::softmax(torch::randn({batch, heads, seq, seq}), -1);
  const auto v = torch::randn({batch, seq, hidden}).view({batch, seq, heads, dim}).transpose(1, 2);
  torch::NoGradGuard no_grad;
  const auto got = onednn_matmul(probs, v, {}, {seq * hidden, dim, hidden, 1});
  EXPECT_EQ(got.strides(), (std::vector<int64_t>{seq * hidden, dim, hidden, 1}));
  EXPECT_TRUE(got.transpose(1, 2).is_contiguous());  // [batch, seq, hidden] without a copy
  EXPECT_LT(testing::max_abs_diff(got, torch::matmul(probs, v)), 1e-6);
  // 3-D and 2-D operands; shapes that do not fit are refused.
  const auto a = torch::randn({4, 6, 9}), b = torch::randn({4, 9, 2});
  EXPECT_LT(testing::max_abs_diff(onednn_matmul(a, b), torch::bmm(a, b)), 1e-5);
  EXPECT_LT(testing::max_abs_diff(onednn_matmul(a[0], b[0]), torch::mm(a[0], b[0])), 1e-5);
  EXPECT_THROW(onednn_matmul(a, b.transpose(1, 2)), c10::Error);
  EXPECT_THROW(onednn_matmul(a, b, torch::zeros({4, 5, 1})), c10::Error);
}

using Bf16Autocast = testing::CpuBf16Autocast;

/// How many record_function scopes named `first` and named `second` (may be null) ran while
/// `work` did.
std::pair<int, int> records_during(const char* first,
                                   const char* second,
                                   const std::function<void()>& work) {
  static std::atomic<int> counts[2];
  static const char* wanted[2];
  counts[0] = 0;
  counts[1] = 0;
  wanted[0] = first;
  wanted[1] = second;
  struct Registered {  // removed even when `work` throws
    at::CallbackHandle handle;
    ~Registered() { at::removeCallback(handle); }
  } registered{at::addGlobalCallback(at::RecordFunctionCallback(
      [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
        const std::string name = fn.name();
        for (int i = 0; i < 2; ++i)
          if (wanted[i] != nullptr && name == wanted[i]) ++counts[i];
        return nullptr;
      }))};
  work();
  return {counts[0].load(), counts[1].load()};
}

/// How many record_function scopes named `name` ran while `work` did.
int records_during(const char* name, const std::function<void()>& work) {
  return records_during(name, nullptr, work).first;
}

/// How many oneDNN GEMMs ran while `work` did (each records "bertft::onednn_matmul").
int onednn_gemms_during(const std::function<void()>& work) {
  return records_during("bertft::onednn_matmul", work);
}

/// A BERT with bert-base's head size (2 heads of 64) and `layers` layers (seed 5), with ids
/// [3, 40] whose first row ends in 15 padding positions.
struct SmallModel {
  BertModel model;
  torch::Tensor ids, mask;
};
SmallModel head_dim_64_model(int64_t layers) {
  torch::manual_seed(5);
  BertModel model(testing::tiny_config()
                      .num_hidden_layers(layers)
                      .hidden_size(128)
                      .num_attention_heads(2)
                      .intermediate_size(256));
  const auto ids = torch::randint(1, 99, {3, 40});
  auto mask = torch::ones({3, 40}, torch::kLong);
  mask.index_put_({0, torch::indexing::Slice(25, 40)}, 0);
  return {model, ids, mask};
}

TEST(OneDnnAttention, EvaluationOfTheModelTakesItAndMatchesTraining) {
  // A bert-base-shaped layer's attention (head_dim 64) in eval mode without autograd takes the
  // inference path; with autograd on the training path; with the attentions requested the
  // batched ops. All three give the same hidden states.
  REQUIRE_ONEDNN();
  SmallModel small = head_dim_64_model(1);
  BertModel& model = small.model;
  const torch::Tensor &ids = small.ids, &mask = small.mask;
  model->eval();
  const ScopedFp32Gemm onednn(Fp32Gemm::kOneDnn);
  const auto inference_and_training = [&](const std::function<void()>& work) {
    return records_during("bertft::onednn_attention", "bertft::onednn_attention_training", work);
  };
  torch::Tensor with_grad, batched, by_head;
  EXPECT_EQ(inference_and_training(
                [&] { with_grad = model->forward(ids, mask).last_hidden_state.detach(); }),
            std::pair(0, 1));
  ForwardOptions attentions;
  attentions.output_attentions = true;
  EXPECT_EQ(inference_and_training([&] {
              batched = model->forward(ids, mask, {}, attentions).last_hidden_state.detach();
            }),
            std::pair(0, 0));
  {
    torch::NoGradGuard no_grad;
    EXPECT_EQ(
        inference_and_training([&] { by_head = model->forward(ids, mask).last_hidden_state; }),
        std::pair(1, 0));
  }
  EXPECT_LT(testing::max_abs_diff(by_head, batched), 1e-5);
  EXPECT_LT(testing::max_abs_diff(with_grad, batched), 1e-5);
  // Training mode (dropout on) takes the training path, without autograd too.
  model->train();
  torch::NoGradGuard no_grad;
  EXPECT_EQ(inference_and_training([&] { model->forward(ids, mask); }), std::pair(0, 1));
}

TEST(OneDnnAttention, TrainingMatchesTheBatchedOpsWithTheirDropoutAndGradients) {
  REQUIRE_ONEDNN();
  const int64_t batch = 4, seq = 9, heads = 3, dim = 8, hidden = heads * dim;
  const double scale = 1.0 / std::sqrt(8.0);
  torch::manual_seed(8);
  // Leaves laid out as the projections' outputs; q, k, v are their head views.
  const auto q_rows = torch::randn({batch, seq, hidden}).requires_grad_(true);
  const auto k_rows = torch::randn({batch, seq, hidden}).requires_grad_(true);
  const auto v_rows = torch::randn({batch, seq, hidden}).requires_grad_(true);
  const auto upstream = torch::randn({batch, seq, hidden});
  auto mask = torch::zeros({batch, 1, 1, seq});
  const float lowest = std::numeric_limits<float>::lowest();
  mask.index_put_({1, 0, 0, torch::indexing::Slice(5, seq)}, lowest);
  mask.index_put_({2, 0, 0, 3}, lowest);
  mask.index_put_({3}, lowest);  // every position masked
  const auto heads_of = [&](const torch::Tensor& x, int64_t len) {
    return x.narrow(1, 0, len).view({batch, len, heads, dim}).transpose(1, 2);
  };
  // The batched ops: scaled scores plus mask, LibTorch's softmax, hash_dropout over the whole
  // [batch, heads, seq, kv_seq] probabilities, the product with v.
  const auto reference = [&](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& m, double p) {
    auto scores = torch::matmul(q, k.transpose(-1, -2)) * scale;
    if (m.defined()) scores = scores + m;
    return torch::matmul(hash_dropout(torch::softmax(scores, -1), p, true), v)
        .transpose(1, 2)
        .reshape({batch, q.size(2), hidden});
  };
  const auto outputs_and_grads = [&](bool by_head, int64_t kv_seq, const torch::Tensor& m,
                                     double p) {
    for (const auto* t : {&q_rows, &k_rows, &v_rows}) t->mutable_grad() = torch::Tensor();
    const auto q = heads_of(q_rows, seq), k = heads_of(k_rows, kv_seq),
               v = heads_of(v_rows, kv_seq);
    torch::manual_seed(11);  // the same dropout keys on both paths
    const auto out =
        by_head ? onednn_attention_training(q, k, v, m, scale, p) : reference(q, k, v, m, p);
    (out * upstream).sum().backward();
    return std::vector<torch::Tensor>{out.detach(), q_rows.grad().clone(), k_rows.grad().clone(),
                                      v_rows.grad().clone()};
  };
  for (const double p : {0.0, 0.3})
    for (const int64_t kv_seq : {seq, int64_t{6}})
      for (const bool masked : {true, false}) {
        SCOPED_TRACE(fmt::format("p {} kv_seq {} masked {}", p, kv_seq, masked));
        const auto m = masked ? mask.narrow(-1, 0, kv_seq).contiguous() : torch::Tensor();
        std::vector<torch::Tensor> have;
        const int backwards = records_during("bertft::onednn_attention_backward",
                                             [&] { have = outputs_and_grads(true, kv_seq, m, p); });
        EXPECT_EQ(backwards, 1);
        const auto want = outputs_and_grads(false, kv_seq, m, p);
        for (size_t i = 0; i < have.size(); ++i)
          EXPECT_LT(testing::max_abs_diff(have[i], want[i]), 1e-5) << "output/q/k/v " << i;
        if (p > 0) {  // the dropout did drop: not the output without it
          torch::NoGradGuard no_grad;
          const auto undropped =
              onednn_attention_training(heads_of(q_rows, seq), heads_of(k_rows, kv_seq),
                                        heads_of(v_rows, kv_seq), m, scale, 0.0);
          EXPECT_GT(testing::max_abs_diff(have[0], undropped), 0.1);
        }
      }
  // Shapes that do not fit are refused; a dropout of 1 takes the batched ops (all zero).
  EXPECT_THROW(onednn_attention_training(heads_of(q_rows, seq), heads_of(k_rows, 6),
                                         heads_of(v_rows, seq), mask, scale, 0.1),
               c10::Error);
  EXPECT_THROW(onednn_attention_training(heads_of(q_rows, seq), heads_of(k_rows, seq),
                                         heads_of(v_rows, seq), mask, scale, 1.5),
               c10::Error);
  EXPECT_EQ(onednn_attention_training(heads_of(q_rows, seq), heads_of(k_rows, seq),
                                      heads_of(v_rows, seq), mask, scale, 1.0)
                .abs()
                .sum()
                .item<double>(),
            0.0);
}

// The mask is [batch, 1, 1, kv_seq] and takes no gradient: a mask of as many elements in
// another shape, or one that asks for a gradient, is refused (in inference and in training).
TEST(OneDnnAttention, AMaskOfAnotherShapeOrWantingAGradientIsRefused) {
  REQUIRE_ONEDNN();
  torch::manual_seed(10);
  const auto q = torch::randn({2, 2, 5, 4}), k = torch::randn({2, 2, 5, 4}),
             v = torch::randn({2, 2, 5, 4});
  const auto mask = torch::zeros({2, 1, 1, 5});
  const auto transposed = torch::zeros({2, 1, 5, 1});
  const auto wanting = mask.clone().requires_grad_(true);
  EXPECT_NO_THROW(onednn_attention_training(q, k, v, mask, 0.5, 0.0));
  EXPECT_THROW(onednn_attention_training(q, k, v, transposed, 0.5, 0.0), c10::Error);
  EXPECT_THROW(onednn_attention_training(q, k, v, wanting, 0.5, 0.0), c10::Error);
  EXPECT_THROW(onednn_attention(q, k, v, transposed, 0.5), c10::Error);
  torch::NoGradGuard no_grad;  // without grad mode the mask's flag asks for nothing
  EXPECT_NO_THROW(onednn_attention(q, k, v, mask, 0.5));
  EXPECT_NO_THROW(onednn_attention(q, k, v, wanting, 0.5));
}

TEST(OneDnnAttention, Bf16ByHeadIsTheFloat32AttentionOfItsBf16Operands) {
  // bf16 q, k, v (autocast's projections) go head by head too, the scores, softmax, dropout and
  // the softmax's gradient in float32: output and gradients within bf16 rounding of the float32
  // attention of the same (bf16) values, with the same dropout masks as the batched bf16 ops.
  REQUIRE_ONEDNN_BF16();
  const int64_t batch = 3, seq = 10, heads = 2, dim = 16, hidden = heads * dim;
  const double scale = 0.25;
  torch::manual_seed(4);
  const auto leaf = [&] {
    return torch::randn({batch, seq, hidden}).to(torch::kBFloat16).requires_grad_(true);
  };
  const auto q_rows = leaf(), k_rows = leaf(), v_rows = leaf();
  const auto upstream = torch::randn({batch, seq, hidden}).to(torch::kBFloat16);
  auto mask = torch::zeros({batch, 1, 1, seq});
  const float lowest = std::numeric_limits<float>::lowest();
  mask.index_put_({1, 0, 0, torch::indexing::Slice(6, seq)}, lowest);
  mask.index_put_({2}, lowest);  // every position masked: uniform, not NaN
  const auto heads_of = [&](const torch::Tensor& x) {
    return x.view({batch, seq, heads, dim}).transpose(1, 2);
  };
  // Which way: 0 head by head, 1 the batched bf16 ops, 2 float32 on the same values.
  const auto outputs_and_grads = [&](int way, double p) {
    for (const auto* t : {&q_rows, &k_rows, &v_rows}) t->mutable_grad() = torch::Tensor();
    const auto wide = [&](const torch::Tensor& x) {
      return way == 2 ? heads_of(x).to(torch::kFloat) : heads_of(x);
    };
    torch::manual_seed(12);  // the same dropout keys every way
    const auto q = wide(q_rows), k = wide(k_rows), v = wide(v_rows);
    const auto out = way == 0 ? onednn_attention_training(q, k, v, mask, scale, p)
                              : onednn_attention_batched(q, k, v, mask, scale, p);
    (out.to(torch::kFloat) * upstream.to(torch::kFloat)).sum().backward();
    std::vector<torch::Tensor> result = {out.detach()};
    for (const auto* t : {&q_rows, &k_rows, &v_rows}) result.push_back(t->grad().clone());
    return result;
  };
  for (const double p : {0.0, 0.3}) {
    SCOPED_TRACE(p);
    std::vector<torch::Tensor> by_head;
    const int backwards = records_during("bertft::onednn_attention_backward",
                                         [&] { by_head = outputs_and_grads(0, p); });
    EXPECT_EQ(backwards, 1);  // the head-by-head node (oneDNN has bf16 kernels: see above)
    const auto batched = outputs_and_grads(1, p), wide = outputs_and_grads(2, p);
    EXPECT_EQ(by_head[0].scalar_type(), torch::kBFloat16);
    for (size_t i = 0; i < by_head.size(); ++i) {
      SCOPED_TRACE(fmt::format("output/q/k/v {}", i));
      const double size = wide[i].abs().max().item<double>();
      EXPECT_EQ(by_head[i].scalar_type(), torch::kBFloat16);
      EXPECT_TRUE(torch::isfinite(by_head[i].to(torch::kFloat)).all().item<bool>());
      EXPECT_LT(testing::max_abs_diff(by_head[i].to(torch::kFloat), wide[i]), 2e-2 * size);
      EXPECT_LT(testing::max_abs_diff(batched[i].to(torch::kFloat), wide[i]), 4e-2 * size);
    }
    if (p == 0) {  // the fully masked row attends to every position alike: the mean of v
      const auto mean_v = v_rows[2].to(torch::kFloat).mean(0);
      EXPECT_LT(testing::max_abs_diff(by_head[0][2][0].to(torch::kFloat), mean_v), 2e-2);
    } else {  // the dropout did drop
      const auto undropped = outputs_and_grads(0, 0.0);
      EXPECT_GT(testing::max_abs_diff(by_head[0].to(torch::kFloat), undropped[0].to(torch::kFloat)),
                0.1);
    }
  }
  // Without autograd (inference) the same forward.
  {
    torch::NoGradGuard no_grad;
    const auto out =
        onednn_attention(heads_of(q_rows), heads_of(k_rows), heads_of(v_rows), mask, scale);
    const auto want = onednn_attention_batched(
        heads_of(q_rows).to(torch::kFloat), heads_of(k_rows).to(torch::kFloat),
        heads_of(v_rows).to(torch::kFloat), mask, scale, 0.0);
    EXPECT_EQ(out.scalar_type(), torch::kBFloat16);
    EXPECT_LT(testing::max_abs_diff(out.to(torch::kFloat), want),
              2e-2 * want.abs().max().item<double>());
  }
  // Mixed types are refused.
  EXPECT_THROW(onednn_attention_training(heads_of(q_rows), heads_of(k_rows).to(torch::kFloat),
                                         heads_of(v_rows), mask, scale, 0.0),
               c10::Error);
}

TEST(OneDnnAttention, Bf16KernelEqualsTheOneDnnHeadsBitForBit) {
  // Inference's bf16 heads of head_dim 64 and up to 128 keys go through bertft's AVX-512 BF16
  // kernel where the CPU has it: the same arithmetic as oneDNN's head-by-head products with
  // bertft's softmax between them, so the same bits, with and without a mask, for any number of
  // queries (one: a sentence head's last layer) and keys (tails of 16 included).
  REQUIRE_ONEDNN_BF16();
  if (!kernels::attention_head_bf16_available())
    GTEST_SKIP() << "this CPU has no AVX-512 BF16 pair products";
  struct KernelOff {
    KernelOff() { kernels::set_attention_head_bf16(false); }
    ~KernelOff() { kernels::set_attention_head_bf16(true); }
  };
  const int64_t batch = 3, heads = 2, dim = 64, hidden = heads * dim;
  const float lowest = std::numeric_limits<float>::lowest();
  torch::NoGradGuard no_grad;
  for (const auto& [seq, kv_seq] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {5, 7}, {37, 37}, {16, 16}, {1, 128}, {128, 128}, {130, 100}, {4, 129}}) {
    SCOPED_TRACE(fmt::format("{} queries, {} keys", seq, kv_seq));
    torch::manual_seed(seq * 1000 + kv_seq);
    const auto rows = [&](int64_t len, double size) {
      return (torch::randn({batch, len, hidden}) * size).to(torch::kBFloat16);
    };
    const auto heads_of = [&](const torch::Tensor& x) {
      return x.view({batch, x.size(1), heads, dim}).transpose(1, 2);
    };
    const auto q = heads_of(rows(seq, 2.0)), k = heads_of(rows(kv_seq, 2.0));
    const auto v = heads_of(rows(kv_seq, 1.0));
    // Row 0 unmasked, row 1 its last third masked, row 2 every key masked.
    auto mask = torch::zeros({batch, 1, 1, kv_seq});
    mask.index_put_({1, 0, 0, torch::indexing::Slice(kv_seq - kv_seq / 3, kv_seq)}, lowest);
    mask.index_put_({2}, lowest);
    for (const bool masked : {false, true}) {
      SCOPED_TRACE(masked ? "masked" : "no mask");
      const auto m = masked ? mask : torch::Tensor();
      torch::Tensor mine, theirs;
      const int kernel_calls = records_during("bertft::attention_head_bf16",
                                              [&] { mine = onednn_attention(q, k, v, m, 0.125); });
      EXPECT_EQ(kernel_calls, kv_seq <= 128 ? 1 : 0);
      {
        const KernelOff off;
        EXPECT_EQ(records_during("bertft::attention_head_bf16",
                                 [&] { theirs = onednn_attention(q, k, v, m, 0.125); }),
                  0);
      }
      EXPECT_EQ(mine.scalar_type(), torch::kBFloat16);
      EXPECT_TRUE(torch::equal(mine, theirs))
          << "largest difference "
          << testing::max_abs_diff(mine.to(torch::kFloat), theirs.to(torch::kFloat));
      // And the attention it is: within bf16 rounding of float32's on the same values.
      const auto wide = onednn_attention_batched(q.to(torch::kFloat), k.to(torch::kFloat),
                                                 v.to(torch::kFloat), m, 0.125, 0.0);
      EXPECT_LT(testing::max_abs_diff(mine.to(torch::kFloat), wide),
                2e-2 * wide.abs().max().item<double>());
    }
  }
}

TEST(OneDnnAttention, TrainingOfTheModelTakesItAndMatchesTheBatchedOps) {
  // A layer in training mode (attention dropout on) with autograd: the head-by-head training
  // path, once forward and once backward per layer; with the attentions requested, the batched
  // ops, which give the same loss and gradients for the same seed.
  REQUIRE_ONEDNN();
  SmallModel small = head_dim_64_model(2);
  BertModel& model = small.model;
  const torch::Tensor &ids = small.ids, &mask = small.mask;
  model->train();
  const ScopedFp32Gemm onednn(Fp32Gemm::kOneDnn);
  const auto step = [&](bool attentions) {
    model->zero_grad();
    torch::manual_seed(21);
    ForwardOptions options;
    options.output_attentions = attentions;
    const auto out = model->forward(ids, mask, {}, options);
    out.last_hidden_state.pow(2).mean().backward();
    std::vector<torch::Tensor> grads = {out.last_hidden_state.detach()};
    for (const auto& p : model->parameters())
      if (p.grad().defined()) grads.push_back(p.grad().clone());
    return grads;
  };
  std::vector<torch::Tensor> by_head;
  EXPECT_EQ(records_during("bertft::onednn_attention_training", [&] { by_head = step(false); }), 2);
  std::vector<torch::Tensor> batched;
  EXPECT_EQ(records_during("bertft::onednn_attention_training", [&] { batched = step(true); }), 0);
  ASSERT_EQ(by_head.size(), batched.size());
  for (size_t i = 0; i < by_head.size(); ++i)
    EXPECT_LT(testing::max_abs_diff(by_head[i], batched[i]), 1e-5) << "tensor " << i;
}

TEST(OneDnnLinear, ResidualAddedInTheOutputPassIsTheSeparateSumBitForBit) {
  REQUIRE_ONEDNN();
  torch::manual_seed(6);
  const auto input = torch::randn({2, 5, 48}), weight = torch::randn({40, 48}),
             bias = torch::randn({40}), residual = torch::randn({2, 5, 40});
  {
    torch::NoGradGuard no_grad;
    const auto fused = onednn_linear_add(input, weight, bias, residual);
    EXPECT_TRUE(torch::equal(fused, onednn_linear(input, weight, bias) + residual));
    EXPECT_TRUE(torch::equal(onednn_linear_add(input, weight, {}, residual),
                             onednn_linear(input, weight, {}) + residual));
    EXPECT_THROW(onednn_linear_add(input, weight, bias, residual.narrow(2, 0, 39)), c10::Error);
  }
  EXPECT_THROW(onednn_linear_add(input, weight, bias, residual.clone().requires_grad_(true)),
               c10::Error);
  // The layers take it only without autograd and without active dropout.
  const ScopedFp32Gemm onednn(Fp32Gemm::kOneDnn);
  BertOutput output(testing::tiny_config().hidden_size(40).intermediate_size(48));
  output->eval();  // dropout off
  const auto with_grad = output(input, residual);
  ASSERT_TRUE(with_grad.requires_grad());
  torch::NoGradGuard no_grad;
  EXPECT_EQ(onednn_gemms_during(
                [&] { EXPECT_TRUE(torch::equal(output(input, residual), with_grad.detach())); }),
            1);
}

// The layers' fused residual add is taken only for what the output pass can add: a float32
// residual of the projection's full width, without a gradient to give back; else the layer adds
// it itself (a residual of width 1 broadcasts there, a bf16 one promotes, one with a gradient
// gets it).
TEST(OneDnnLinear, FusedResidualAddIsDeclinedForWhatItCannotAdd) {
  REQUIRE_ONEDNN();
  const ScopedFp32Gemm onednn(Fp32Gemm::kOneDnn);
  torch::manual_seed(7);
  Linear dense(48, 40);
  for (auto& p : dense->parameters()) p.requires_grad_(false);
  const auto input = torch::randn({2, 5, 48}), residual = torch::randn({2, 5, 40});
  {
    torch::NoGradGuard no_grad;
    const auto fused = linear_add_if_inference(*dense, input, residual);
    ASSERT_TRUE(fused.defined());
    EXPECT_LT(testing::max_abs_diff(fused, dense(input) + residual), 1e-5);
    EXPECT_FALSE(linear_add_if_inference(*dense, input, residual.narrow(2, 0, 1)).defined());
    EXPECT_FALSE(linear_add_if_inference(*dense, input, residual.to(torch::kBFloat16)).defined());
    // Without grad mode a residual's requires_grad asks for nothing.
    EXPECT_TRUE(
        linear_add_if_inference(*dense, input, residual.clone().requires_grad_(true)).defined());
  }
  const auto wants_grad = residual.clone().requires_grad_(true);
  EXPECT_FALSE(linear_add_if_inference(*dense, input, wants_grad).defined());
}

// What oneDNN cannot read in place is copied first: rows that overlap (a stride below the row's
// length) and a broadcast batch dimension (stride 0). A sum over nothing still adds the bias
// and applies the GELU; a bias of another width is refused.
TEST(OneDnnLinear, OperandsItCannotReadInPlaceAndEmptySums) {
  REQUIRE_ONEDNN();
  torch::manual_seed(9);
  torch::NoGradGuard no_grad;
  const auto weight = torch::randn({6, 8}), bias = torch::randn({6});
  const auto overlapping = torch::randn({40}).as_strided({4, 8}, {2, 1});
  EXPECT_LT(testing::max_abs_diff(onednn_linear(overlapping, weight, bias),
                                  torch::linear(overlapping, weight, bias)),
            1e-5);
  const auto broadcast = torch::randn({1, 5, 8}).expand({3, 5, 8}), b = torch::randn({3, 8, 4});
  EXPECT_LT(testing::max_abs_diff(onednn_matmul(broadcast, b), torch::matmul(broadcast, b)), 1e-5);
  const auto nothing = torch::empty({3, 0}), no_weight = torch::empty({6, 0});
  EXPECT_LT(testing::max_abs_diff(onednn_linear_gelu(nothing, no_weight, bias),
                                  torch::gelu(bias).expand({3, 6})),
            1e-6);
  EXPECT_LT(testing::max_abs_diff(onednn_linear(nothing, no_weight, bias), bias.expand({3, 6})),
            1e-6);
  EXPECT_THROW(onednn_linear(torch::randn({2, 8}), weight, torch::randn({5})), c10::Error);
  EXPECT_THROW(onednn_linear(torch::randn({2, 8}), weight, torch::randn({7})), c10::Error);
}

TEST(OneDnnLinear, WideRowMajorProductsInHalvesEqualTheWholeProducts) {
  REQUIRE_ONEDNN();
  torch::manual_seed(3);
  // An FFN's two weights with a wide side of 2100 (halves of 1088 and 1012), 6 tokens. The
  // forward's b (the transposed weight) is column-major: whole. In the float32 backward, the
  // input's gradient takes the weight, the weight's gradient the input, as row-major b: a wide N
  // is split into column halves, a wide K into two sums (the second added in the GEMM's output).
  // bf16 products stay whole (where oneDNN has them).
  for (const bool bf16 : {false, true})
    for (const auto& [in, out] : {std::pair<int64_t, int64_t>{24, 2100}, {2100, 24}}) {
      if (bf16 && !onednn_bf16_available()) continue;
      SCOPED_TRACE(fmt::format("{} in {} out {}", bf16 ? "bf16" : "fp32", in, out));
      const auto w = torch::randn({out, in}).requires_grad_(true);
      const auto b = torch::randn({out}).requires_grad_(true);
      const auto x = torch::randn({6, in}).requires_grad_(true);
      const auto upstream = torch::randn({6, out});
      const auto run = [&](bool split, int* gemms) {
        const ScopedGemmSplit scoped(split);
        // (bf16 weight gradients from oneDNN's inner product: their own test below.)
        const ScopedInnerProductWeightGradients matmul(false);
        std::vector<torch::Tensor> results;
        *gemms = onednn_gemms_during([&] {
          std::unique_ptr<Bf16Autocast> autocast;
          if (bf16) autocast = std::make_unique<Bf16Autocast>();
          const auto y = bf16 ? onednn_linear_bf16(x, w, b) : onednn_linear(x, w, b);
          results = torch::autograd::grad({y}, {x, w, b}, {upstream.to(y.scalar_type())});
          results.push_back(y);
        });
        return results;
      };
      int whole_gemms = 0, split_gemms = 0;
      const auto whole = run(false, &whole_gemms), halves = run(true, &split_gemms);
      // bf16 sums the bias gradient as a GEMV of ones: one more.
      EXPECT_EQ(whole_gemms, bf16 ? 4 : 3);
      // out 2100: the input's gradient in two halves; in 2100: the input's and the weight's.
      EXPECT_EQ(split_gemms, bf16 ? 4 : in > out ? 5 : 4);
      for (size_t i = 0; i < whole.size(); ++i) {
        EXPECT_EQ(halves[i].scalar_type(), whole[i].scalar_type());
        EXPECT_LT(relative_error(halves[i].to(torch::kFloat), whole[i].to(torch::kFloat)), 1e-6)
            << "result " << i;
      }
    }
}

TEST(OneDnnLinear, Bf16WeightGradientFromTheInnerProductEqualsThePlainProduct) {
  REQUIRE_ONEDNN_BF16();
  const testing::TwoThreads two;  // the products split their work between threads
  torch::manual_seed(6);
  // Wide and narrow sides, two widths of in with the same tokens and out (each shape its own
  // primitive), token counts that fill no pair of rows (bf16 kernels take rows in pairs) and none
  // (an empty sum: the matmul's zeros), each with and without the bias's gradient.
  for (const auto& [in, out] :
       {std::pair<int64_t, int64_t>{24, 2100}, {40, 2100}, {2100, 24}, {2100, 40}, {64, 48}})
    for (const int64_t tokens : {0, 1, 7, 64})
      for (const bool with_bias : {false, true}) {
        SCOPED_TRACE(fmt::format("in {} out {} tokens {} bias {}", in, out, tokens, with_bias));
        const auto dy = torch::randn({tokens, out}).to(torch::kBFloat16);
        const auto x = torch::randn({tokens, in}).to(torch::kBFloat16);
        const auto want = torch::mm(dy.to(torch::kDouble).t(), x.to(torch::kDouble));
        const auto want_bias = dy.to(torch::kDouble).sum(0);
        torch::Tensor matmul, inner, matmul_bias, inner_bias;
        const auto run = [&](bool inner_product, torch::Tensor* got, torch::Tensor* bias) {
          const ScopedInnerProductWeightGradients scoped(inner_product);
          return records_during("bertft::onednn_weight_gradient", [&] {
            *got = onednn_bf16_weight_gradient(dy, x, with_bias ? bias : nullptr);
          });
        };
        // Float32 results of `expected`'s sizes: zeros from no tokens, else within 1e-6.
        const auto check = [&](const torch::Tensor& got, const torch::Tensor& expected) {
          ASSERT_TRUE(got.defined());
          ASSERT_EQ(got.scalar_type(), torch::kFloat);
          ASSERT_EQ(got.sizes(), expected.sizes());
          if (tokens == 0) {
            EXPECT_TRUE(torch::equal(got, torch::zeros_like(got)));
          } else {
            EXPECT_LT(relative_error(got.to(torch::kDouble), expected), 1e-6);
          }
        };
        EXPECT_EQ(run(false, &matmul, &matmul_bias), 0);
        EXPECT_EQ(run(true, &inner, &inner_bias), tokens > 0 ? 1 : 0);
        check(matmul, want);
        check(inner, want);
        if (tokens > 0) {
          EXPECT_LT(relative_error(inner, matmul), 1e-6);
        }
        if (!with_bias) {
          EXPECT_FALSE(inner_bias.defined());
          continue;
        }
        check(matmul_bias, want_bias);
        check(inner_bias, want_bias);
      }
  const auto bf16 = [](int64_t rows, int64_t cols) {
    return torch::ones({rows, cols}, torch::kBFloat16);
  };
  EXPECT_THROW(onednn_bf16_weight_gradient(bf16(3, 2100), bf16(2, 4)), c10::Error);  // rows
  EXPECT_THROW(onednn_bf16_weight_gradient(bf16(3, 2100), bf16(4, 3).t()), c10::Error);
  EXPECT_THROW(onednn_bf16_weight_gradient(bf16(3, 2100), torch::ones({3, 4})), c10::Error);
}

TEST(OneDnnLinear, Bf16TrainingTakesTheInnerProductForWeightAndBiasGradients) {
  REQUIRE_ONEDNN_BF16();
  torch::manual_seed(7);
  // A linear layer's weight and bias gradients through onednn_linear_bf16's backward and, where
  // this CPU packs bf16 weights, through the packed copies' backward, are the inner product's of
  // the bf16 output gradient and the bf16 input, bit for bit, in one primitive (no product of
  // ones for the bias), for a narrow and a wide weight.
  for (const auto& [in, out] : {std::pair<int64_t, int64_t>{40, 24}, {2100, 24}}) {
    SCOPED_TRACE(fmt::format("in {} out {}", in, out));
    const auto w = (torch::randn({out, in}) * 0.05).requires_grad_(true);
    const auto b = torch::randn({out}).requires_grad_(true);
    const auto x = torch::randn({2, 5, in});
    const auto upstream = torch::randn({2, 5, out}).to(torch::kBFloat16);
    const ScopedInnerProductWeightGradients on(true);
    torch::Tensor want_bias;
    const auto want = onednn_bf16_weight_gradient(
        upstream.reshape({10, out}), x.to(torch::kBFloat16).reshape({10, in}), &want_bias);
    const auto gradients = [&](const std::function<torch::Tensor()>& forward) {
      torch::Tensor y;
      {
        const Bf16Autocast autocast;
        y = forward();
      }
      std::vector<torch::Tensor> got;
      const auto [inner_products, matmuls] =
          records_during("bertft::onednn_weight_gradient", "bertft::onednn_matmul", [&] {
            got = torch::autograd::grad({y}, {w, b}, {upstream});
          });
      EXPECT_EQ(inner_products, 1);
      EXPECT_EQ(matmuls, 0);  // x takes no gradient, and the bias's comes with the weight's
      return got;
    };
    // The bias's gradient alone (the weight's not asked for): a product of ones, equal to
    // rounding.
    const auto bias_alone = [&](const std::function<torch::Tensor()>& forward) {
      const Bf16Autocast autocast;
      const auto got = torch::autograd::grad({forward()}, {b}, {upstream})[0];
      EXPECT_LT(relative_error(got, want_bias), 1e-6);
    };
    const auto plain = gradients([&] { return onednn_linear_bf16(x, w, b); });
    EXPECT_TRUE(torch::equal(plain[0], want));
    EXPECT_TRUE(torch::equal(plain[1], want_bias));
    bias_alone([&] { return onednn_linear_bf16(x, w, b); });
    torch::NoGradGuard no_grad;
    const auto forward = onednn_pack_bf16_weight(w, PackedFor::kForward);
    const auto input_grad = onednn_pack_bf16_weight(w, PackedFor::kInputGradient);
    if (!forward.defined()) continue;  // this CPU's kernels read the plain weight
    torch::AutoGradMode grad(true);
    const auto packed =
        gradients([&] { return onednn_linear_bf16_packed_training(x, w, b, forward, input_grad); });
    EXPECT_TRUE(torch::equal(packed[0], want));
    EXPECT_TRUE(torch::equal(packed[1], want_bias));
    bias_alone([&] { return onednn_linear_bf16_packed_training(x, w, b, forward, input_grad); });
  }
}

TEST(OneDnnLinear, Bf16GoesToOneDnnOnlyWhereItHasBf16Products) {
  // oneDNN 2.6 has bf16 products on AVX-512 CPUs only; elsewhere (an AVX2-only CPU) a direct
  // bf16 call would throw, so bf16 stays on LibTorch's paths there, even under ScopedFp32Gemm.
  REQUIRE_ONEDNN();
  // (An ISA cap such as ONEDNN_MAX_CPU_ISA=AVX2 takes AVX-512 from oneDNN on any CPU.)
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  EXPECT_EQ(onednn_bf16_available(), avx512 && onednn_isa_cap_allows_avx512(onednn_isa_cap()));
  const ScopedFp32Gemm direct(Fp32Gemm::kOneDnn);
  const auto a = torch::ones({4, 8}, torch::kBFloat16), b = torch::ones({8, 4}, torch::kBFloat16);
  EXPECT_EQ(use_onednn_matmul(a, b), onednn_bf16_available());
}

TEST(OneDnnLinear, Bf16IsWhatAutocastComputesWithFloat32Gradients) {
  REQUIRE_ONEDNN_BF16();
  torch::manual_seed(3);
  const auto x = torch::randn({2, 9, 64}).requires_grad_(true);
  const auto w = (torch::randn({48, 64}) * 0.1).requires_grad_(true);
  const auto b = torch::randn({48}).requires_grad_(true);
  const auto upstream = torch::randn({2, 9, 48});
  torch::Tensor ref, got;
  {
    const Bf16Autocast autocast;
    ref = torch::linear(x, w, b);
    got = onednn_linear_bf16(x, w, b);
  }
  ASSERT_EQ(got.scalar_type(), torch::kBFloat16);
  ASSERT_EQ(ref.scalar_type(), torch::kBFloat16);
  // Both sum in float32 and round once to bf16: equal but for the summation order.
  EXPECT_LT(relative_error(got.to(torch::kFloat), ref.to(torch::kFloat)), 4e-3);
  const auto want = torch::autograd::grad({ref}, {x, w, b}, {upstream.to(torch::kBFloat16)});
  const auto have = torch::autograd::grad({got}, {x, w, b}, {upstream.to(torch::kBFloat16)});
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(have[i].scalar_type(), torch::kFloat) << i;
    // Autocast rounds the weight gradient to bf16 before casting it back; this path does not.
    EXPECT_LT(relative_error(have[i], want[i]), 1e-2) << i;
  }
  // The weight gradient against a float32 reference from the same bf16 operands.
  const auto dy = upstream.to(torch::kBFloat16).to(torch::kFloat).reshape({18, 48});
  const auto xb = x.detach().to(torch::kBFloat16).to(torch::kFloat).reshape({18, 64});
  EXPECT_LT(relative_error(have[1], torch::mm(dy.t(), xb)), 1e-5);
  EXPECT_LT(relative_error(have[2], dy.sum(0)), 1e-5);  // the bias's, summed in float32
}

// Inference in bf16: the GELU of the float32 sum rounded once, against autocast's projection
// rounded to bf16 and then its GELU: within a bf16 rounding or two.
TEST(OneDnnLinear, FusedGeluInBf16IsAutocastsGeluOfTheProjection) {
  REQUIRE_ONEDNN_BF16();
  torch::manual_seed(4);
  const auto x = torch::randn({4, 11, 32}) * 3, w = torch::randn({40, 32}), b = torch::randn({40});
  torch::NoGradGuard no_grad;
  const Bf16Autocast autocast;
  const auto plain = torch::gelu(torch::linear(x, w, b));
  const auto fused = onednn_linear_bf16_cast(x, w.to(torch::kBFloat16), b, /*gelu=*/true);
  ASSERT_EQ(fused.scalar_type(), torch::kBFloat16);
  ASSERT_EQ(plain.scalar_type(), torch::kBFloat16);
  const auto f = fused.to(torch::kFloat), p = plain.to(torch::kFloat);
  EXPECT_LT(testing::max_abs_diff(f, p), 2.0 / 128 * p.abs().max().item<double>());
  EXPECT_GT(p.abs().max().item<double>(), 1.0);
}

TEST(OneDnnLinear, Bf16BertModelTrainsAsUnderAutocast) {
  REQUIRE_ONEDNN_BF16();
  const auto ids = torch::randint(5, 99, {3, 12}, torch::kLong);
  auto mask = torch::ones({3, 12}, torch::kLong);
  mask.index_put_({1, torch::indexing::Slice(7, 12)}, 0);
  mask.index_put_({2}, 0);  // a fully masked row stays finite, as HF's uniform one
  const auto run = [&](Fp32Gemm engine) {
    const ScopedFp32Gemm scoped(engine);  // kOneDnn: directly; kBlas: through autocast
    torch::manual_seed(0);
    BertModel model(testing::tiny_config());
    model->eval();
    torch::Tensor loss, hidden;
    {
      const Bf16Autocast autocast;
      const auto out = model->forward(ids, mask);
      hidden = out.last_hidden_state.to(torch::kFloat);
      loss = hidden.pow(2).sum() + out.pooler_output.to(torch::kFloat).sum();
    }
    loss.backward();
    std::vector<torch::Tensor> result = {hidden.detach()};
    for (const auto& p : model->parameters()) result.push_back(p.grad());
    return result;
  };
  const auto autocast = run(Fp32Gemm::kBlas), direct = run(Fp32Gemm::kOneDnn);
  ASSERT_EQ(autocast.size(), direct.size());
  EXPECT_TRUE(torch::isfinite(direct[0]).all().item<bool>());
  // Within bf16 rounding; key.bias gets no gradient but rounding noise (softmax ignores a shift
  // of a row), so each tensor is held to a share of the largest gradient of its kind.
  double largest = 0;
  for (size_t i = 1; i < autocast.size(); ++i)
    largest = std::max(largest, autocast[i].abs().max().item<double>());
  EXPECT_LT(relative_error(direct[0], autocast[0]), 3e-2);
  for (size_t i = 1; i < autocast.size(); ++i)
    EXPECT_LT(testing::max_abs_diff(direct[i], autocast[i]),
              3e-2 * autocast[i].abs().max().item<double>() + 1e-3 * largest)
        << "tensor " << i;
}

/// The bert::Linear modules of `model`, and how many of them keep a bf16 cast now.
int64_t kept_bf16_casts(torch::nn::Module& model, int64_t* linears = nullptr) {
  int64_t kept = 0, all = 0;
  for (const auto& m : model.modules())
    if (const auto* linear = dynamic_cast<const LinearImpl*>(m.get())) {
      ++all;
      kept += linear->keeps_bf16_weight();
    }
  if (linears != nullptr) *linears = all;
  return kept;
}

TEST(OneDnnLinear, Bf16InferenceKeepsTheWeightCastWhileTheWeightIsUnchanged) {
  REQUIRE_ONEDNN_BF16();
  const ScopedFp32Gemm direct(Fp32Gemm::kOneDnn);  // the tiny model's GEMMs through oneDNN
  const auto ids = torch::randint(5, 99, {2, 9}, torch::kLong);
  const auto make = [] {
    torch::manual_seed(0);
    BertModel model(testing::tiny_config());
    model->eval();
    return model;
  };
  const auto infer = [&](BertModel& model) {
    const torch::NoGradGuard no_grad;
    const Bf16Autocast autocast;
    return model->forward(ids).last_hidden_state.to(torch::kFloat);
  };
  auto model = make();
  const auto first = infer(model);
  int64_t linears = 0;
  EXPECT_EQ(kept_bf16_casts(*model, &linears), linears);
  EXPECT_EQ(linears, 6 * testing::tiny_config().num_hidden_layers());
  EXPECT_TRUE(torch::equal(infer(model), first));  // the kept casts give the same bits
  // Weights changed in place: the next inference casts them again, as a fresh model with the
  // same changed weights computes (a stale cast would repeat `first`).
  const auto scale = [](BertModel& m) {
    const torch::NoGradGuard no_grad;
    for (auto& p : m->parameters()) p.mul_(1.5);
  };
  scale(model);
  auto fresh = make();
  scale(fresh);
  const auto changed = infer(model);
  EXPECT_FALSE(torch::equal(changed, first));
  EXPECT_TRUE(torch::equal(changed, infer(fresh)));
  // A forward that records autograd (training) drops every cast.
  {
    const Bf16Autocast autocast;
    model->forward(ids);
  }
  EXPECT_EQ(kept_bf16_casts(*model), 0);
  EXPECT_THROW(onednn_linear_bf16_cast(torch::randn({2, 4}), torch::randn({3, 4}), {}, false),
               c10::Error);  // a float32 weight is not a kept cast
}

// Where this CPU's bf16 kernels take a packed b, bf16 inference keeps each weight packed (and
// no plain cast beside it): the products are the plain cast's, bit for bit, with and without
// the GELU, from a float32 or bf16 input, for any number of rows.
TEST(OneDnnLinear, PackedBf16WeightGivesThePlainCastsProducts) {
  REQUIRE_ONEDNN_BF16();
  torch::manual_seed(9);
  const auto w = torch::randn({200, 96}), b = torch::randn({200});
  const auto packed = onednn_pack_bf16_weight(w);
  if (!packed.defined()) GTEST_SKIP() << "this CPU's bf16 kernels read the plain layout";
  EXPECT_EQ(packed.out_features(), 200);
  EXPECT_EQ(packed.in_features(), 96);
  EXPECT_GE(packed.nbytes(), 200 * 96 * 2);
  const torch::NoGradGuard no_grad;
  for (const int64_t rows : {1, 17, 300})
    for (const bool gelu : {false, true})
      for (const auto type : {torch::kFloat, torch::kBFloat16}) {
        const auto x = (torch::randn({rows, 3, 96}) * 2).to(type);
        const auto plain = onednn_linear_bf16_cast(x, w.to(torch::kBFloat16), b, gelu);
        const auto fast = onednn_linear_bf16_packed(x, packed, b, gelu);
        ASSERT_EQ(fast.sizes(), plain.sizes());
        ASSERT_EQ(fast.scalar_type(), torch::kBFloat16);
        EXPECT_TRUE(torch::equal(fast, plain)) << rows << " rows, gelu " << gelu;
        EXPECT_TRUE(torch::equal(onednn_linear_bf16_packed(x, packed, {}, gelu),
                                 onednn_linear_bf16_cast(x, w.to(torch::kBFloat16), {}, gelu)));
      }
  EXPECT_EQ(onednn_linear_bf16_packed(torch::randn({0, 96}), packed, b, false).sizes(),
            torch::IntArrayRef({0, 200}));
  EXPECT_THROW(onednn_linear_bf16_packed(torch::randn({2, 95}), packed, b, false), c10::Error);
  {
    const torch::AutoGradMode grad(true);
    EXPECT_THROW(
        onednn_linear_bf16_packed(torch::randn({2, 96}).requires_grad_(), packed, b, false),
        c10::Error);
  }
  ::setenv("BERTFT_BF16_PACK", "off", 1);
  EXPECT_FALSE(onednn_pack_bf16_weight(w).defined());
  ::unsetenv("BERTFT_BF16_PACK");
  // A model's bf16 inference keeps the packed weights, one cast per projection.
  const ScopedFp32Gemm direct(Fp32Gemm::kOneDnn);
  torch::manual_seed(0);
  BertModel model(testing::tiny_config());
  model->eval();
  {
    const Bf16Autocast autocast;
    model->forward(torch::randint(5, 99, {2, 9}, torch::kLong));
  }
  int64_t packed_linears = 0;
  for (const auto& m : model->modules())
    if (auto* linear = dynamic_cast<LinearImpl*>(m.get())) {
      packed_linears += linear->keeps_packed_bf16_weight();
      linear->drop_bf16_weight();
      EXPECT_FALSE(linear->keeps_bf16_weight());
    }
  EXPECT_EQ(packed_linears, 6 * testing::tiny_config().num_hidden_layers());
  // bf16 training's evaluations: where the weight's training copy matches it, inference takes
  // that copy rather than packing a second one.
  Linear trained(96, 200);
  const ScopedBf16ShadowPacking plain_copies(false);  // (packed ones: Bf16Shadows.Packed...)
  {
    const torch::AutoGradMode grad(true);  // a training forward
    const ScopedBf16Shadows shadows(true);
    const Bf16Autocast autocast;
    trained->forward(torch::randn({4, 96}).requires_grad_());
  }
  ASSERT_TRUE(bf16_shadow::find_current(trained->weight).defined());
  const auto evaluate = [&] {
    const torch::NoGradGuard no_grad;
    const Bf16Autocast autocast;
    return trained->forward(torch::randn({4, 96}));
  };
  evaluate();
  EXPECT_TRUE(trained->keeps_bf16_weight());
  EXPECT_FALSE(trained->keeps_packed_bf16_weight());
  // Once the weight has moved on without its copy, inference packs it.
  {
    const torch::NoGradGuard no_grad;
    trained->weight.mul_(0.5);
  }
  evaluate();
  EXPECT_TRUE(trained->keeps_packed_bf16_weight());
}

// bf16 training's shadows (linear.h): a forward under bf16 autocast that records autograd keeps
// the weight's bf16 copy, and the next takes it without casting; a weight changed in place is
// cast again; outputs and gradients are those of the forward that casts, bit for bit; a
// training forward without bf16 drops the copy, and a copy goes with its weight.
TEST(Bf16Shadows, TrainingForwardsKeepTheCastWhileItMatchesTheWeight) {
  REQUIRE_ONEDNN_BF16();
  const ScopedFp32Gemm direct(Fp32Gemm::kOneDnn);     // the small GEMM through oneDNN
  const ScopedBf16ShadowPacking plain_copies(false);  // packed: PackedCopies... below
  torch::manual_seed(6);
  const auto x = torch::randn({5, 7, 48}), upstream = torch::randn({5, 7, 40});
  const auto run = [&](Linear& linear, bool shadows) {
    const ScopedBf16Shadows scoped(shadows);
    const auto input = x.clone().requires_grad_(true);
    torch::Tensor y;
    {
      const Bf16Autocast autocast;
      y = linear->forward(input);
    }
    EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
    y.backward(upstream.to(y.scalar_type()));
    std::vector<torch::Tensor> out = {y.detach().to(torch::kFloat), input.grad(),
                                      linear->weight.grad(), linear->bias.grad()};
    linear->weight.mutable_grad() = torch::Tensor();
    linear->bias.mutable_grad() = torch::Tensor();
    return out;
  };
  const auto expect_equal = [](const std::vector<torch::Tensor>& a,
                               const std::vector<torch::Tensor>& b, const char* what) {
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << what << i;
  };
  const auto cast = [](const torch::Tensor& w) { return w.detach().to(torch::kBFloat16); };
  Linear linear(48, 40);
  const size_t before = bf16_shadow::count();
  const auto plain = run(linear, false);
  EXPECT_EQ(bf16_shadow::count(), before);  // off: nothing kept
  const auto kept = run(linear, true);
  ASSERT_EQ(bf16_shadow::count(), before + 1);
  const auto copy = bf16_shadow::find_current(linear->weight).plain;
  ASSERT_TRUE(copy.defined());
  EXPECT_TRUE(torch::equal(copy, cast(linear->weight)));
  expect_equal(plain, kept, "kept copy, tensor ");
  expect_equal(run(linear, true), kept, "again, tensor ");
  EXPECT_EQ(bf16_shadow::find_current(linear->weight).plain.data_ptr(),
            copy.data_ptr());  // no cast
  {
    const torch::NoGradGuard no_grad;
    linear->weight.mul_(1.5);
  }
  EXPECT_FALSE(bf16_shadow::find_current(linear->weight).defined());  // stale: not used
  const auto changed = run(linear, true);
  EXPECT_TRUE(torch::equal(bf16_shadow::find_current(linear->weight).plain, cast(linear->weight)));
  expect_equal(changed, run(linear, false), "changed weight, tensor ");
  EXPECT_FALSE(torch::equal(changed[0], kept[0]));
  EXPECT_EQ(bf16_shadow::count(), before);  // a forward with shadows off dropped the copy
  run(linear, true);
  // A writer's protocol (the fused AdamW's): the copy written with the weight, then written().
  {
    const torch::NoGradGuard no_grad;
    linear->weight.add_(0.25);
    bf16_shadow::writable(linear->weight).plain.copy_(cast(linear->weight));
    bf16_shadow::written(linear->weight);
  }
  const auto written = bf16_shadow::find_current(linear->weight).plain;
  ASSERT_TRUE(written.defined());
  EXPECT_TRUE(torch::equal(written, cast(linear->weight)));
  expect_equal(run(linear, true), run(linear, false), "written copy, tensor ");
  // Training without bf16 autocast holds no copy; a copy goes with its weight.
  linear->forward(x.clone().requires_grad_(true));
  EXPECT_EQ(bf16_shadow::count(), before);
  {
    Linear other(48, 40);
    run(other, true);
    EXPECT_EQ(bf16_shadow::count(), before + 1);
  }
  EXPECT_EQ(bf16_shadow::count(), before);
}

// The fused AdamW writes a weight and its bf16 copy through raw pointers, past autograd's version
// counters; written() counts the copy's change, so a graph recorded before the step refuses its
// backward (as for any in-place change of a tensor it saved) rather than use the new copy, plain
// or packed.
TEST(Bf16Shadows, AGraphRecordedBeforeAWriteRefusesItsBackward) {
  REQUIRE_ONEDNN_BF16();
  const ScopedFp32Gemm direct(Fp32Gemm::kOneDnn);
  const ScopedBf16Shadows shadows(true);
  for (const bool packing : {false, true}) {
    const ScopedBf16ShadowPacking packed_copies(packing);
    torch::manual_seed(8);
    Linear linear(48, 40);
    const auto input = torch::randn({5, 7, 48}).requires_grad_(true);
    torch::Tensor y;
    {
      const Bf16Autocast autocast;
      y = linear->forward(input);
    }
    {
      const torch::NoGradGuard no_grad;
      float* w = linear->weight.data_ptr<float>();
      for (int64_t i = 0; i < linear->weight.numel(); ++i) w[i] += 0.25f;
      const auto copy = bf16_shadow::writable(linear->weight);
      ASSERT_TRUE(copy.defined());
      if (copy.packed()) {
        const kernels::ScatteredLayout layouts[] = {copy.forward.writer(),
                                                    copy.input_grad.writer()};
        kernels::f32_to_bf16_scattered(w, 0, linear->weight.numel(), layouts, 2);
      } else {
        ASSERT_FALSE(packing && onednn_pack_bf16_weight(linear->weight.detach()).defined());
        const auto fresh = linear->weight.detach().to(torch::kBFloat16);
        std::memcpy(copy.plain.data_ptr(), fresh.data_ptr(), copy.plain.nbytes());
      }
      bf16_shadow::written(linear->weight);
    }
    EXPECT_TRUE(bf16_shadow::find_current(linear->weight).defined());  // the copy is current
    EXPECT_THROW(y.sum().backward(), c10::Error) << "packing " << packing;
  }
}

// Where this CPU's bf16 kernels take a packed b, bf16 training keeps each weight's copy packed
// twice, for the forward's product and for the input gradient's: outputs and gradients (of a
// float32 and of a bf16 input) are the casting forward's, bit for bit, for shapes whose sides
// are not multiples of the layout's blocks; the writer's pieces, wherever they start and end,
// lay out what a fresh pack lays out, through its vector paths and its scalar one alike.
TEST(Bf16Shadows, PackedCopiesGiveTheCastsOutputsAndGradients) {
  REQUIRE_ONEDNN_BF16();
  const ScopedFp32Gemm direct(Fp32Gemm::kOneDnn);
  const ScopedBf16ShadowPacking packed_copies(true);
  for (const auto& [in, out] : {std::pair<int64_t, int64_t>{48, 40}, {70, 100}, {96, 33}}) {
    torch::manual_seed(in + out);
    Linear linear(in, out);
    for (const auto type : {torch::kFloat, torch::kBFloat16}) {
      const auto x = torch::randn({5, 7, in}).to(type), upstream = torch::randn({5, 7, out});
      const auto run = [&](bool shadows) {
        const ScopedBf16Shadows scoped(shadows);
        const auto input = x.clone().requires_grad_(true);
        torch::Tensor y;
        {
          const Bf16Autocast autocast;
          y = linear->forward(input);
        }
        y.backward(upstream.to(y.scalar_type()));
        std::vector<torch::Tensor> result = {y.detach(), input.grad(), linear->weight.grad(),
                                             linear->bias.grad()};
        linear->weight.mutable_grad() = torch::Tensor();
        linear->bias.mutable_grad() = torch::Tensor();
        return result;
      };
      const auto cast = run(false);
      const auto packed = run(true);
      const auto copy = bf16_shadow::find_current(linear->weight);
      if (!copy.packed()) GTEST_SKIP() << "this CPU's bf16 kernels read the plain layout";
      for (size_t i = 0; i < cast.size(); ++i)
        EXPECT_TRUE(torch::equal(cast[i], packed[i]))
            << in << "x" << out << " " << type << " tensor " << i;
      EXPECT_TRUE(torch::equal(run(true)[1], cast[1]));  // again, from the kept copy
    }
    // A writer's pieces: an update written piece by piece equals a fresh pack of the weight.
    const torch::NoGradGuard no_grad;
    linear->weight.mul_(-0.75);
    const auto copy = bf16_shadow::writable(linear->weight);
    ASSERT_TRUE(copy.packed());
    const float* w = linear->weight.data_ptr<float>();
    const int64_t n = linear->weight.numel();
    for (const auto* packed : {&copy.forward, &copy.input_grad}) {
      const auto fresh = onednn_pack_bf16_weight(linear->weight, packed->use()).storage();
      for (const int64_t piece : {n, int64_t{37}, 16 * in, int64_t{512}}) {
        packed->storage().zero_();
        const auto layout = packed->writer();
        for (int64_t at = 0; at < n; at += piece)
          kernels::f32_to_bf16_scattered(w + at, at, std::min(piece, n - at), &layout);
        EXPECT_TRUE(torch::equal(packed->storage(), fresh)) << in << "x" << out << " " << piece;
      }
      auto scalar = packed->writer();  // no vector path
      scalar.pair_col = nullptr;
      scalar.strided_runs = false;
      packed->storage().zero_();
      kernels::f32_to_bf16_scattered(w, 0, n, &scalar);
      EXPECT_TRUE(torch::equal(packed->storage(), fresh)) << in << "x" << out << " scalar";
    }
    bf16_shadow::written(linear->weight);
    EXPECT_TRUE(bf16_shadow::find_current(linear->weight).packed());
    // An evaluation reads the copy packed for the forward.
    const Bf16Autocast autocast;
    const auto x = torch::randn({3, in});
    EXPECT_TRUE(torch::equal(linear->forward(x),
                             onednn_linear_bf16_cast(x, linear->weight.to(torch::kBFloat16),
                                                     linear->bias, /*gelu=*/false)));
    EXPECT_TRUE(linear->keeps_packed_bf16_weight());
  }
  EXPECT_TRUE(kernels::scattered_has_vector_paths() || !__builtin_cpu_supports("avx512bw"));
}

TEST(OneDnnLinear, TheEngineIsAFixedRuleOfTheCpu) {
  const auto& first = fp32_gemm();
  EXPECT_EQ(&first, &fp32_gemm());  // decided once
  if (!onednn_built()) {
    EXPECT_EQ(first.engine, Fp32Gemm::kBlas);
  }
  EXPECT_NE(first.reason.find(first.engine == Fp32Gemm::kOneDnn ? "oneDNN" : "BLAS"),
            std::string::npos)
      << first.reason;
}

TEST(OneDnnLinear, LinearTakesItForLargeFp32GemmsOutsideAutocast) {
  REQUIRE_ONEDNN();
  const auto big = torch::randn({256, 64}), w = torch::randn({64, 64});  // 2^20 multiply-adds
  EXPECT_EQ(use_onednn_linear(big, w), fp32_gemm().engine == Fp32Gemm::kOneDnn);
  {
    const ScopedFp32Gemm onednn(Fp32Gemm::kOneDnn);
    EXPECT_TRUE(use_onednn_linear(torch::randn({2, 64}), w));  // forced: every size
    EXPECT_FALSE(use_onednn_linear(big.to(torch::kBFloat16), w));
    {
      const Bf16Autocast bf16;
      EXPECT_FALSE(use_onednn_linear(big, w));
      // autocast's bf16 projection, directly (where oneDNN has bf16 products)
      EXPECT_EQ(use_onednn_bf16_linear(big, w), onednn_bf16_available());
      const ScopedFp32Gemm through_autocast(Fp32Gemm::kBlas);
      EXPECT_FALSE(use_onednn_bf16_linear(big, w));
    }
    EXPECT_FALSE(use_onednn_bf16_linear(big, w));  // no autocast
    const ScopedFp32Gemm blas(Fp32Gemm::kBlas);
    EXPECT_FALSE(use_onednn_linear(big, w));
  }
  EXPECT_FALSE(use_onednn_linear(torch::randn({255, 64}), w));  // below the size
}

// Only the FFN's bias trained (BitFit-style): the fused-GELU inference path must not be taken
// (it has no backward); the bias gradient is the plain path's.
TEST(OneDnnLinear, IntermediateWithOnlyItsBiasTrainedKeepsAutograd) {
  REQUIRE_ONEDNN();
  const auto hidden = torch::randn({2, 5, testing::tiny_config().hidden_size()});
  const auto bias_grad = [&](Fp32Gemm engine) {
    const ScopedFp32Gemm scoped(engine);
    torch::manual_seed(0);
    BertIntermediate ffn(testing::tiny_config());
    for (auto& p : ffn->named_parameters()) p.value().requires_grad_(p.key() == "dense.bias");
    ffn->forward(hidden).pow(2).sum().backward();
    return ffn->named_parameters()["dense.bias"].grad();
  };
  const auto blas = bias_grad(Fp32Gemm::kBlas), onednn = bias_grad(Fp32Gemm::kOneDnn);
  ASSERT_TRUE(onednn.defined());
  EXPECT_LT(testing::max_abs_diff(onednn, blas), 1e-5 * blas.abs().max().item<double>());
  EXPECT_GT(blas.abs().max().item<double>(), 0.0);
}

TEST(OneDnnLinear, BertModelTrainsTheSameThroughEitherEngine) {
  REQUIRE_ONEDNN();
  const auto ids = torch::randint(5, 99, {3, 12}, torch::kLong);
  auto mask = torch::ones({3, 12}, torch::kLong);
  mask.index_put_({1, torch::indexing::Slice(7, 12)}, 0);  // padding: the attention mask added
  const auto run = [&](Fp32Gemm engine) {
    const ScopedFp32Gemm scoped(engine);
    torch::manual_seed(0);
    BertModel model(testing::tiny_config());
    model->eval();  // no dropout: the two runs must see the same function
    const auto out = model->forward(ids, mask);
    (out.last_hidden_state.pow(2).sum() + out.pooler_output.sum()).backward();
    std::vector<torch::Tensor> result = {out.last_hidden_state.detach()};
    for (const auto& p : model->parameters()) result.push_back(p.grad());
    return result;
  };
  const auto blas = run(Fp32Gemm::kBlas), onednn = run(Fp32Gemm::kOneDnn);
  ASSERT_EQ(blas.size(), onednn.size());
  for (size_t i = 0; i < blas.size(); ++i)
    EXPECT_LT(testing::max_abs_diff(onednn[i], blas[i]),
              1e-5 * blas[i].abs().max().item<double>() + 1e-7)
        << "tensor " << i;
}

}  // namespace
}  // namespace bert
