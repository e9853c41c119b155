// A GpuDevice whose "device memory" is host memory and whose decoder runs the GPU kernel's
// per-thread and per-block steps (codec/cuda/decode_steps.h) one after another: the CUDA backend's
// host logic (arena, placement, uploads, decode launches, accounting) is tested with it without a
// GPU. Every call runs at once, so stream order holds trivially. It enforces what the real device
// relies on: a copy's source and destination must not overlap, decode workspaces must be large
// enough, and only memory it handed out is freed.
#ifndef DF11_TESTS_RUNTIME_EMULATED_GPU_DEVICE_H_
#define DF11_TESTS_RUNTIME_EMULATED_GPU_DEVICE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "daemon/runtime/backends/cuda/forward_reference.h"
#include "daemon/runtime/backends/cuda/gpu_device.h"

namespace df11::testing {

class EmulatedGpuDevice final : public runtime::GpuDevice {
 public:
  // A device with `total_bytes` of memory.
  explicit EmulatedGpuDevice(uint64_t total_bytes) : total_(total_bytes) {}
  // Aborts, naming what is left, when memory, streams or events are still held: the backend that
  // owns the device must have returned everything.
  ~EmulatedGpuDevice() override;

  std::string name() const override { return "cuda:0"; }
  std::string description() const override { return "emulated GPU"; }
  absl::StatusOr<MemoryInfo> GetMemoryInfo() override;
  absl::StatusOr<void*> Allocate(uint64_t bytes) override;
  void Free(void* device) override;
  absl::StatusOr<void*> AllocateHost(uint64_t bytes) override;
  void FreeHost(void* host) override;
  absl::StatusOr<Stream> CreateStream() override;
  void DestroyStream(Stream stream) override;
  absl::StatusOr<Event> CreateEvent() override;
  void DestroyEvent(Event event) override;
  absl::Status Record(Event event, Stream stream) override { return absl::OkStatus(); }
  absl::Status StreamWait(Stream stream, Event event) override { return absl::OkStatus(); }
  absl::Status EventSynchronize(Event event) override { return absl::OkStatus(); }
  absl::Status StreamSynchronize(Stream stream) override { return absl::OkStatus(); }
  absl::Status CopyAsync(void* dst, const void* src, uint64_t bytes, Stream stream) override;
  absl::Status MemsetAsync(void* dst, uint8_t value, uint64_t bytes, Stream stream) override;
  absl::Status DecodeUnits(std::span<const codec::gpu::UnitView> views, void* workspace,
                           uint64_t workspace_bytes, Stream stream) override;
  absl::Status BuildSegmentOffsets(std::span<const codec::gpu::UnitView> views, void* workspace,
                                   uint64_t workspace_bytes, Stream stream) override;
  absl::Status CheckDecoded(const void* workspace, Stream stream) override;
  uint64_t DecodeWorkspaceBytes(size_t views) const override;
  // With the kernels' per-lane steps (codec::DecodeTiledView).
  absl::Status DecodeTiled(std::span<const codec::gpu::TiledDecodeView> views, void* workspace,
                           uint64_t workspace_bytes, Stream stream) override;
  uint64_t TiledWorkspaceBytes(size_t views) const override;
  // The reference operations, on host memory.
  runtime::ForwardOps* forward_ops() override { return &forward_ops_; }

  // Fault injection: every decode from now on reports corrupt codes.
  void FailDecodes(bool fail) { fail_decodes_ = fail; }
  uint64_t decode_launches() const;
  uint64_t tiled_decode_launches() const;

 private:
  // Checks a launch's views and workspace and clears its error flag, as a launch does.
  absl::StatusOr<uint32_t*> BeginLaunch(std::span<const codec::gpu::UnitView> views,
                                        void* workspace, uint64_t workspace_bytes);

  const uint64_t total_;
  mutable std::mutex mu_;
  std::map<void*, uint64_t> device_;  // allocation -> bytes
  std::map<void*, uint64_t> host_;
  uint64_t allocated_ = 0;
  int handles_ = 0;
  uint64_t launches_ = 0;
  uint64_t tiled_launches_ = 0;
  std::atomic<bool> fail_decodes_{false};
  runtime::ReferenceForwardOps forward_ops_;
};

}  // namespace df11::testing

#endif  // DF11_TESTS_RUNTIME_EMULATED_GPU_DEVICE_H_
