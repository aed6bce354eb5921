#pragma once

#include <c10/core/Allocator.h>

#include <cstddef>
#include <utility>

namespace bert {

/// LibTorch's CPU allocator takes every tensor from posix_memalign(64). glibc before 2.38 serves
/// an aligned request of n bytes from a free block only if it holds n + 64 + a header, so a block
/// freed by one 12 MiB activation cannot take the next 12 MiB activation: with the heap kept
/// (keep_freed_memory) a bert-base forward at 32x128 grew it by ~240 MiB for ~113 MiB live at
/// once, and inference's peak RSS was 840-864 MiB instead of 710. This allocator asks malloc
/// for n + 72 bytes and aligns inside the block (64 bytes, as LibTorch's), so a freed block fits
/// the next request of its size. The block's own address sits just below the aligned pointer,
/// so raw_deleter() frees from the data pointer alone (raw_allocate's contract). LibTorch's
/// memory profiler does not see these blocks (bertft's profiles time ops only).
///
/// LibTorch's Allocator changed after 1.13: allocate() lost its const (2.3) and copy_data()
/// became a pure virtual. Both forms of allocate() and copy_data() are declared here without
/// `override`, so that whichever the LibTorch in use declares is the one overridden (Debian's
/// 1.13 here, the CUDA LibTorch 2.x of scripts/device_check.sh).
class HeapCpuAllocator final : public c10::Allocator {
 public:
  static constexpr size_t kAlignment = 64;
  c10::DataPtr allocate(size_t bytes) const;
  c10::DataPtr allocate(size_t bytes) { return std::as_const(*this).allocate(bytes); }
  void copy_data(void* dest, const void* src, size_t count) const;
  c10::DeleterFnPtr raw_deleter() const override;
};

/// Makes HeapCpuAllocator the CPU allocator of every tensor allocated from now on (tensors that
/// exist keep their own deleters). keep_freed_memory() calls it; BERTFT_MALLOC=system leaves
/// LibTorch's.
void use_heap_cpu_allocator();

}  // namespace bert
