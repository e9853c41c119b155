#include "daemon/runtime/backends/cuda/cuda_arena.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "codec/base/check.h"
#include "codec/base/status_macros.h"

namespace df11::runtime {

CudaArena::CudaArena(GpuDevice& device, std::string device_name, uint64_t budget,
                     uint64_t granule)
    : device_(device), device_name_(std::move(device_name)), arena_(budget, granule) {}

absl::Status CudaArena::Init(uint64_t workspace_bytes, uint64_t kv_pool_bytes) {
  DF11_ASSIGN_OR_RETURN(move_stream_, DeviceStream::Create(device_));
  absl::MutexLock lock(&mu_);
  DF11_ASSIGN_OR_RETURN(base_, device_.Allocate(arena_.capacity()));
  streams_.push_back(move_stream_->get());
  // First, at offset 0, so that compaction never moves it.
  DF11_ASSIGN_OR_RETURN(workspace_id_, arena_.Allocate(workspace_bytes));
  DF11_CHECK(arena_.offset(workspace_id_) == 0);
  workspace_ = static_cast<char*>(base_);
  if (kv_pool_bytes > 0) {
    DF11_ASSIGN_OR_RETURN(kv_pool_id_, arena_.Allocate(kv_pool_bytes));
  }
  return absl::OkStatus();
}

CudaArena::~CudaArena() {
  if (move_stream_ != nullptr) device_.StreamSynchronize(move_stream_->get()).IgnoreError();
  move_stream_.reset();
  if (base_ != nullptr) device_.Free(base_);
}

void CudaArena::AddStream(GpuDevice::Stream stream) {
  absl::MutexLock lock(&mu_);
  streams_.push_back(stream);
}

char* CudaArena::AddressLocked(Id id) const {
  return static_cast<char*>(base_) + arena_.offset(id);
}

uint64_t CudaArena::SizeLocked(Id id) const { return arena_.size(id); }

absl::StatusOr<CudaArena::Id> CudaArena::AllocateLocked(uint64_t bytes, const std::string& what) {
  absl::StatusOr<Id> id = arena_.Allocate(bytes);
  // The forward pass's buffers, kept between passes, give way when no pass is using them.
  if (!id.ok() && pass_buffers_ != 0 && !pass_busy_) {
    arena_.Free(pass_buffers_);
    pass_buffers_ = 0;
    id = arena_.Allocate(bytes);
  }
  if (!id.ok() && arena_.free_bytes() >= arena_.RoundUp(bytes)) {
    DF11_RETURN_IF_ERROR(CompactLocked());
    id = arena_.Allocate(bytes);
  }
  if (!id.ok()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, " needs ", arena_.RoundUp(bytes), " bytes on ", device_name_, "; the arena of ",
        arena_.capacity(), " bytes has ", arena_.free_bytes(), " free"));
  }
  return id;
}

void CudaArena::FreeLocked(Id id) { arena_.Free(id); }

absl::Status CudaArena::SynchronizeLocked() {
  for (GpuDevice::Stream s : streams_) DF11_RETURN_IF_ERROR(device_.StreamSynchronize(s));
  return absl::OkStatus();
}

absl::Status CudaArena::CompactLocked() {
  // Nothing may read or write the arena while it moves: every stream finishes first, and no new
  // work is enqueued while the lock is held.
  DF11_RETURN_IF_ERROR(SynchronizeLocked());
  const std::vector<ArenaAllocator::Move> moves = arena_.Compact();
  char* base = static_cast<char*>(base_);
  absl::Status status;
  for (const ArenaAllocator::Move& m : moves) {
    ArenaAllocator::ForEachChunk(m, [&](uint64_t to, uint64_t from, uint64_t bytes) {
      if (status.ok()) status = device_.CopyAsync(base + to, base + from, bytes, move_stream_->get());
    });
  }
  DF11_RETURN_IF_ERROR(status);
  DF11_RETURN_IF_ERROR(device_.StreamSynchronize(move_stream_->get()));
  ++compactions_;
  return absl::OkStatus();
}

absl::Status CudaArena::ResizeScratchLocked(std::array<uint64_t, 2> need) {
  if (need == scratch_elements_) return absl::OkStatus();
  // Scratch holds nothing between passes, but a decode into it may still be running.
  DF11_RETURN_IF_ERROR(SynchronizeLocked());
  for (int b = 0; b < 2; ++b) {
    if (need[b] == scratch_elements_[b]) continue;
    if (scratch_[b] != 0) arena_.Free(scratch_[b]);
    scratch_[b] = 0;
    scratch_elements_[b] = 0;
    if (need[b] == 0) continue;
    DF11_ASSIGN_OR_RETURN(scratch_[b], AllocateLocked(need[b] * sizeof(uint16_t),
                                                      absl::StrCat("decode scratch ", b)));
    scratch_elements_[b] = need[b];
  }
  return absl::OkStatus();
}

uint64_t CudaArena::ScratchGrowthLocked(std::array<uint64_t, 2> need) const {
  uint64_t growth = 0;
  for (int b = 0; b < 2; ++b) {
    if (need[b] <= scratch_elements_[b]) continue;
    const uint64_t now = scratch_[b] != 0 ? arena_.size(scratch_[b]) : 0;
    growth += arena_.RoundUp(need[b] * sizeof(uint16_t)) - now;
  }
  return growth;
}

absl::StatusOr<CudaArena::Id> CudaArena::AcquirePassBuffersLocked(uint64_t bytes) {
  if (pass_buffers_ != 0 && arena_.size(pass_buffers_) < bytes) {
    arena_.Free(pass_buffers_);
    pass_buffers_ = 0;
  }
  if (pass_buffers_ == 0) {
    DF11_ASSIGN_OR_RETURN(pass_buffers_, AllocateLocked(bytes, "the forward pass's buffers"));
  }
  pass_busy_ = true;
  return pass_buffers_;
}

void CudaArena::ReleasePassBuffersLocked() { pass_busy_ = false; }

CudaArena::Usage CudaArena::usage() const {
  absl::ReaderMutexLock lock(&mu_);
  Usage u;
  u.capacity = arena_.capacity();
  u.allocated = arena_.allocated_bytes();
  u.allocations = arena_.allocations();
  for (Id id : scratch_) u.scratch += id != 0 ? arena_.size(id) : 0;
  u.workspace = arena_.size(workspace_id_) + (pass_buffers_ != 0 ? arena_.size(pass_buffers_) : 0);
  u.kv_pool = kv_pool_id_ != 0 ? arena_.size(kv_pool_id_) : 0;
  return u;
}

uint64_t CudaArena::compactions() const {
  absl::ReaderMutexLock lock(&mu_);
  return compactions_;
}

}  // namespace df11::runtime
