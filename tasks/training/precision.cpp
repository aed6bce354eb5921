#include "tasks/training/precision.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <chrono>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "bert/common/autocast.h"
#include "bert/model/onednn_linear.h"

namespace bert {
const std::vector<std::pair<const char*, tasks::Precision>>& EnumNames<tasks::Precision>::get() {
  static const std::vector<std::pair<const char*, tasks::Precision>> names = {
      {"fp32", tasks::Precision::kFp32},
      {"bf16", tasks::Precision::kBf16},
      {"fp16", tasks::Precision::kFp16},
      {"auto", tasks::Precision::kAuto}};
  return names;
}
}  // namespace bert

namespace bert::tasks {
namespace {

/// One [rows, size] x [size, size] product in `dtype` on `device` (it waits for the result), run
/// once here (the warm-up), through the engine bertft's own projections use for that type (on CPU
/// oneDNN's matmul where use_onednn_matmul says so, as bert::Linear takes it, else LibTorch's).
/// Timing LibTorch's fp32 linear instead timed OpenBLAS, which bert::Linear does not use on an
/// AVX-512 CPU: on an Intel one without AMX, bf16 came out 1.3x as fast as that and 0.6x as fast as
/// oneDNN's fp32, so `auto` picked the slower precision.
std::function<void()> probe_product(torch::ScalarType dtype,
                                    const torch::Device& device,
                                    int64_t rows,
                                    int64_t size) {
  // Its own generator: the probe must not move the streams that dropout and init draw from.
  auto generator = at::detail::createCPUGenerator(12345);
  const auto x = torch::randn({rows, size}, generator).to(device, dtype);
  const auto w = torch::randn({size, size}, generator).to(device, dtype).t();
  const bool onednn = device.is_cpu() && use_onednn_matmul(x, w);
  std::function<void()> run = [x, w, onednn, cuda = device.is_cuda()] {
    const torch::NoGradGuard no_grad;
    auto y = onednn ? onednn_matmul(x, w) : torch::matmul(x, w);
    if (cuda) y.cpu();  // wait for the kernel
  };
  run();
  return run;
}

/// The best times of `runs` runs of `a` and of `b`, taken in turn (a, b, a, b, ...): a host whose
/// speed drifts (another load, a vCPU slowed for a while) moves both alike, whereas timed one after
/// the other a slow stretch over one precision's runs alone decides the answer (bf16 once came
/// out 1.2x as fast as fp32, pinned to a vCPU that another load was slowing, on a CPU where it runs
/// 2x).
std::pair<double, double> best_in_turn(const std::function<void()>& a,
                                       const std::function<void()>& b,
                                       int runs) {
  const auto time = [](const std::function<void()>& run) {
    const auto start = std::chrono::steady_clock::now();
    run();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  double best_a = 1e30, best_b = 1e30;
  for (int i = 0; i < runs; ++i) {
    best_a = std::min(best_a, time(a));
    best_b = std::min(best_b, time(b));
  }
  return {best_a, best_b};
}

}  // namespace

PrecisionChoice choose_precision(double fp32_seconds,
                                 double bf16_seconds,
                                 const std::string& device) {
  const double speedup = fp32_seconds / std::max(bf16_seconds, 1e-12);
  if (bf16_seconds < 0.8 * fp32_seconds)
    return {Precision::kBf16,
            fmt::format("bf16: its GEMM runs {:.1f}x as fast as fp32 on this {}", speedup, device)};
  return {Precision::kFp32,
          fmt::format("fp32: bf16's GEMM runs {:.2g}x as fast as fp32 on this {} (no fast bf16)",
                      speedup, device)};
}

PrecisionChoice probe_precision(const torch::Device& device) {
  const std::string where = device.is_cuda() ? "GPU" : "CPU";
  // A small GEMM first: without bf16 instructions it is ~100x slower and the answer is clear
  // in a few milliseconds; otherwise a BERT-sized one (256 x 768 x 768), where thread wake-ups
  // and oneDNN's set-up no longer blur the timings.
  // fp32's product is made (and run once) outside the try: its failure is no answer about bf16.
  const auto fp32_small = probe_product(torch::kFloat, device, 64, 256);
  try {
    auto [fp32, bf16] =
        best_in_turn(fp32_small, probe_product(torch::kBFloat16, device, 64, 256), 5);
    if (bf16 < 3 * fp32)
      std::tie(fp32, bf16) = best_in_turn(probe_product(torch::kFloat, device, 256, 768),
                                          probe_product(torch::kBFloat16, device, 256, 768), 5);
    return choose_precision(fp32, bf16, where);
  } catch (const std::exception& e) {
    // LibTorch 1.13 sends a CPU bf16 product to oneDNN wherever the CPU has AVX-512, even where
    // an ISA cap (ONEDNN_MAX_CPU_ISA=AVX2) leaves oneDNN no bf16 kernel, and it then throws: no
    // bf16 here, rather than no training.
    const std::string what = e.what();
    return {Precision::kFp32, fmt::format("fp32: a bf16 GEMM failed on this {} ({})", where,
                                          what.substr(0, what.find('\n')))};
  }
}

PrecisionChoice resolve_precision(Precision requested, const torch::Device& device) {
  if (requested != Precision::kAuto) return {requested, "as the recipe says"};
  static std::mutex mutex;
  static std::map<std::string, PrecisionChoice> decided;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = device.str();
  if (const auto it = decided.find(key); it != decided.end()) return it->second;
  const auto choice = probe_precision(device);
  decided[key] = choice;
  return choice;
}

AutocastScope::AutocastScope(Precision precision, const torch::Device& device)
    : enabled_(precision == Precision::kBf16 || precision == Precision::kFp16),
      cuda_(device.is_cuda()) {
  TORCH_CHECK(precision != Precision::kAuto, "AutocastScope: resolve precision auto first");
  if (!enabled_) return;
  if (cuda_) {
    autocast::set_enabled(c10::kCUDA, true);
    autocast::set_dtype(c10::kCUDA, precision == Precision::kFp16 ? at::kHalf : at::kBFloat16);
  } else {
    autocast::set_enabled(c10::kCPU, true);
    autocast::set_dtype(c10::kCPU, at::kBFloat16);
  }
}

AutocastScope::~AutocastScope() {
  if (!enabled_) return;
  at::autocast::clear_cache();
  if (cuda_) {
    autocast::set_enabled(c10::kCUDA, false);
  } else {
    autocast::set_enabled(c10::kCPU, false);
  }
}

}  // namespace bert::tasks
