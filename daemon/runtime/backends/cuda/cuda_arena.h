// One GPU's memory as the CUDA backend holds it: the whole budget taken once from the driver
// (plain cudaMalloc) and carved by ArenaAllocator into
//   - the workspace (first, at the arena's start, never moved: its address is fixed);
//   - the KV pool;
//   - each resident model's allocation;
//   - the two decode scratch buffers, sized by the largest needs of the resident models;
//   - the forward pass's buffers, kept from pass to pass and taken back by an allocation that
//     finds no room between passes.
// When an allocation finds no free range large enough although enough bytes are free, every
// stream that may touch the arena is synchronized and the allocations slide to the arena's start.
//
// mu() guards the layout: whoever derives a device address and enqueues work on it holds it
// shared until the work is enqueued; every change of layout holds it exclusively.
#ifndef DF11_DAEMON_RUNTIME_BACKENDS_CUDA_CUDA_ARENA_H_
#define DF11_DAEMON_RUNTIME_BACKENDS_CUDA_CUDA_ARENA_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/runtime/backends/cuda/arena_allocator.h"
#include "daemon/runtime/backends/cuda/gpu_device.h"
#include "daemon/runtime/backends/cuda/gpu_handles.h"
#include "daemon/runtime/backends/cuda/scratch_buffer.h"

namespace df11::runtime {

class CudaArena {
 public:
  using Id = ArenaAllocator::Id;

  CudaArena(GpuDevice& device, std::string device_name, uint64_t budget, uint64_t granule);
  // Takes the budget from the device, then the workspace and the KV pool from the arena.
  // kResourceExhausted (the driver's numbers) when the device cannot give it.
  absl::Status Init(uint64_t workspace_bytes, uint64_t kv_pool_bytes);
  // Frees the device memory; every stream must have finished.
  ~CudaArena();

  absl::Mutex& mu() const ABSL_LOCK_RETURNED(mu_) { return mu_; }
  // A stream that compaction waits for before moving anything.
  void AddStream(GpuDevice::Stream stream) ABSL_LOCKS_EXCLUDED(mu_);

  // The device address of an allocation, valid while mu() is held.
  char* AddressLocked(Id id) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  uint64_t SizeLocked(Id id) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // `bytes` for `what` (named in the error), compacting when that makes room, taking back the
  // forward pass's buffers when no pass uses them. kResourceExhausted with the numbers otherwise.
  absl::StatusOr<Id> AllocateLocked(uint64_t bytes, const std::string& what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FreeLocked(Id id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Synchronizes every stream, then slides the allocations down.
  absl::Status CompactLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The two decode scratch buffers (0: none) and the BF16 elements each holds.
  Id scratch(ScratchBuffer buffer) const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return scratch_[IndexOf(buffer)];
  }
  uint64_t scratch_elements(ScratchBuffer buffer) const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return scratch_elements_[IndexOf(buffer)];
  }
  // Resizes them to `need` elements. Every stream is synchronized first when one moves.
  absl::Status ResizeScratchLocked(std::array<uint64_t, 2> need)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The bytes the scratch would grow by for `need` (0 where it already holds as much).
  uint64_t ScratchGrowthLocked(std::array<uint64_t, 2> need) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  // The forward pass's buffers: at least `bytes`, kept from pass to pass (grown when a pass
  // needs more). Between ReleasePassBuffersLocked and the next acquire, an allocation that finds
  // no room may take them back.
  absl::StatusOr<Id> AcquirePassBuffersLocked(uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleasePassBuffersLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The workspace's address (fixed) and the KV pool's allocation (0 when it is empty).
  char* workspace() const { return workspace_; }
  Id kv_pool() const ABSL_SHARED_LOCKS_REQUIRED(mu_) { return kv_pool_id_; }

  // Accounting, by kind.
  struct Usage {
    uint64_t capacity = 0, allocated = 0, scratch = 0, workspace = 0, kv_pool = 0;
    size_t allocations = 0;
  };
  Usage usage() const ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t compactions() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Status SynchronizeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  GpuDevice& device_;
  const std::string device_name_;
  void* base_ = nullptr;
  char* workspace_ = nullptr;
  std::unique_ptr<DeviceStream> move_stream_;  // compaction's copies

  mutable absl::Mutex mu_;
  ArenaAllocator arena_ ABSL_GUARDED_BY(mu_);
  std::vector<GpuDevice::Stream> streams_ ABSL_GUARDED_BY(mu_);
  Id workspace_id_ ABSL_GUARDED_BY(mu_) = 0;
  Id kv_pool_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::array<Id, 2> scratch_ ABSL_GUARDED_BY(mu_) = {0, 0};
  std::array<uint64_t, 2> scratch_elements_ ABSL_GUARDED_BY(mu_) = {0, 0};
  Id pass_buffers_ ABSL_GUARDED_BY(mu_) = 0;
  bool pass_busy_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t compactions_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_BACKENDS_CUDA_CUDA_ARENA_H_
