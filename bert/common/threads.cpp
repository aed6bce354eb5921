#include "bert/common/threads.h"

#include <dlfcn.h>
#include <malloc.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>

#include "bert/common/cpu_allocator.h"

namespace bert {

int configure_threads(int requested) {
  int n = requested;
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  if (n <= 0) n = 1;
  torch::set_num_threads(n);
  return torch::get_num_threads();
}

std::string self_executable() {
  std::string path(4096, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", path.data(), path.size());
  if (n <= 0 || static_cast<size_t>(n) >= path.size()) return "/proc/self/exe";
  path.resize(static_cast<size_t>(n));
  return path;
}

std::string openblas_core() {
  using CoreName = const char* (*)();
  const auto name = reinterpret_cast<CoreName>(::dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* core = name != nullptr ? name() : nullptr;
  return core != nullptr ? core : "";
}

std::string openblas_core_override(const std::string& detected, bool avx2_fma, bool avx512) {
  // OpenBLAS's x86 cores (its DYNAMIC_ARCH names) whose kernels have no AVX2.
  static const std::set<std::string> without_avx2 = {
      "Katmai",    "Coppermine", "Northwood",  "Prescott",   "Banias",      "Atom",
      "Core2",     "Penryn",     "Dunnington", "Nehalem",    "Sandybridge", "Opteron",
      "Barcelona", "Bobcat",     "Bulldozer",  "Piledriver", "Nano",        "Opteron(SSE3)"};
  if (!avx2_fma || without_avx2.count(detected) == 0) return "";
  return avx512 ? "SkylakeX" : "Haswell";
}

bool openmp_threads_spin(bool onednn_avx2, const char* fp32_gemm, bool onednn) {
  const std::string engine = fp32_gemm != nullptr ? fp32_gemm : "auto";
  return onednn && (engine == "onednn" || (engine != "blas" && onednn_avx2));
}

namespace {

/// `cap` upper-cased, as oneDNN compares it.
std::string upper(const char* cap) {
  std::string value = cap;
  for (char& c : value) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return value;
}

}  // namespace

bool onednn_isa_cap_allows_avx512(const char* cap) {
  if (cap == nullptr) return true;
  const std::string value = upper(cap);
  return !(value == "SSE41" || value == "AVX" || value == "AVX2" || value == "AVX2_VNNI");
}

bool onednn_isa_cap_allows_avx2(const char* cap) {
  if (cap == nullptr) return true;
  const std::string value = upper(cap);
  return !(value == "SSE41" || value == "AVX");
}

const char* onednn_isa_cap() {
  const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  return cap != nullptr && *cap != '\0' ? cap : std::getenv("DNNL_MAX_CPU_ISA");
}

void apply_load_time_settings(char** argv) {
  bool changed = false;
  // __builtin_cpu_supports also asks whether the kernel saves the registers (XCR0).
  const bool avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512cd");
#ifdef BERTFT_HAVE_DNNL
  constexpr bool kOneDnn = true;
#else
  constexpr bool kOneDnn = false;
#endif
  // As fp32_gemm() will decide from oneDNN's effective ISA: AVX2 (AVX-512 has it) left by the cap.
  const bool onednn_avx2 =
      __builtin_cpu_supports("avx2") && onednn_isa_cap_allows_avx2(onednn_isa_cap());
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr &&
      !openmp_threads_spin(onednn_avx2, std::getenv("BERTFT_FP32_GEMM"), kOneDnn)) {
    ::setenv("OMP_WAIT_POLICY", "passive", 1);
    changed = true;
  }
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr) {
    const std::string core = openblas_core_override(openblas_core(), avx2_fma, avx512);
    if (!core.empty()) {
      ::setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
      changed = true;
    }
  }
  if (!changed) return;
  // The file itself rather than the /proc/self/exe link, so that the process keeps its name
  // (`top`, `pgrep bertft`): execv takes the command name from the path's last part, "exe". The
  // link where the file has gone (replaced by a rebuild: its path then reads "... (deleted)").
  ::execv(self_executable().c_str(), argv);
  ::execv("/proc/self/exe", argv);  // returns only on failure
}

bool keep_freed_memory() {
  const char* choice = std::getenv("BERTFT_MALLOC");
  if (choice != nullptr && std::string(choice) == "system") return false;
  constexpr int kOneGiB = 1 << 30;
  // -1: never trim (mallopt(3)). A finite threshold still let a step that freed more than it at
  // once (bert-base 32x128 fp32 frees ~4 GiB at the end of backward) hand the heap top back.
  if (::mallopt(M_MMAP_THRESHOLD, kOneGiB) != 1 || ::mallopt(M_TRIM_THRESHOLD, -1) != 1)
    return false;
  use_heap_cpu_allocator();  // so that a kept block fits the next tensor of its size
  return true;
}

}  // namespace bert
