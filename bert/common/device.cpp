#include "bert/common/device.h"

#include <fmt/format.h>

#include <optional>

#include "bert/common/error.h"

namespace bert {

torch::Device usable_device(const std::string& value, const std::string& where) {
  std::optional<torch::Device> device;
  try {
    device = torch::Device(value);
  } catch (const std::exception&) {
  }
  if (!device || (!device->is_cpu() && !device->is_cuda()))
    throw ConfigError(
        fmt::format("{}: unknown device '{}'; expected cpu, cuda or cuda:N", where, value));
  if (device->is_cpu()) return *device;
  const auto count = static_cast<int64_t>(torch::cuda::device_count());
  if (count == 0)
    throw ConfigError(fmt::format(
        "{}: '{}', but LibTorch sees no CUDA GPU here (a CPU build of LibTorch, or no GPU on "
        "this machine); use cpu",
        where, value));
  if (device->has_index() && device->index() >= count)
    throw ConfigError(fmt::format("{}: '{}', but LibTorch sees {} CUDA GPU(s) (cuda:0 to cuda:{})",
                                  where, value, count, count - 1));
  return *device;
}

}  // namespace bert
