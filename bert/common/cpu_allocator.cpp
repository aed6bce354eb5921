#include "bert/common/cpu_allocator.h"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace bert {
namespace {

void free_aligned(void* data) {
  if (data != nullptr) std::free(static_cast<void**>(data)[-1]);
}

}  // namespace

c10::DataPtr HeapCpuAllocator::allocate(size_t bytes) const {
  const c10::Device cpu(c10::DeviceType::CPU);
  if (bytes == 0) return {nullptr, nullptr, &free_aligned, cpu};  // as LibTorch's: no block
  constexpr size_t kExtra = kAlignment + sizeof(void*);
  TORCH_CHECK(bytes <= SIZE_MAX - kExtra, "CPU allocator: ", bytes, " bytes cannot be allocated");
  void* block = std::malloc(bytes + kExtra);
  TORCH_CHECK(block != nullptr, "CPU allocator: not enough memory: you tried to allocate ", bytes,
              " bytes");
  // The first 64-byte boundary that leaves room for the block's address below it.
  const auto start = reinterpret_cast<uintptr_t>(block) + sizeof(void*);
  void* data = reinterpret_cast<void*>((start + kAlignment - 1) & ~uintptr_t{kAlignment - 1});
  static_cast<void**>(data)[-1] = block;
  return {data, data, &free_aligned, cpu};
}

void HeapCpuAllocator::copy_data(void* dest, const void* src, size_t count) const {
  if (count > 0) std::memcpy(dest, src, count);
}

c10::DeleterFnPtr HeapCpuAllocator::raw_deleter() const {
  return &free_aligned;
}

void use_heap_cpu_allocator() {
  static HeapCpuAllocator allocator;
  c10::SetCPUAllocator(&allocator, /*priority=*/1);
}

}  // namespace bert
