#include "tasks/training/precision.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <chrono>
#include <exception>
#include <map>
#include <mutex>

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

/// Best time of `runs` runs of a [rows, size] x [size, size] product in `dtype` on `device`, after
/// one warm-up, through the engine bertft's own projections use for that type (on CPU oneDNN's
/// matmul where use_onednn_matmul says so, as bert::Linear takes it, else LibTorch's). Timing
/// LibTorch's fp32 linear instead timed OpenBLAS, which bert::Linear does not use on an AVX-512
/// CPU: on an Intel one without AMX, bf16 came out 1.3x as fast as that and 0.6x as fast as
/// oneDNN's fp32, so `auto` picked the slower precision.
double probe_gemm(
    torch::ScalarType dtype, const torch::Device& device, int64_t rows, int64_t size, int runs) {
  torch::NoGradGuard no_grad;
  // Its own generator: the probe must not move the streams that dropout and init draw from.
  auto generator = at::detail::createCPUGenerator(12345);
  const auto x = torch::randn({rows, size}, generator).to(device, dtype);
  const auto w = torch::randn({size, size}, generator).to(device, dtype).t();
  const bool onednn = device.is_cpu() && use_onednn_matmul(x, w);
  const auto run = [&] {
    auto y = onednn ? onednn_matmul(x, w) : torch::matmul(x, w);
    if (device.is_cuda()) y.cpu();  // wait for the kernel
  };
  run();
  double best = 1e30;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
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
  auto fp32 = probe_gemm(torch::kFloat, device, 64, 256, 5);
  try {
    auto bf16 = probe_gemm(torch::kBFloat16, device, 64, 256, 5);
    if (bf16 < 3 * fp32) {
      fp32 = probe_gemm(torch::kFloat, device, 256, 768, 5);
      bf16 = probe_gemm(torch::kBFloat16, device, 256, 768, 5);
    }
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
