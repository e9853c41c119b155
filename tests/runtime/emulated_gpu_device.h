// A GpuDevice whose "device memory" is host memory and whose decoder runs the GPU kernel's
// per-thread and per-block steps (codec/cuda/decode_steps.h) one after another: the CUDA backend's
// host logic (arena, placement, uploads, decode launches, the forward pass's orchestration,
// accounting) is tested with it without a GPU. Its forward operations run the forward kernels'
// steps in the same way (EmulatedForwardOps).
//
// Streams behave as a GPU's: each runs its work on a thread of its own, in the order enqueued,
// while the host goes on; an event marks a point of a stream that another stream or the host can
// wait for. A copy from page-locked host memory (AllocateHost) or device memory reads its source
// when it runs, a copy from other host memory when it is enqueued, and a copy into other host
// memory returns once done, as cudaMemcpyAsync does. So a missing event, a missing
// synchronization or a buffer reused too early gives a wrong result in a test, as on a GPU.
//
// It enforces what the real device relies on: a copy's source and destination must not overlap,
// decode workspaces must be large enough, and only memory it handed out is freed.
#ifndef DF11_TESTS_RUNTIME_EMULATED_GPU_DEVICE_H_
#define DF11_TESTS_RUNTIME_EMULATED_GPU_DEVICE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>

#include "daemon/runtime/backends/cuda/gpu_device.h"
#include "tests/runtime/emulated_forward_ops.h"

namespace df11::testing {

class EmulatedGpuDevice final : public runtime::GpuDevice {
 public:
  // A device with `total_bytes` of memory.
  explicit EmulatedGpuDevice(uint64_t total_bytes);
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
  absl::StatusOr<Event> CreateTimingEvent() override;
  absl::StatusOr<double> ElapsedSeconds(Event start, Event end) override;
  Counters counters() const override;
  void DestroyEvent(Event event) override;
  absl::Status Record(Event event, Stream stream) override;
  absl::Status StreamWait(Stream stream, Event event) override;
  absl::Status EventSynchronize(Event event) override;
  absl::Status StreamSynchronize(Stream stream) override;
  absl::Status CopyAsync(void* dst, const void* src, uint64_t bytes, Stream stream) override;
  absl::Status MemsetAsync(void* dst, uint8_t value, uint64_t bytes, Stream stream) override;
  absl::Status CopyStridedAsync(void* dst, uint64_t dst_pitch, const void* src, uint64_t src_pitch,
                                uint64_t width, uint64_t rows, Stream stream) override;
  absl::Status DecodeUnits(std::span<const codec::gpu::UnitView> views, void* workspace,
                           uint64_t workspace_bytes, Stream stream) override;
  absl::Status BuildSegmentOffsets(std::span<const codec::gpu::UnitView> views, void* workspace,
                                   uint64_t workspace_bytes, Stream stream) override;
  uint64_t DecodeWorkspaceBytes(size_t views) const override;
  // With the kernels' per-lane steps (codec::DecodeTiledView).
  absl::Status DecodeTiled(std::span<const codec::gpu::TiledDecodeView> views, void* workspace,
                           uint64_t workspace_bytes, Stream stream) override;
  uint64_t TiledWorkspaceBytes(size_t views) const override;
  // With the kernel's per-lane steps (codec::DecodeLaneView).
  absl::Status DecodeLanes(std::span<const codec::gpu::LaneView> views, void* workspace,
                           uint64_t workspace_bytes, Stream stream) override;
  uint64_t lane_decode_launches() const;
  // The forward kernels' steps, on host memory, each operation run in its stream's order.
  runtime::ForwardOps* forward_ops() override { return forward_ops_.get(); }

  // Fault injection: every decode from now on reports corrupt codes.
  void FailDecodes(bool fail) { fail_decodes_ = fail; }
  uint64_t decode_launches() const;
  uint64_t tiled_decode_launches() const;

 private:
  // A stream: its work runs in order on its thread.
  struct StreamState {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::function<void()>> work;
    uint64_t enqueued = 0, done = 0;
    bool stop = false;
    std::thread thread;
  };
  // A point of a stream: done once the stream has run that much of its work.
  struct EventState {
    StreamState* stream = nullptr;  // none until recorded
    uint64_t point = 0;
    bool timing = false;
    // When the stream reached the point (timing events), in seconds of the host's steady clock.
    std::shared_ptr<std::atomic<double>> reached = std::make_shared<std::atomic<double>>(0.0);
  };
  class StreamOps;

  static void Run(StreamState& s);
  // Runs `work` in `stream`'s order (at once, on the caller, for no stream).
  void Enqueue(Stream stream, std::function<void()> work);
  static void WaitFor(StreamState& s, uint64_t point);
  // What memory `p` is: device memory, page-locked host memory, or other host memory.
  enum class Memory { kDevice, kPinned, kPageable };
  Memory Kind(const void* p) const;
  // Checks a launch's views and workspace.
  absl::Status CheckLaunch(std::span<const codec::gpu::UnitView> views,
                           uint64_t workspace_bytes) const;

  const uint64_t total_;
  mutable std::mutex mu_;
  std::map<const void*, uint64_t> device_;  // allocation -> bytes
  std::map<const void*, uint64_t> host_;
  uint64_t allocated_ = 0;
  int handles_ = 0;
  uint64_t launches_ = 0;
  uint64_t tiled_launches_ = 0;
  uint64_t lane_launches_ = 0;
  // Counters, as the CUDA device counts them.
  std::atomic<uint64_t> enqueued_{0}, event_ops_{0}, host_syncs_{0};
  std::atomic<bool> fail_decodes_{false};
  std::unique_ptr<runtime::ForwardOps> forward_ops_;
};

}  // namespace df11::testing

#endif  // DF11_TESTS_RUNTIME_EMULATED_GPU_DEVICE_H_
