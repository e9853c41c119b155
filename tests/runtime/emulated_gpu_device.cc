#include "tests/runtime/emulated_gpu_device.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codec/gpu_decoder.h"
#include "codec/tiled_matrix.h"

namespace df11::testing {
namespace {

// As the real workspace: the error flag first, then the views.
constexpr uint64_t kViewsOffset = 16;

bool Overlap(const void* a, const void* b, uint64_t bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + bytes && y < x + bytes;
}

}  // namespace

EmulatedGpuDevice::~EmulatedGpuDevice() {
  // Its owner (the backend) must have returned everything by now: a leak is a bug.
  if (!device_.empty() || !host_.empty() || handles_ != 0) {
    std::fprintf(stderr,
                 "EmulatedGpuDevice destroyed with %zu device and %zu host allocations and %d "
                 "streams or events still held\n",
                 device_.size(), host_.size(), handles_);
    std::abort();
  }
}

absl::StatusOr<runtime::GpuDevice::MemoryInfo> EmulatedGpuDevice::GetMemoryInfo() {
  std::lock_guard lock(mu_);
  return MemoryInfo{.free = total_ - allocated_, .total = total_};
}

absl::StatusOr<void*> EmulatedGpuDevice::Allocate(uint64_t bytes) {
  std::lock_guard lock(mu_);
  if (bytes > total_ - allocated_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cudaMalloc of ", bytes, " bytes: ", total_ - allocated_, " of ", total_, " bytes free"));
  }
  void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (p == nullptr) return absl::ResourceExhaustedError("host memory for the emulated device");
  std::memset(p, 0xA5, bytes);  // not zero: the backend must clear what it relies on
  device_[p] = bytes;
  allocated_ += bytes;
  return p;
}

void EmulatedGpuDevice::Free(void* device) {
  std::lock_guard lock(mu_);
  auto it = device_.find(device);
  if (it == device_.end()) std::abort();  // freeing what was not allocated: a bug
  allocated_ -= it->second;
  device_.erase(it);
  std::free(device);
}

absl::StatusOr<void*> EmulatedGpuDevice::AllocateHost(uint64_t bytes) {
  std::lock_guard lock(mu_);
  void* p = std::malloc(bytes);
  if (p == nullptr) return absl::ResourceExhaustedError("host memory");
  host_[p] = bytes;
  return p;
}

void EmulatedGpuDevice::FreeHost(void* host) {
  std::lock_guard lock(mu_);
  if (host_.erase(host) != 1) std::abort();
  std::free(host);
}

absl::StatusOr<runtime::GpuDevice::Stream> EmulatedGpuDevice::CreateStream() {
  std::lock_guard lock(mu_);
  ++handles_;
  return static_cast<Stream>(new int(0));
}

void EmulatedGpuDevice::DestroyStream(Stream stream) {
  std::lock_guard lock(mu_);
  --handles_;
  delete static_cast<int*>(stream);
}

absl::StatusOr<runtime::GpuDevice::Event> EmulatedGpuDevice::CreateEvent() {
  std::lock_guard lock(mu_);
  ++handles_;
  return static_cast<Event>(new int(0));
}

void EmulatedGpuDevice::DestroyEvent(Event event) {
  std::lock_guard lock(mu_);
  --handles_;
  delete static_cast<int*>(event);
}

absl::Status EmulatedGpuDevice::CopyAsync(void* dst, const void* src, uint64_t bytes,
                                          Stream stream) {
  if (Overlap(dst, src, bytes)) {
    return absl::InternalError(absl::StrCat("a copy of ", bytes, " bytes onto itself"));
  }
  std::memcpy(dst, src, bytes);
  return absl::OkStatus();
}

absl::Status EmulatedGpuDevice::MemsetAsync(void* dst, uint8_t value, uint64_t bytes,
                                            Stream stream) {
  std::memset(dst, value, bytes);
  return absl::OkStatus();
}

uint64_t EmulatedGpuDevice::DecodeWorkspaceBytes(size_t views) const {
  return kViewsOffset + views * sizeof(codec::gpu::UnitView);
}

absl::StatusOr<uint32_t*> EmulatedGpuDevice::BeginLaunch(
    std::span<const codec::gpu::UnitView> views, void* workspace, uint64_t workspace_bytes) {
  if (views.empty() || views.size() > codec::gpu::kMaxUnitsPerLaunch) {
    return absl::InvalidArgumentError(absl::StrCat("a launch of ", views.size(), " views"));
  }
  if (workspace_bytes < DecodeWorkspaceBytes(views.size())) {
    return absl::InvalidArgumentError("a launch with a small workspace");
  }
  {
    std::lock_guard lock(mu_);
    ++launches_;
  }
  auto* error = static_cast<uint32_t*>(workspace);
  *error = 0;
  std::memcpy(static_cast<char*>(workspace) + kViewsOffset, views.data(),
              views.size() * sizeof(codec::gpu::UnitView));
  return error;
}

absl::Status EmulatedGpuDevice::BuildSegmentOffsets(std::span<const codec::gpu::UnitView> views,
                                                    void* workspace, uint64_t workspace_bytes,
                                                    Stream stream) {
  namespace gpu = codec::gpu;
  absl::StatusOr<uint32_t*> error = BeginLaunch(views, workspace, workspace_bytes);
  if (!error.ok()) return error.status();
  uint32_t counts[gpu::kSegmentsPerBlock];
  for (const gpu::UnitView& u : views) {
    for (uint32_t b = u.first_block; b < u.first_block + u.n_blocks; ++b) {
      for (uint32_t t = 0; t < gpu::kSegmentsPerBlock; ++t) {
        counts[t] = gpu::CountSegment(u, u.table, u.luts, b, t);
      }
      uint16_t* offsets =
          const_cast<uint16_t*>(u.segment_offsets) + uint64_t{b} * gpu::kSegmentsPerBlock;
      if (!gpu::FinishBlockOffsets(u, b, counts, offsets)) **error = 1;
    }
  }
  return absl::OkStatus();
}

absl::Status EmulatedGpuDevice::DecodeUnits(std::span<const codec::gpu::UnitView> views,
                                            void* workspace, uint64_t workspace_bytes,
                                            Stream stream) {
  namespace gpu = codec::gpu;
  absl::StatusOr<uint32_t*> launched = BeginLaunch(views, workspace, workspace_bytes);
  if (!launched.ok()) return launched.status();
  uint32_t* error = *launched;
  // Each CTA: its unit's table and LUT rows in "shared memory", the block's exponents staged,
  // every thread's segment, a barrier, every thread's slice of the join.
  std::vector<uint8_t> exps(gpu::kMaxBlockElements);
  for (const gpu::UnitView& u : views) {
    for (uint32_t b = u.first_block; b < u.first_block + u.n_blocks; ++b) {
      for (uint32_t t = 0; t < gpu::kSegmentsPerBlock; ++t) {
        if (!gpu::DecodeSegment(u, u.table, u.luts, b, t, exps.data())) *error = 1;
      }
      if (u.out == nullptr) continue;  // a check-only decode
      for (uint32_t t = 0; t < gpu::kSegmentsPerBlock; ++t) {
        gpu::JoinSlice(u, b, exps.data(), t, gpu::kSegmentsPerBlock);
      }
    }
  }
  if (fail_decodes_) *error = 1;
  return absl::OkStatus();
}

absl::Status EmulatedGpuDevice::CheckDecoded(const void* workspace, Stream stream) {
  if (*static_cast<const uint32_t*>(workspace) != 0) {
    return absl::DataLossError(
        "GPU decode: a thread's codes did not end where its unit's metadata says the next code "
        "starts (corrupt stream or layout)");
  }
  return absl::OkStatus();
}

absl::Status EmulatedGpuDevice::DecodeTiled(std::span<const codec::gpu::TiledDecodeView> views,
                                            void* workspace, uint64_t workspace_bytes,
                                            Stream stream) {
  if (views.empty() || views.size() > codec::gpu::kMaxUnitsPerLaunch) {
    return absl::InvalidArgumentError(absl::StrCat("a tiled launch of ", views.size(), " views"));
  }
  if (workspace_bytes < TiledWorkspaceBytes(views.size())) {
    return absl::InvalidArgumentError("a tiled launch with a small workspace");
  }
  {
    std::lock_guard lock(mu_);
    ++tiled_launches_;
  }
  for (const codec::gpu::TiledDecodeView& v : views) {
    // As the kernel's launch: pairs of values are written as 32-bit words.
    if (reinterpret_cast<uintptr_t>(v.out) % 4 != 0 || v.ld % 2 != 0 || v.ld < v.matrix.cols) {
      return absl::InvalidArgumentError(
          "DecodeTiled: the output must be 4-byte aligned with an even ld of at least the columns");
    }
  }
  auto* error = static_cast<uint32_t*>(workspace);
  *error = 0;
  for (const codec::gpu::TiledDecodeView& v : views) {
    if (!codec::DecodeTiledView(v.matrix, v.out, v.ld)) *error = 1;
  }
  if (fail_decodes_) *error = 1;
  return absl::OkStatus();
}

uint64_t EmulatedGpuDevice::TiledWorkspaceBytes(size_t views) const {
  return kViewsOffset + views * sizeof(codec::gpu::TiledDecodeView);
}

uint64_t EmulatedGpuDevice::tiled_decode_launches() const {
  std::lock_guard lock(mu_);
  return tiled_launches_;
}

uint64_t EmulatedGpuDevice::decode_launches() const {
  std::lock_guard lock(mu_);
  return launches_;
}

}  // namespace df11::testing
