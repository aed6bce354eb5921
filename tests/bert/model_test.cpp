#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "bert/checkpoint/load.h"
#include "bert/common/autocast.h"
#include "bert/model/attention.h"
#include "bert/model/bert_model.h"
#include "bert/model/embeddings.h"
#include "bert/model/layer.h"
#include "bert/model/onednn_linear.h"
#include "bert/model/pretraining.h"
#include "tests/support/test_support.h"

namespace bert {
namespace {

using testing::tiny_config;

class BertModelTest : public testing::SeededTest {};

std::map<std::string, std::vector<int64_t>> manifest_keys(const std::string& model) {
  std::ifstream in(testing::hf_fixture_dir() / "manifest.json");
  const auto manifest = nlohmann::json::parse(in);
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& [k, v] : manifest["models"][model]["state_dict_keys"].items())
    out[k] = v["shape"].get<std::vector<int64_t>>();
  return out;
}

std::map<std::string, std::vector<int64_t>> model_keys(const torch::nn::Module& m) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& [k, t] : state_dict(m)) out[k] = t.sizes().vec();
  return out;
}

// The fixture's own config: its key list and shapes follow from it.
BertConfig fixture_config() {
  return BertConfig::from_file(testing::hf_fixture_dir() / "models" / "seqcls3" / "config.json");
}

TEST_F(BertModelTest, KeysAndShapesEqualHfBertModel) {
  BERTFT_REQUIRE_PATH(testing::hf_fixture_dir() / "manifest.json");
  BertModel model(fixture_config());
  EXPECT_EQ(model_keys(*model), manifest_keys("bert_model"));
}

TEST_F(BertModelTest, KeysAndShapesEqualHfBertForPreTraining) {
  BERTFT_REQUIRE_PATH(testing::hf_fixture_dir() / "manifest.json");
  BertForPreTraining model(fixture_config());
  auto expected = manifest_keys("pretraining");
  for (const auto& [alias, target] : BertForPreTrainingImpl::tied_aliases()) expected.erase(alias);
  EXPECT_EQ(model_keys(*model), expected);
}

// Without autograd the feed-forward activation runs in place on the projection's output; the
// encoder's outputs are bit for bit those of a forward with autograd, for every activation, in
// fp32 and under bf16 autocast.
TEST_F(BertModelTest, InferenceWithoutAutogradGivesTheSameOutputs) {
  for (const auto activation : {Activation::kGelu, Activation::kGeluNew, Activation::kRelu})
    for (const bool bf16 : {false, true}) {
      auto config = tiny_config();
      config.hidden_act(activation);
      BertModel model(config);
      model->eval();
      const auto ids = torch::tensor({{2, 17, 29, 3}, {2, 40, 3, 0}}, torch::kLong);
      const auto mask = torch::tensor({{1, 1, 1, 1}, {1, 1, 1, 0}}, torch::kLong);
      const auto run = [&] {
        const testing::CpuBf16Autocast autocast(bf16);
        return model->forward(ids, mask, torch::zeros_like(ids)).last_hidden_state;
      };
      const auto with_grad = run();
      ASSERT_TRUE(with_grad.requires_grad());
      torch::Tensor without;
      {
        c10::InferenceMode inference;
        without = run();
      }
      EXPECT_TRUE(torch::equal(with_grad.detach(), without))
          << "activation " << static_cast<int>(activation) << (bf16 ? " bf16" : " fp32");
    }
}

TEST_F(BertModelTest, DecoderIsTiedToWordEmbeddings) {
  BertForPreTraining model(tiny_config());
  model->eval();
  const auto ids = torch::tensor({{2, 17, 29, 3}}, torch::kLong);
  const auto before = model->forward(ids).prediction_logits;
  {
    torch::NoGradGuard no_grad;
    model->bert->embeddings->word_embeddings->weight[17].add_(torch::randn({32}));
  }
  const auto after = model->forward(ids).prediction_logits;
  // Every position's logit for token 17 changes: the decoder reads the embedding matrix.
  EXPECT_GT((after.select(2, 17) - before.select(2, 17)).abs().min().item<double>(), 1e-4);
}

// Under bf16 autocast (what training.precision bf16 / auto does on CPUs with fast bf16) the MLM
// head's LayerNorm gets a bf16 input with no fp32 residual; the logits stay those of fp32 to
// bf16's precision.
TEST_F(BertModelTest, PreTrainingHeadsRunUnderBf16Autocast) {
  BertForPreTraining model(tiny_config());
  model->eval();
  const auto ids = torch::tensor({{2, 17, 29, 3}}, torch::kLong);
  const auto fp32 = model->forward(ids).prediction_logits;
  torch::Tensor bf16;
  {
    const testing::CpuBf16Autocast autocast;
    bf16 = model->forward(ids).prediction_logits.to(torch::kFloat);
  }
  EXPECT_TRUE(torch::isfinite(bf16).all().item<bool>());
  EXPECT_LT(testing::max_abs_diff(bf16, fp32), 0.05 * fp32.abs().max().item<double>());
}

TEST_F(BertModelTest, PaddingDoesNotChangeRealTokens) {
  BertModel model(tiny_config());
  model->eval();
  const auto ids = torch::tensor({{2, 17, 29, 3}}, torch::kLong);
  const auto padded = torch::tensor({{2, 17, 29, 3, 0, 0}}, torch::kLong);
  const auto mask = torch::tensor({{1, 1, 1, 1, 0, 0}}, torch::kLong);
  const auto a = model->forward(ids, torch::ones_like(ids)).last_hidden_state;
  const auto b = model->forward(padded, mask).last_hidden_state.slice(1, 0, 4);
  EXPECT_LT(testing::max_abs_diff(a, b), 1e-6);
}

// Self-attention written out the way HF's BertSelfAttention computes it (no fused paths).
torch::Tensor plain_attention(BertSelfAttention& attention,
                              const torch::Tensor& hidden,
                              const torch::Tensor& additive_mask,
                              int64_t heads) {
  const auto p = attention->named_parameters();
  const int64_t batch = hidden.size(0), seq = hidden.size(1), width = hidden.size(2);
  const int64_t dim = width / heads;
  const auto project = [&](const std::string& name) {
    return torch::linear(hidden, p[name + ".weight"], p[name + ".bias"])
        .view({batch, seq, heads, dim})
        .permute({0, 2, 1, 3});
  };
  auto scores = torch::matmul(project("query"), project("key").transpose(-1, -2)) /
                std::sqrt(static_cast<double>(dim));
  if (additive_mask.defined()) scores = scores + additive_mask;
  return torch::matmul(torch::softmax(scores, -1), project("value"))
      .permute({0, 2, 1, 3})
      .reshape({batch, seq, width});
}

// head_dim 64 (bert-base's) takes the one-GEMM path (scale and mask folded into baddbmm), head_dim
// 8 the in-place one; the fixtures (head_dim 8) test only the second. Both must equal the plain
// computation within 1e-5 in fp32, forward and backward (the input's gradient and every
// parameter's), with padding and a fully masked sequence.
TEST_F(BertModelTest, FusedAttentionEqualsThePlainComputation) {
  for (const int64_t heads : {2, 16}) {
    auto config = tiny_config();
    config.hidden_size(128).num_attention_heads(heads);
    BertSelfAttention attention(config);
    attention->eval();
    std::vector<torch::Tensor> inputs = attention->parameters();
    const auto keep =
        torch::tensor({{1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 0}});
    const auto mask = additive_attention_mask(keep, torch::kFloat);
    for (const bool masked : {true, false}) {
      const auto m = masked ? mask : torch::Tensor();
      const auto hidden = torch::randn({3, 7, 128}, torch::requires_grad());
      inputs.push_back(hidden);
      const auto fused = attention->forward(hidden, m);
      const auto grad_out = torch::randn_like(fused);
      const auto fused_grads = torch::autograd::grad({fused}, inputs, {grad_out});
      const auto plain = plain_attention(attention, hidden, m, heads);
      const auto plain_grads = torch::autograd::grad({plain}, inputs, {grad_out});
      inputs.pop_back();
      const auto what = fmt::format("heads {} masked {}", heads, masked);
      EXPECT_TRUE(torch::isfinite(fused).all().item<bool>()) << what;
      EXPECT_LT(testing::max_abs_diff(fused, plain), 1e-5) << what;
      for (size_t i = 0; i < fused_grads.size(); ++i)
        EXPECT_LT(testing::max_abs_diff(fused_grads[i], plain_grads[i]), 1e-5) << what << " " << i;
    }
  }
}

// A few query rows (a sentence head's last layer) attend without the keys and values of every
// position (BertSelfAttention::attend_rows_without_keys). Against the plain computation of those
// rows, within 1e-5 in fp32, forward and backward (the input's gradient and every parameter's),
// with padding and a fully masked sequence, in inference and in training with dropout: the plain
// computation drops the probabilities with hash_dropout as [batch, rows, heads, seq] from the
// same seed.
TEST_F(BertModelTest, RowsAttendWithoutKeysAsThePlainComputation) {
  struct Shape {
    int64_t batch, seq, width, heads;
  };
  // The last shape's products are large enough for onednn_matmul, the others' go to torch::matmul.
  for (const auto [batch, seq, width, heads] :
       {Shape{3, 7, 128, 2}, Shape{3, 7, 128, 16}, Shape{16, 64, 256, 4}})
    for (const bool training : {false, true}) {
      const auto what = fmt::format("batch {} seq {} width {} heads {} training {}", batch, seq,
                                    width, heads, training);
      const int64_t dim = width / heads;
      if (batch == 16 && onednn_built()) {
        ASSERT_TRUE(use_onednn_matmul(torch::empty({batch, 2 * heads, width}),
                                      torch::empty({batch, width, seq})));
      }
      auto config = tiny_config();
      config.hidden_size(width).num_attention_heads(heads).attention_probs_dropout_prob(0.3);
      BertSelfAttention attention(config);
      {
        torch::NoGradGuard no_grad;
        for (const auto& p : attention->named_parameters())
          if (p.key().find("bias") != std::string::npos) p.value().normal_(0.0, 0.5);
      }
      attention->train(training);
      const auto p = attention->named_parameters();
      auto keep = torch::ones({batch, seq}, torch::kLong);
      keep[1].slice(0, seq / 2).fill_(0);  // padding
      keep[2].fill_(0);                    // a fully masked sequence
      const auto mask = additive_attention_mask(keep, torch::kFloat);
      const auto hidden = torch::randn({batch, seq, width}, torch::requires_grad());
      const auto rows = hidden.index_select(1, torch::tensor({0, 4}, torch::kLong));
      torch::manual_seed(11);
      const auto fast = attention->forward(hidden, mask, nullptr, rows);
      torch::manual_seed(11);
      const auto project = [&](const torch::Tensor& x, const std::string& name) {
        return torch::linear(x, p[name + ".weight"], p[name + ".bias"])
            .view({batch, x.size(1), heads, dim});
      };
      const auto scores =
          torch::einsum("brhd,bshd->brhs", {project(rows, "query"), project(hidden, "key")}) /
              std::sqrt(static_cast<double>(dim)) +
          mask;
      const auto probs = hash_dropout(torch::softmax(scores, -1), 0.3, training);
      const auto plain = torch::einsum("brhs,bshd->brhd", {probs, project(hidden, "value")})
                             .reshape({batch, 2, width});
      ASSERT_EQ(fast.sizes(), plain.sizes()) << what;
      EXPECT_LT(testing::max_abs_diff(fast, plain), 1e-5) << what;
      if (training) {
        EXPECT_GT(testing::max_abs_diff(fast, attention->forward(hidden, mask, nullptr, rows)),
                  1e-3)
            << what;  // dropout drew a mask
      }

      std::vector<torch::Tensor> inputs = attention->parameters();
      inputs.push_back(hidden);
      const auto grad_out = torch::randn_like(fast);
      const auto grads = [&](const torch::Tensor& out) {
        return torch::autograd::grad({out}, inputs, {grad_out}, /*retain_graph=*/true);
      };
      const auto fast_grads = grads(fast), plain_grads = grads(plain);
      // Within 1e-5 of each gradient's largest (a weight's sums over every row).
      for (size_t i = 0; i < fast_grads.size(); ++i)
        EXPECT_LE(testing::max_abs_diff(fast_grads[i], plain_grads[i]),
                  1e-5 * std::max(1.0, plain_grads[i].abs().max().item<double>()))
            << what << " " << i;
    }
}

TEST_F(BertModelTest, FullyMaskedRowStaysFiniteUnderBf16Autocast) {
  auto config = tiny_config();
  config.hidden_size(128).num_attention_heads(2);
  BertSelfAttention attention(config);
  attention->eval();
  const auto keep = torch::tensor({{1, 1, 1, 0}, {0, 0, 0, 0}});
  torch::Tensor out;
  {
    const testing::CpuBf16Autocast autocast;
    out =
        attention->forward(torch::randn({2, 4, 128}), additive_attention_mask(keep, torch::kFloat));
  }
  EXPECT_TRUE(torch::isfinite(out).all().item<bool>());
}

TEST_F(BertModelTest, InitialisationFollowsBert) {
  auto config = tiny_config();
  config.initializer_range(0.02).vocab_size(2000).hidden_size(64);
  BertModel model(config);
  const auto& w = model->embeddings->word_embeddings->weight;
  EXPECT_NEAR(w.slice(0, 1).std().item<double>(), 0.02, 0.001);
  EXPECT_EQ(w[0].abs().sum().item<double>(), 0.0);  // padding row
  for (const auto& [name, t] : state_dict(*model)) {
    if (name.find("LayerNorm.weight") != std::string::npos) {
      EXPECT_TRUE(torch::all(t == 1).item<bool>()) << name;
    }
    if (name.find("bias") != std::string::npos) {
      EXPECT_TRUE(torch::all(t == 0).item<bool>()) << name;
    }
  }
  // The pre-training heads as HF's: every bias (the MLM decoder's own included) zero, the
  // transform's LayerNorm weight one, their dense weights drawn with initializer_range.
  BertForPreTraining pretraining(config);
  size_t biases = 0;
  for (const auto& [name, t] : state_dict(*pretraining)) {
    if (name.rfind("cls.", 0) != 0) continue;
    if (name.find("bias") != std::string::npos) {
      EXPECT_TRUE(torch::all(t == 0).item<bool>()) << name;
      ++biases;
    }
    if (name.find("LayerNorm.weight") != std::string::npos) {
      EXPECT_TRUE(torch::all(t == 1).item<bool>()) << name;
    }
  }
  EXPECT_EQ(biases, 4u);  // predictions.bias, transform.dense.bias, its LayerNorm's, NSP's
  EXPECT_NEAR(
      state_dict(*pretraining).at("cls.predictions.transform.dense.weight").std().item<double>(),
      0.02, 0.002);
}

// One token type (RoBERTa's type_vocab_size 1): every token takes type 0's row whatever ids
// the caller gives, as HF's RoBERTa tokenizers give 0 for both texts of a pair.
TEST_F(BertModelTest, OneTokenTypeIgnoresTheIdsGiven) {
  auto config = tiny_config();
  config.type_vocab_size(1);
  BertModel model(config);
  model->eval();
  const auto ids = torch::randint(5, 99, {2, 6});
  const auto mask = torch::ones({2, 6}, torch::kLong);
  const auto zeros = model->forward(ids, mask, torch::zeros({2, 6}, torch::kLong));
  const auto pair = model->forward(ids, mask, torch::tensor({0, 0, 0, 1, 1, 1}).repeat({2, 1}));
  EXPECT_TRUE(torch::equal(zeros.last_hidden_state, pair.last_hidden_state));
}

// DistilBERT adds the attention's output to its input without a dropout (its FFN output has
// one): in training the block gives its evaluation output; BERT's drops.
TEST_F(BertModelTest, DistilBertsAttentionOutputHasNoDropout) {
  for (const auto family : {ModelFamily::kDistilBert, ModelFamily::kBert}) {
    auto config = tiny_config();
    config.family(family).hidden_dropout_prob(0.5);
    BertSelfOutput block(config);
    const auto hidden = torch::randn({2, 5, config.hidden_size()});
    const auto residual = torch::randn({2, 5, config.hidden_size()});
    block->eval();
    const auto evaluated = block->forward(hidden, residual);
    block->train();
    const auto trained = block->forward(hidden, residual);
    EXPECT_EQ(torch::allclose(trained, evaluated), family == ModelFamily::kDistilBert)
        << static_cast<int>(family);
  }
}

// The embeddings' own dropout (hidden_dropout_prob after their LayerNorm) drops in training and
// not in evaluation.
TEST_F(BertModelTest, EmbeddingsDropOutInTrainingOnly) {
  auto config = tiny_config();
  config.hidden_dropout_prob(0.5);
  BertEmbeddings embeddings(config);
  const auto ids = torch::randint(5, 99, {4, 16});
  const auto zeros = [&] { return embeddings->forward(ids, {}, {}).eq(0).sum().item<int64_t>(); };
  embeddings->train();
  const int64_t dropped = zeros();
  EXPECT_GT(dropped, 4 * 16 * 32 / 4);  // about half of 2048
  EXPECT_LT(dropped, 4 * 16 * 32 * 3 / 4);
  embeddings->eval();
  EXPECT_EQ(zeros(), 0);
}

// Without autograd the intermediate projection takes its activation in the GEMM's output pass
// (exact GELU) or in place on the projection; each activation gives there what it gives under
// autograd: gelu_new's tanh form and ReLU are not turned into the exact GELU.
TEST_F(BertModelTest, EachActivationIsTheSameWithAndWithoutAutograd) {
  // On oneDNN, where the fused pass is (LibTorch's BLAS may be the default for small shapes).
  if (!onednn_built()) GTEST_SKIP() << "this build has no oneDNN";
  const ScopedFp32Gemm onednn(Fp32Gemm::kOneDnn);
  for (const auto activation : {Activation::kGelu, Activation::kGeluNew, Activation::kRelu}) {
    auto config = tiny_config();
    config.hidden_act(activation);
    BertIntermediate intermediate(config);
    const auto x = torch::randn({2, 5, 32});
    torch::Tensor fast;
    {
      const torch::NoGradGuard no_grad;
      fast = intermediate(x);
    }
    const auto with_grad = intermediate(x.clone().requires_grad_(true));
    EXPECT_LT(testing::max_abs_diff(fast, with_grad.detach()), 1e-6) << activation_name(activation);
  }
}

// ELECTRA's projected embeddings under bf16 autocast: the projection's product is bf16, but the
// residual stream it starts stays float32, as BERT's does (the first layer's residual add and
// LayerNorm see float32).
TEST_F(BertModelTest, ProjectedEmbeddingsKeepTheResidualStreamInFloat32UnderAutocast) {
  auto config = tiny_config();
  config.embedding_size(16);
  BertModel model(config);
  model->eval();
  const auto ids = torch::randint(5, 99, {2, 6});
  const testing::CpuBf16Autocast autocast;
  const auto out = model->forward(ids, {}, {}, {/*output_hidden_states=*/true});
  ASSERT_EQ(out.hidden_states.size(), 3u);
  for (const auto& h : out.hidden_states) {
    EXPECT_EQ(h.scalar_type(), torch::kFloat);
    EXPECT_TRUE(torch::isfinite(h).all().item<bool>());
  }
}

TEST_F(BertModelTest, ReturnsEveryHiddenStateAndAttention) {
  BertModel model(tiny_config());
  model->eval();
  const auto ids = torch::randint(5, 99, {2, 7});
  const auto out =
      model->forward(ids, {}, {}, {/*output_hidden_states=*/true, /*output_attentions=*/true});
  ASSERT_EQ(out.hidden_states.size(), 3u);
  ASSERT_EQ(out.attentions.size(), 2u);
  EXPECT_TRUE(torch::equal(out.hidden_states.back(), out.last_hidden_state));
  EXPECT_EQ(out.attentions[0].sizes(), (std::vector<int64_t>{2, 4, 7, 7}));
  EXPECT_LT(testing::max_abs_diff(out.attentions[1].sum(-1), torch::ones({2, 4, 7})), 1e-5);
  EXPECT_EQ(out.pooler_output.sizes(), (std::vector<int64_t>{2, 32}));
}

// A sentence head's forward (ForwardOptions::first_token_only): the last layer computes the first
// position alone; with last_layer_rows (pre-training), the positions named. The rows, the pooler's
// output and every parameter's gradient equal the whole layer's within 1e-5 in fp32 (gradients
// relative to their tensor's largest), on each attention path: head by head (head_dim 64) and
// batched (head_dim 8), in training (autograd, activation checkpointing too) and inference, with
// padding (in inference without the last layer's keys and values, attend_rows_without_keys);
// the last layer's attentions are the first row of the whole layer's. Under bf16
// autocast (the batched path) within bf16's rounding.
TEST_F(BertModelTest, FirstTokenOnlyAndChosenRowsEqualTheWholeLastLayer) {
  const auto ids = torch::randint(5, 99, {3, 9});
  const auto keep = torch::tensor(
      {{1, 1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 0, 0, 0, 0}, {1, 1, 0, 0, 0, 0, 0, 0, 0}});
  ForwardOptions first;
  first.first_token_only = true;
  for (const int64_t heads : {2, 16})
    for (const bool checkpoint : {false, true}) {
      auto config = tiny_config();
      config.hidden_size(128).num_attention_heads(heads).num_hidden_layers(3);
      config.hidden_dropout_prob(0.0).attention_probs_dropout_prob(0.0);
      BertModel model(config);
      {
        // Biases as after training, not the initial zeros (the key's bias drops out of the
        // first position's scores, the value's must be added back).
        torch::NoGradGuard no_grad;
        for (const auto& p : model->named_parameters())
          if (p.key().find("bias") != std::string::npos) p.value().normal_(0.0, 0.5);
      }
      model->train();
      model->encoder->set_activation_checkpointing(checkpoint);
      const auto what = fmt::format("heads {} checkpointing {}", heads, checkpoint);
      const auto weights = torch::randn({128});
      const auto gradients = [&](const BertModelOutput& out) {
        model->zero_grad();
        (out.pooler_output * weights).sum().backward();
        std::vector<torch::Tensor> grads;
        for (const auto& p : model->parameters())
          grads.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
        return grads;
      };
      const auto whole = model->forward(ids, keep);
      const auto whole_grads = gradients(whole);
      const auto one = model->forward(ids, keep, {}, first);
      const auto one_grads = gradients(one);
      ASSERT_EQ(one.last_hidden_state.sizes(), (std::vector<int64_t>{3, 1, 128})) << what;
      EXPECT_LT(testing::max_abs_diff(one.last_hidden_state.select(1, 0),
                                      whole.last_hidden_state.select(1, 0)),
                1e-5)
          << what;
      EXPECT_LT(testing::max_abs_diff(one.pooler_output, whole.pooler_output), 1e-5) << what;
      // Gradients: within 1e-5 of each tensor's largest (the HF fixture's rule; an embedding's
      // gradient sums over every token).
      for (size_t i = 0; i < whole_grads.size(); ++i)
        EXPECT_LE(testing::max_abs_diff(one_grads[i], whole_grads[i]),
                  1e-5 * std::max(1.0, whole_grads[i].abs().max().item<double>()))
            << what << " " << i;

      // Chosen rows (pre-training's [CLS] and masked positions; a row may repeat one): their
      // outputs and the gradients of a loss on them.
      ForwardOptions chosen;
      chosen.last_layer_rows = torch::tensor({{0, 3, 8}, {0, 2, 0}, {0, 1, 1}}, torch::kLong);
      const auto index = chosen.last_layer_rows.unsqueeze(-1).expand({3, 3, 128});
      const auto row_gradients = [&](const torch::Tensor& selected) {
        model->zero_grad();
        (selected * weights).sum().backward();
        std::vector<torch::Tensor> grads;
        for (const auto& p : model->parameters())
          grads.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
        return grads;
      };
      const auto whole_rows = model->forward(ids, keep).last_hidden_state.gather(1, index);
      const auto whole_row_grads = row_gradients(whole_rows);
      const auto rows = model->forward(ids, keep, {}, chosen).last_hidden_state;
      ASSERT_EQ(rows.sizes(), whole_rows.sizes()) << what;
      EXPECT_LT(testing::max_abs_diff(rows, whole_rows), 1e-5) << what;
      const auto row_grads = row_gradients(rows);
      for (size_t i = 0; i < whole_row_grads.size(); ++i)
        EXPECT_LE(testing::max_abs_diff(row_grads[i], whole_row_grads[i]),
                  1e-5 * std::max(1.0, whole_row_grads[i].abs().max().item<double>()))
            << what << " rows " << i;

      model->eval();
      torch::NoGradGuard no_grad;
      const auto pooled = model->forward(ids, keep).pooler_output;
      EXPECT_LT(testing::max_abs_diff(model->forward(ids, keep, {}, first).pooler_output, pooled),
                1e-5)
          << what;
      // Without autograd the rows attend without the keys and values of every position.
      EXPECT_LT(testing::max_abs_diff(model->forward(ids, keep, {}, chosen).last_hidden_state,
                                      model->forward(ids, keep).last_hidden_state.gather(1, index)),
                1e-5)
          << what;
      ForwardOptions attentions = first;
      attentions.output_attentions = true;
      const auto with = model->forward(ids, keep, {}, attentions);
      const auto all = model->forward(ids, keep, {}, {false, true});
      ASSERT_EQ(with.attentions.back().sizes(), (std::vector<int64_t>{3, heads, 1, 9})) << what;
      EXPECT_LT(
          testing::max_abs_diff(with.attentions.back(), all.attentions.back().narrow(2, 0, 1)),
          1e-5)
          << what;
      torch::Tensor bf16_one, bf16_whole;
      {
        const testing::CpuBf16Autocast autocast;
        bf16_one = model->forward(ids, keep, {}, first).pooler_output;
        bf16_whole = model->forward(ids, keep).pooler_output;
      }
      EXPECT_LT(testing::max_abs_diff(bf16_one.to(torch::kFloat), bf16_whole.to(torch::kFloat)),
                2e-2)
          << what;
    }
}

// The masked-LM heads of the other families: RoBERTa's, XLM-R's and ELECTRA's generator head
// apply GELU whatever hidden_act says (HF's RobertaLMHead and ElectraGeneratorPredictions call
// gelu itself); DistilBERT's applies the config's activation. dense -> act -> LayerNorm -> tied.
TEST_F(BertModelTest, MaskedLMHeadsOfOtherFamiliesTakeTheirOwnActivation) {
  struct Names {
    ModelFamily family;
    const char *dense, *norm, *bias;
  };
  for (const auto& n :
       {Names{ModelFamily::kRoberta, "lm_head.dense.", "lm_head.layer_norm.", "lm_head.bias"},
        Names{ModelFamily::kXlmRoberta, "lm_head.dense.", "lm_head.layer_norm.", "lm_head.bias"},
        Names{ModelFamily::kElectra, "generator_predictions.dense.",
              "generator_predictions.LayerNorm.", "generator_lm_head.bias"},
        Names{ModelFamily::kDistilBert, "vocab_transform.", "vocab_layer_norm.",
              "vocab_projector.bias"}}) {
    auto config = tiny_config();
    config.family(n.family).hidden_act(Activation::kRelu);
    if (n.family == ModelFamily::kElectra) config.embedding_size(config.hidden_size() / 2);
    const int64_t width =
        n.family == ModelFamily::kElectra ? config.embedding_dim() : config.hidden_size();
    torch::nn::Module owner;
    const auto tied = torch::randn({config.vocab_size(), width});
    MaskedLMHead head(owner, config, tied);
    auto params = owner.named_parameters();
    {
      torch::NoGradGuard no_grad;
      params[std::string(n.bias)].normal_();
      params[std::string(n.norm) + "weight"].normal_();
    }
    const auto hidden = torch::randn({2, 3, config.hidden_size()});
    auto x = torch::linear(hidden, params[std::string(n.dense) + "weight"],
                           params[std::string(n.dense) + "bias"]);
    x = n.family == ModelFamily::kDistilBert ? torch::relu(x) : torch::gelu(x);
    x = torch::layer_norm(x, {width}, params[std::string(n.norm) + "weight"],
                          params[std::string(n.norm) + "bias"], config.layer_norm_eps());
    const auto expected = torch::linear(x, tied, params[std::string(n.bias)]);
    EXPECT_LT(testing::max_abs_diff(head.forward(hidden), expected), 1e-5)
        << family_model_type(n.family);
  }
}

TEST_F(BertModelTest, RejectsSequencesLongerThanPositions) {
  BertModel model(tiny_config());
  EXPECT_THROW(model->forward(torch::zeros({1, 65}, torch::kLong)), c10::Error);
}

}  // namespace
}  // namespace bert
