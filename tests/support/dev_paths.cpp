#include "tests/support/dev_paths.h"

#include <cstdlib>

namespace bert::testing {
namespace {

const char* set_env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

}  // namespace

std::filesystem::path shared_dir() {
  if (const char* env = set_env("BERTFT_SHARED")) return env;
  return std::filesystem::path(BERTFT_SOURCE_DIR) / ".." / "shared";
}

std::filesystem::path hf_python_path() {
  if (const char* env = set_env("BERTFT_HF_PYTHON")) return env;
  return std::filesystem::path(BERTFT_BINARY_DIR) / "hf-reference" / "python";
}

}  // namespace bert::testing
