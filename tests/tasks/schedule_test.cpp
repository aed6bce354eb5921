// The optimizer + schedule factory: every lr_scheduler_type against the rates Hugging Face's own
// get_scheduler gives (tests/fixtures/hf_schedules, made by make_schedules.py there), the optimizer
// table, and the options' checks.
#include "tasks/training/schedule.h"

#include <ATen/record_function.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "bert/common/error.h"
#include "bert/model/onednn_linear.h"
#include "tasks/training/optimizer.h"
#include "tasks/training/precision.h"
#include "tasks/training/trainer_options.h"
#include "tests/support/test_support.h"

namespace bert::tasks {
namespace {

TEST(Schedules, EveryTypeMatchesHfGetScheduler) {
  std::ifstream in(std::filesystem::path(BERTFT_SOURCE_DIR) / "tests" / "fixtures" /
                   "hf_schedules" / "schedules.json");
  ASSERT_TRUE(in.good());
  const auto fixture = nlohmann::json::parse(in);
  const double peak = fixture["peak"];
  std::set<std::string> types;
  for (const auto& c : fixture["cases"]) {
    const auto type = parse_enum<ScheduleType>(c["type"].get<std::string>());
    ASSERT_TRUE(type) << c["type"];
    types.insert(c["type"].get<std::string>());
    const LrSchedule schedule(*type, peak, c["warmup"], c["total"]);
    const auto& rates = c["rates"];
    for (size_t step = 0; step < rates.size(); ++step)
      EXPECT_NEAR(schedule.at(static_cast<int64_t>(step)), rates[step].get<double>(), 1e-18)
          << c["type"] << " warmup " << c["warmup"] << " total " << c["total"] << " step " << step;
  }
  EXPECT_EQ(types.size(), EnumNames<ScheduleType>::get().size());  // every type is covered
}

TEST(Schedules, ShapeParametersChangeTheCurve) {
  // Two cosine waves come back up to the peak at mid-run; polynomial power 2 decays faster.
  ScheduleShape two_waves;
  two_waves.num_cycles = 2;
  const LrSchedule restarts(ScheduleType::kCosineWithRestarts, 1.0, 0, 100, two_waves);
  EXPECT_DOUBLE_EQ(restarts.at(0), 1.0);
  EXPECT_DOUBLE_EQ(restarts.at(50), 1.0);
  EXPECT_LT(restarts.at(49), 0.01);
  ScheduleShape square;
  square.power = 2;
  square.lr_end = 0;
  const LrSchedule polynomial(ScheduleType::kPolynomial, 1.0, 0, 100, square);
  EXPECT_DOUBLE_EQ(polynomial.at(50), 0.25);
  EXPECT_DOUBLE_EQ(polynomial.at(200), 0.0);
}

TEST(Optimizers, TheTableBuildsEachAndNamesThemOnAMiss) {
  torch::nn::Linear model(4, 3);
  for (const auto& f : optimizer_factories()) {
    const auto optimizer = make_optimizer(f.name, *model, {});
    ASSERT_TRUE(optimizer) << f.name;
    EXPECT_EQ(optimizer->param_groups().size(), 2u) << f.name;  // decayed, not decayed
    set_learning_rate(*optimizer, 0.5);
    for (auto& group : optimizer->param_groups()) EXPECT_EQ(group.options().get_lr(), 0.5);
  }
  const auto message = testing::error_message([&] { make_optimizer("lamb", *model, {}); });
  EXPECT_NE(message.find("unknown optimizer 'lamb'; expected one of: adamw, adamw_hf, adamw_torch"),
            std::string::npos)
      << message;
}

// The fused AdamW and LibTorch's own take the same steps (to the last bits torch's kernels may
// fuse differently).
TEST(Optimizers, FusedAdamWAndTorchAdamWAgree) {
  torch::manual_seed(5);
  torch::nn::Linear a(8, 6), b(8, 6);
  {
    torch::NoGradGuard no_grad;
    b->weight.copy_(a->weight);
    b->bias.copy_(a->bias);
  }
  const AdamWSettings settings{1e-2, 0.1, 0.9, 0.999, 1e-8};
  auto fused = make_optimizer("adamw", *a, settings);
  auto reference = make_optimizer("adamw_torch", *b, settings);
  for (int step = 0; step < 4; ++step) {
    const auto gw = torch::randn({6, 8}), gb = torch::randn({6});
    a->weight.mutable_grad() = gw.clone();
    a->bias.mutable_grad() = gb.clone();
    b->weight.mutable_grad() = gw.clone();
    b->bias.mutable_grad() = gb.clone();
    fused->step();
    reference->step();
  }
  EXPECT_LT(testing::max_abs_diff(a->weight, b->weight), 1e-6);
  EXPECT_LT(testing::max_abs_diff(a->bias, b->bias), 1e-6);
}

// precision: auto takes bf16 only when its GEMM is clearly faster (the probe's timings injected).
TEST(PrecisionChoice, BfloatOnlyWhereItsGemmIsClearlyFaster) {
  const auto fast = choose_precision(1.0e-3, 0.4e-3, "CPU");
  EXPECT_EQ(fast.precision, Precision::kBf16);
  EXPECT_EQ(fast.reason, "bf16: its GEMM runs 2.5x as fast as fp32 on this CPU");
  const auto slow = choose_precision(1.0e-4, 1.4e-2, "CPU");  // AVX2 only: ~100x slower
  EXPECT_EQ(slow.precision, Precision::kFp32);
  EXPECT_EQ(slow.reason,
            "fp32: bf16's GEMM runs 0.0071x as fast as fp32 on this CPU (no fast bf16)");
  EXPECT_EQ(choose_precision(1.0, 0.9, "CPU").precision, Precision::kFp32);  // not clearly faster
  EXPECT_EQ(resolve_precision(Precision::kFp32, torch::kCPU).precision, Precision::kFp32);
  const auto probed = resolve_precision(Precision::kAuto, torch::kCPU);
  EXPECT_NE(probed.precision, Precision::kAuto);
  EXPECT_EQ(resolve_precision(Precision::kAuto, torch::kCPU).reason, probed.reason);  // once
  EXPECT_EQ(TrainerOptions{}.precision, Precision::kAuto);
  // The probe leaves the global generator alone (dropout and init streams stay the seed's).
  torch::manual_seed(3);
  const auto expected = torch::rand({4});
  torch::manual_seed(3);
  choose_precision(1, 1, "x");
  resolve_precision(Precision::kAuto, torch::Device("cpu:0"));  // a device not probed yet
  EXPECT_TRUE(torch::equal(torch::rand({4}), expected));
}

// The probe times each precision through the engine bert::Linear takes for it: on an AVX-512 CPU
// oneDNN's matmul for fp32 as for bf16. (It timed LibTorch's fp32 linear, OpenBLAS, which
// bertft's projections do not use there: on an Intel CPU without AMX, auto chose bf16 at 0.6x
// oneDNN's fp32 speed.) And it times them in turn, fp32, bf16, fp32, ...: one precision's runs
// one after the other let a slow stretch of the host decide the answer alone.
TEST(PrecisionChoice, ProbeTimesTheEnginesTheProjectionsUse) {
  if (!onednn_built() || fp32_gemm().engine != Fp32Gemm::kOneDnn)
    GTEST_SKIP() << "fp32 GEMMs are not oneDNN's here: " << fp32_gemm().reason;
  if (!onednn_bf16_available())  // an AVX2 CPU: bf16 products go through LibTorch's autocast
    GTEST_SKIP() << "oneDNN has no bf16 products on this CPU";
  static std::mutex order_mutex;
  static std::string order;  // 'f' and 'b', product by product
  order.clear();
  const auto handle =
      at::addGlobalCallback(at::RecordFunctionCallback([](const at::RecordFunction& fn)
                                                           -> std::unique_ptr<at::ObserverContext> {
                              if (std::string(fn.name()) != "bertft::onednn_matmul") return nullptr;
                              const auto type = fn.inputs()[0].toTensor().scalar_type();
                              const std::lock_guard<std::mutex> lock(order_mutex);
                              order += type == torch::kBFloat16 ? 'b' : 'f';
                              return nullptr;
                            }).needsInputs(true));
  const auto choice = probe_precision(torch::kCPU);
  at::removeCallback(handle);
  const auto fp32 = std::count(order.begin(), order.end(), 'f');
  const auto bf16 = std::count(order.begin(), order.end(), 'b');
  EXPECT_GE(fp32, 6);  // a warm-up and 5 runs of each size probed
  EXPECT_GE(bf16, 6);
  EXPECT_EQ(fp32, bf16);
  EXPECT_NE(choice.precision, Precision::kAuto);
  // In turn: 5 runs of each alternate; next to a warm-up a letter may come twice, never 3 times.
  EXPECT_NE(order.find("fbfbfbfbfb"), std::string::npos) << order;
  EXPECT_EQ(order.find("fff"), std::string::npos) << order;
  EXPECT_EQ(order.find("bbb"), std::string::npos) << order;
}

TEST(TrainerOptionsChecks, OptimizerScheduleAndSmoothingAreValidated) {
  const auto problems = [](const std::string& yaml) {
    TrainerOptions o;
    ErrorList errors;
    const YamlReader reader(YAML::Load(yaml), "r.yaml", "training");
    read_struct(reader, o, errors);
    o.validate(reader, errors);
    std::string all;
    for (const auto& m : errors.messages()) all += m + "\n";
    return all;
  };
  EXPECT_EQ(problems("{lr_scheduler_type: cosine, num_cycles: 2, max_steps: 100}"), "");
  EXPECT_NE(
      problems("{optimizer: adamv}").find("unknown optimizer 'adamv' (did you mean 'adamw'?)"),
      std::string::npos);
  EXPECT_NE(problems("{lr_scheduler_type: cosin}")
                .find("unknown value 'cosin'; expected one of: "
                      "linear, cosine, cosine_with_restarts"),
            std::string::npos);
  EXPECT_NE(problems("{lr_scheduler_type: polynomial, learning_rate: 1.0e-7, lr_end: 1.0e-6}")
                .find("lr_end must be smaller"),
            std::string::npos);
  EXPECT_NE(problems("{label_smoothing: 1.5}").find("training.label_smoothing: must be in [0, 1)"),
            std::string::npos);
  EXPECT_NE(problems("{num_cycles: 0}").find("training.num_cycles: must be > 0"),
            std::string::npos);
  EXPECT_NE(problems("{dist_timeout: 0}").find("training.dist_timeout: must be > 0, got 0"),
            std::string::npos);
  for (const char* beta : {"adam_beta1", "adam_beta2"}) {  // 1 would never forget a gradient
    EXPECT_NE(problems(fmt::format("{{{}: 1.0}}", beta))
                  .find(fmt::format("training.{}: must be in [0, 1)", beta)),
              std::string::npos)
        << beta;
    EXPECT_EQ(problems(fmt::format("{{{}: 0.0}}", beta)), "") << beta;
  }
}

}  // namespace
}  // namespace bert::tasks
