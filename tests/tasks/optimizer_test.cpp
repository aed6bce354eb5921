// AdamW groups, steps and the linear schedule against HF's recorded Trainer behaviour.
#include "tasks/training/optimizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "bert/checkpoint/load.h"
#include "bert/checkpoint/pretrained_dir.h"
#include "bert/checkpoint/safetensors.h"
#include "bert/model/bert_model.h"
#include "bert/model/linear.h"
#include "bert/model/onednn_linear.h"
#include "tasks/registry.h"
#include "tasks/training/loss_scaler.h"
#include "tasks/training/schedule.h"
#include "tasks/training/trainer.h"
#include "tests/support/test_support.h"

namespace bert::tasks {
namespace {

nlohmann::json manifest() {
  std::ifstream in(testing::hf_fixture_dir() / "manifest.json");
  return nlohmann::json::parse(in);
}

TEST(Optimizer, NoDecayGroupIsHfs) {
  BERTFT_REQUIRE_PATH(testing::hf_fixture_dir() / "manifest.json");
  const auto m = manifest()["training"];
  for (const auto& name : m["decay_param_names"])
    EXPECT_FALSE(is_no_decay_parameter(name.get<std::string>())) << name;
  for (const auto& name : m["no_decay_param_names"])
    EXPECT_TRUE(is_no_decay_parameter(name.get<std::string>())) << name;
}

TEST(Optimizer, LinearScheduleMatchesHf) {
  BERTFT_REQUIRE_PATH(testing::hf_fixture_dir() / "manifest.json");
  const auto values = manifest()["lr_schedule"]["values"];
  const LinearSchedule schedule(5e-5, 10, 100);
  ASSERT_EQ(values.size(), 101u);
  for (size_t k = 0; k < values.size(); ++k)
    EXPECT_NEAR(schedule.at(static_cast<int64_t>(k)), values[k].get<double>(), 1e-12) << k;
  EXPECT_EQ(warmup_steps_for(1000, 0.1, -1), 100);
  EXPECT_EQ(warmup_steps_for(1001, 0.1, -1), 101);
  EXPECT_EQ(warmup_steps_for(1000, 0.1, 7), 7);
}

// Three steps of our AdamW against both of the fixture's: torch.optim.AdamW (Trainer's
// adamw_torch) and transformers' AdamW (adamw_hf, v4.31's default; it differs only in where
// eps and the decay enter, far below the tolerance). Which parameters are compared at which
// step comes from the fixture itself (every key named <optimizer>.step<k>.<param>).
class ThreeAdamWSteps : public ::testing::TestWithParam<const char*> {};

TEST_P(ThreeAdamWSteps, MatchTheFixturesOptimizer) {
  const std::string optimizer_name = GetParam();
  const auto dir = testing::hf_fixture_dir();
  BERTFT_REQUIRE_PATH(dir / "train_seqcls3.safetensors");
  const auto train = SafetensorsReader(dir / "train_seqcls3.safetensors").read_all();
  if (!train.count(optimizer_name + ".losses_steps1to3"))
    GTEST_SKIP() << "the fixture has no " << optimizer_name << " steps";
  const auto inputs = SafetensorsReader(dir / "inputs.safetensors").read_all();
  const auto config = BertConfig::from_file(dir / "models" / "seqcls3" / "config.json");
  auto adapter =
      TaskRegistry::global().create("sequence_classification", YamlReader(YAML::Node(), "test"));
  adapter->set_labels(config.id2label());
  auto model = adapter->build_model(config);
  load_state_dict(*model, read_weights(dir / "models" / "seqcls3" / "model.safetensors"),
                  "seqcls3");
  model->eval();
  Batch batch;
  batch.input_ids = inputs.at("input_ids");
  batch.attention_mask = inputs.at("attention_mask");
  batch.token_type_ids = inputs.at("token_type_ids");
  batch.labels = inputs.at("seq_cls_labels");

  AdamWSettings settings;
  settings.learning_rate = 5e-5;
  auto optimizer =
      make_optimizer(optimizer_name == "hf_adamw" ? "adamw_hf" : "adamw", *model, settings);
  const auto losses = train.at(optimizer_name + ".losses_steps1to3");
  for (int step = 1; step <= 3; ++step) {
    optimizer->zero_grad();
    const auto loss = adapter->loss(model->forward(batch), batch);
    EXPECT_NEAR(loss.item<double>(), losses[step - 1].item<double>(),
                1e-6 * std::abs(losses[step - 1].item<double>()));
    loss.backward();
    optimizer->step();
    const auto prefix = optimizer_name + ".step" + std::to_string(step) + ".";
    size_t in_fixture = 0, compared = 0;
    for (const auto& [key, value] : train) in_fixture += key.rfind(prefix, 0) == 0;
    for (const auto& p : model->named_parameters()) {
      const auto key = prefix + p.key();
      if (!train.count(key)) continue;
      // The README's tolerance, 2.5e-7, except where the step is rounding noise: AdamW's first
      // update is lr * g / (|g| + eps), so where |g| is within the gradients' own noise (the
      // README's 1e-5 of the tensor's max |g|; all of key.bias, mathematically 0) a correct
      // implementation may differ by up to ~lr (README: atol 1e-4 there). The fixture's own
      // fp32-vs-float64 run differs by 2.05e-7 in layer.0.output.dense.weight, where such elements
      // are.
      const auto diff = (p.value() - train.at(key)).abs();
      torch::Tensor noise = torch::zeros_like(diff, torch::kBool);
      if (p.key().find("key.bias") != std::string::npos) {
        noise.fill_(true);
      } else if (const auto g = train.find("grad." + p.key()); g != train.end()) {
        const auto magnitude = g->second.abs();
        noise = magnitude < 1e-5 * magnitude.max();
      }
      const auto worst = [&](const torch::Tensor& where) {
        const auto d = diff.masked_select(where);
        return d.numel() == 0 ? 0.0 : d.max().item<double>();
      };
      EXPECT_LT(worst(noise.logical_not()), 2.5e-7) << key;
      EXPECT_LT(worst(noise), 1e-4) << key;
      ++compared;
    }
    EXPECT_GT(compared, 0u) << prefix;
    EXPECT_EQ(compared, in_fixture) << prefix << ": a fixture tensor names no parameter";
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers,
                         ThreeAdamWSteps,
                         ::testing::Values("torch_adamw", "hf_adamw"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace bert::tasks

namespace bert::tasks {
namespace {

// fp16 loss scaling (torch.cuda.amp.GradScaler's rule): unscaled gradients, a step with an
// inf gradient skipped with the scale halved, the scale doubled after N clean steps.
TEST(LossScaler, UnscalesSkipsOnInfAndGrows) {
  LossScaler scaler(1024.0, 2);
  auto w = torch::ones({3}, torch::requires_grad());
  (w.sum() * scaler.scale()).backward();
  ASSERT_TRUE(scaler.unscale({w}));
  EXPECT_TRUE(torch::allclose(w.grad(), torch::ones({3})));
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 1024.0);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 2048.0);  // two clean steps in a row
  w.mutable_grad().fill_(std::numeric_limits<float>::infinity());
  EXPECT_FALSE(scaler.unscale({w}));
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 1024.0);
  EXPECT_EQ(scaler.clean_steps(), 0);
}

// An overflow restarts the run of clean steps (one clean step before it does not count towards
// the next doubling), and a NaN gradient is as unfit as an inf one.
TEST(LossScaler, AnOverflowRestartsTheCleanRunAndNaNIsNotFinite) {
  LossScaler scaler(8.0, 2);
  scaler.update(true);
  EXPECT_EQ(scaler.clean_steps(), 1);
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 4.0);
  EXPECT_EQ(scaler.clean_steps(), 0);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 4.0);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 8.0);
  auto w = torch::ones({2}, torch::requires_grad());
  w.mutable_grad() = torch::tensor({8.0f, std::numeric_limits<float>::quiet_NaN()});
  EXPECT_FALSE(scaler.unscale({w}));
}

TEST(LossScaler, Fp16NeedsCuda) {
  TrainerOptions o;
  o.precision = Precision::kFp16;
  ErrorList errors;
  o.validate(YamlReader(YAML::Load("{precision: fp16}"), "r.yaml", "training"), errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors.messages()[0].find("fp16 needs a CUDA device"), std::string::npos)
      << errors.messages()[0];
}

}  // namespace
}  // namespace bert::tasks

namespace bert::tasks {
namespace {

// The fused update gives torch::optim::AdamW's results (the same arithmetic per element; torch's
// vectorised kernels may fuse a multiply-add, so the last bit can differ), for both decay groups,
// over several steps, and its state round-trips through torch::save / load.
TEST(FusedAdamW, MatchesTorchAdamWAndRoundTripsItsState) {
  torch::manual_seed(3);
  torch::nn::Sequential a(torch::nn::Linear(37, 53),
                          torch::nn::LayerNorm(torch::nn::LayerNormOptions({53})));
  torch::nn::Sequential b(torch::nn::Linear(37, 53),
                          torch::nn::LayerNorm(torch::nn::LayerNormOptions({53})));
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < a->parameters().size(); ++i)
      b->parameters()[i].copy_(a->parameters()[i]);
  }
  AdamWSettings settings{1e-2, 0.1, 0.9, 0.999, 1e-8};
  auto fused = make_adamw(*a, settings);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& p : b->named_parameters())
    (is_no_decay_parameter(p.key()) ? no_decay : decay).push_back(p.value());
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(
                                 torch::optim::AdamWOptions(1e-2).weight_decay(0.1)));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(
                                    torch::optim::AdamWOptions(1e-2).weight_decay(0.0)));
  torch::optim::AdamW reference(std::move(groups), torch::optim::AdamWOptions(1e-2));
  for (int step = 0; step < 5; ++step) {
    // The same gradients for both (Adam divides by sqrt(v), so it would amplify the last-bit
    // differences of gradients computed from slightly different weights).
    for (size_t i = 0; i < a->parameters().size(); ++i) {
      const auto g = torch::randn_like(a->parameters()[i]) * (i % 2 ? 1e-3 : 1.0);
      a->parameters()[i].mutable_grad() = g.clone();
      b->parameters()[i].mutable_grad() = g.clone();
    }
    fused->step();
    reference.step();
    fused->zero_grad();
    reference.zero_grad();
  }
  for (size_t i = 0; i < a->parameters().size(); ++i) {
    const auto p = b->parameters()[i];
    EXPECT_LE(testing::max_abs_diff(a->parameters()[i], p),
              1e-7 * (1.0 + p.abs().max().item<double>()))
        << i;
    EXPECT_FALSE(torch::equal(p, torch::zeros_like(p)));
  }
  testing::TempDir dir;
  torch::save(*fused, (dir.path() / "opt.pt").string());
  auto restored = make_adamw(*a, settings);
  torch::load(*restored, (dir.path() / "opt.pt").string());
  EXPECT_EQ(restored->state().size(), fused->state().size());
}

// The fused step writes the weights through their pointers; it bumps their version as an
// in-place op would, so a cast kept from a weight (bert::Linear's bf16 one) is made again.
TEST(FusedAdamW, BumpsTheVersionOfTheWeightsItWrites) {
  torch::nn::Linear a(5, 3);
  auto fused = make_adamw(*a, {});
  for (auto& p : a->parameters()) p.mutable_grad() = torch::ones_like(p);
  const auto before = a->weight._version();
  fused->step();
  EXPECT_GT(a->weight._version(), before);
}

// bf16 training with shadows (bert/model/linear.h): the fused step writes each weight's kept bf16
// copy in its pass, rounded as the cast rounds, so that the next forward casts nothing; the
// weights, the losses and the copies are those of training that casts every weight every step,
// bit for bit (two threads: the copy is written piece by piece within each thread's chunk).
TEST(FusedAdamW, WritesTheBf16CopiesOfTheWeightsItUpdates) {
  if (!onednn_bf16_available()) GTEST_SKIP() << "this CPU's oneDNN has no bf16 products";
  const ScopedFp32Gemm direct(Fp32Gemm::kOneDnn);  // the tiny model's GEMMs through oneDNN
  const auto ids = torch::randint(5, 99, {3, 12}, torch::kLong);
  const auto train = [&](bool shadows, bool packing) {
    const ScopedBf16Shadows scoped(shadows);
    const ScopedBf16ShadowPacking packed_copies(packing);
    torch::manual_seed(8);
    BertModel model(testing::tiny_config());
    model->train();
    auto optimizer = make_adamw(*model, {1e-2, 0.01, 0.9, 0.999, 1e-8});
    const auto params = model->parameters();
    std::vector<torch::Tensor> out;  // losses, then the weights
    std::map<std::string, const void*> first_copy;
    for (int step = 0; step < 3; ++step) {
      torch::Tensor loss;
      {
        const testing::CpuBf16Autocast autocast;
        loss = model->forward(ids).last_hidden_state.to(torch::kFloat).pow(2).mean();
      }
      loss.backward();
      clip_gradients(*optimizer, params, 0.5);
      optimizer->step();
      release_gradients(params);
      out.push_back(loss.detach());
      for (const auto& p : model->named_parameters()) {
        const auto copy = bf16_shadow::find_current(p.value());
        const auto& name = p.key();  // the encoder's bert::Linear weights (the pooler's is not)
        const bool projection = name.rfind("encoder.", 0) == 0 && name.size() > 7 &&
                                name.compare(name.size() - 7, 7, ".weight") == 0 &&
                                name.find("LayerNorm") == std::string::npos;
        if (!shadows || !projection) {
          EXPECT_FALSE(copy.defined()) << p.key();
          continue;
        }
        EXPECT_TRUE(copy.defined()) << p.key() << " after step " << step;
        if (!copy.defined()) continue;
        const torch::Tensor weight = p.value().detach();
        const void* data = nullptr;
        if (packing && copy.packed()) {
          // Both layouts hold the weight's cast: the bytes a fresh pack of it lays out.
          EXPECT_TRUE(torch::equal(copy.forward.storage(),
                                   onednn_pack_bf16_weight(weight, PackedFor::kForward).storage()))
              << p.key();
          EXPECT_TRUE(
              torch::equal(copy.input_grad.storage(),
                           onednn_pack_bf16_weight(weight, PackedFor::kInputGradient).storage()))
              << p.key();
          data = copy.forward.storage().data_ptr();
        } else {
          EXPECT_FALSE(packing && onednn_pack_bf16_weight(weight).defined()) << p.key();
          EXPECT_TRUE(torch::equal(copy.plain, weight.to(torch::kBFloat16))) << p.key();
          data = copy.plain.data_ptr();
        }
        // Written in place, not cast anew by the next forward.
        if (step == 0) first_copy[p.key()] = data;
        EXPECT_EQ(data, first_copy[p.key()]) << p.key();
      }
    }
    for (const auto& p : params) out.push_back(p.detach().clone());
    return out;
  };
  std::vector<torch::Tensor> cast, kept, packed;
  {
    const testing::TwoThreads two;
    cast = train(false, false);
    kept = train(true, false);
    packed = train(true, true);
  }
  ASSERT_EQ(cast.size(), kept.size());
  ASSERT_EQ(cast.size(), packed.size());
  for (size_t i = 0; i < cast.size(); ++i) {
    EXPECT_TRUE(torch::equal(cast[i], kept[i])) << i;
    EXPECT_TRUE(torch::equal(cast[i], packed[i])) << i << " (packed copies)";
  }
}

// The fused step splits each weight's elements across LibTorch's threads (bert::parallel_for)
// in chunks that start at multiples of 64 elements, so two threads give one thread's weights and
// moments bit for bit (split where at::parallel_for splits, at element 51 802 here, one element
// in the vector loop's tail rounded differently).
TEST(FusedAdamW, GivesTheSameBitsOnOneThreadAndOnTwo) {
  const int before = torch::get_num_threads();
  std::vector<std::vector<torch::Tensor>> results;
  for (const int threads : {1, 2}) {
    torch::set_num_threads(threads);
    torch::manual_seed(11);
    torch::nn::Linear a(313, 331);  // 103 603 weights: chunks at an odd offset
    auto fused = make_adamw(*a, {1e-3, 0.01, 0.9, 0.999, 1e-8});
    for (int step = 0; step < 3; ++step) {
      for (auto& p : a->parameters()) p.mutable_grad() = torch::randn_like(p);
      fused->step();
    }
    results.push_back({a->weight.clone(), a->bias.clone()});
    for (const auto& entry : fused->state()) {  // the weight's moments (the bias has 331)
      const auto& state = static_cast<torch::optim::AdamWParamState&>(*entry.second);
      if (state.exp_avg().numel() != a->weight.numel()) continue;
      results.back().push_back(state.exp_avg().clone());
      results.back().push_back(state.exp_avg_sq().clone());
    }
    ASSERT_EQ(results.back().size(), 4u);
  }
  torch::set_num_threads(before);
  for (size_t i = 0; i < results[0].size(); ++i)
    EXPECT_TRUE(torch::equal(results[0][i], results[1][i])) << i;
}

// torch::nn::utils::clip_grad_norm_'s norm of the gradients of `params`, on copies (it clips
// nothing at 1e30 but keeps the originals' gradients out of it anyway).
double torch_gradient_norm(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> copies;
  for (const auto& p : params) {
    copies.push_back(p.detach().clone().requires_grad_(true));
    copies.back().mutable_grad() = p.grad().clone();
  }
  return torch::nn::utils::clip_grad_norm_(copies, 1e30);
}

// clip_gradients folds the clipping coefficient into the fused AdamW's pass: the same weights,
// bit for bit, as scaling the gradients by clip_grad_norm_'s coefficient (of clip_gradients'
// norm, which is clip_grad_norm_'s to float rounding) followed by the step, clipped or not;
// other optimizers get their gradients scaled in place. The coefficient is the next step's
// only: a step without clipping after a clipped one takes its gradients whole.
TEST(Optimizers, ClippingFoldedIntoTheFusedStepEqualsClipThenStep) {
  for (const double max_norm : {0.05, 1e6}) {
    torch::manual_seed(5);
    torch::nn::Linear a(6, 4), b(6, 4);
    {
      torch::NoGradGuard no_grad;
      b->weight.copy_(a->weight);
      b->bias.copy_(a->bias);
    }
    auto folded = make_adamw(*a, {});
    auto reference = make_adamw(*b, {});
    std::vector<torch::Tensor> pa = a->parameters(), pb = b->parameters();
    for (int step = 0; step < 4; ++step) {
      const auto x = torch::randn({7, 6});
      a(x).pow(2).sum().backward();
      b(x).pow(2).sum().backward();
      if (step < 3) {  // the last step unclipped
        const double norm = clip_gradients(*folded, pa, max_norm);
        EXPECT_NEAR(norm, torch_gradient_norm(pb), 1e-6 * norm);
        const auto coefficient =  // clip_grad_norm_'s, of clip_gradients' norm
            torch::clamp(max_norm / (torch::tensor(static_cast<float>(norm)) + 1e-6), c10::nullopt,
                         1.0);
        for (const auto& p : pb) p.grad().mul_(coefficient);
      }
      folded->step();
      reference->step();
      release_gradients(pa);
      release_gradients(pb);
    }
    for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pa[i], pb[i])) << max_norm;
  }
  torch::nn::Linear c(3, 2);
  auto plain = make_optimizer("adamw_torch", *c, {});
  c(torch::ones({1, 3})).sum().backward();
  const auto before = c->bias.grad().clone();  // ones: norm sqrt(2) with the weight's 1s
  const double norm = clip_gradients(*plain, c->parameters(), 0.5);
  EXPECT_NEAR(c->bias.grad()[0].item<double>(), before[0].item<double>() * 0.5 / norm, 1e-6);
}

// clip_gradients' norm sums the squares over fixed pieces, in double beyond short runs: one
// thread and two give the same value, within float32's rounding of the exact norm, where
// LibTorch's float norms (clip_grad_norm_'s, and clip_gradients' fallback for gradients it does
// not take, here a non-contiguous one) drift with the order of their float sums.
TEST(Optimizers, GradientNormIsExactAndTheSameOnOneThreadAndOnTwo) {
  torch::manual_seed(4);
  torch::nn::Linear a(700, 601), b(3, 5);  // 420 700 weights: 26 pieces, the last one short
  std::vector<torch::Tensor> params = a->parameters();
  for (const auto& p : b->parameters()) params.push_back(p);
  for (auto& p : params) p.mutable_grad() = torch::randn_like(p) * 1e-3;
  params[0].mutable_grad()[5][7] = 40.0f;  // one large value among small ones
  auto optimizer = make_optimizer("adamw_torch", *a, {});
  const int before = torch::get_num_threads();
  std::vector<double> norms;
  for (const int threads : {1, 2}) {
    torch::set_num_threads(threads);
    norms.push_back(clip_gradients(*optimizer, params, 1e30));  // 1e30: nothing clipped
  }
  torch::set_num_threads(before);
  EXPECT_EQ(norms[0], norms[1]);
  torch::Tensor squares = torch::zeros({}, torch::kDouble);
  for (const auto& p : params) squares += p.grad().to(torch::kDouble).pow(2).sum();
  EXPECT_FLOAT_EQ(static_cast<float>(norms[0]), static_cast<float>(squares.sqrt().item<double>()));
  // LibTorch's float sums lose much of the small squares added after the large one: 1.6e-5 of
  // the norm here (clip_grad_norm_ 40.00461, the exact norm 40.00526).
  EXPECT_NEAR(norms[0], torch_gradient_norm(params), 1e-4 * norms[0]);
  // A transposed gradient: LibTorch's own norms.
  params[0].mutable_grad() = params[0].grad().t().contiguous().t();
  ASSERT_FALSE(params[0].grad().is_contiguous());
  EXPECT_NEAR(clip_gradients(*optimizer, params, 1e30), norms[0], 1e-4 * norms[0]);
}

// release_gradients (set_to_none): the next backward's gradient is handed over, not added to a
// zeroed one, and AdamW skips a parameter that got no gradient (no decay, no moment update).
TEST(Optimizers, ReleasedGradientsAreReplacedAndSkippedWhenAbsent) {
  torch::manual_seed(3);
  torch::nn::Linear used(4, 3), unused(4, 3);
  torch::nn::Sequential model(used, unused);
  auto optimizer = make_adamw(*model, {});
  std::vector<torch::Tensor> parameters = model->parameters();
  const auto x = torch::randn({5, 4});
  used(x).pow(2).sum().backward();
  optimizer->step();
  release_gradients(parameters);
  for (const auto& p : parameters) EXPECT_FALSE(p.grad().defined());
  const auto before = unused->weight.detach().clone();
  used(x).sum().backward();
  // A fresh gradient, not the sum with the first backward's.
  EXPECT_TRUE(torch::allclose(used->bias.grad(), torch::full({3}, 5.0)));
  optimizer->step();
  EXPECT_TRUE(torch::equal(unused->weight, before));
}

}  // namespace
}  // namespace bert::tasks
