// What the CUDA backend asks of a GPU: memory from the driver, pinned host memory, streams and
// events, asynchronous copies, and the launches of the GPU decoders. No CUDA type appears here. The CUDA
// implementation is daemon/runtime/backends/cuda/device/cuda_device.h (CUDA builds only); tests run the backend
// on an emulation that keeps "device" memory on the host and decodes with the kernel's per-thread
// steps (tests/runtime/emulated_gpu_device.h), so its host logic is tested without a GPU.
//
// Work on one stream runs in the order it was enqueued; an event marks a point in a stream that
// another stream or the host can wait for. Device pointers and host pointers share one address
// space (CUDA's unified addressing), so one copy call serves every direction.
#ifndef DF11_DAEMON_RUNTIME_BACKENDS_CUDA_GPU_DEVICE_H_
#define DF11_DAEMON_RUNTIME_BACKENDS_CUDA_GPU_DEVICE_H_

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codec/cuda/decode_steps.h"
#include "codec/cuda/lane_steps.h"
#include "codec/cuda/tiled_steps.h"

namespace df11::runtime {

class ForwardOps;

class GpuDevice {
 public:
  using Stream = void*;  // opaque: a cudaStream_t
  using Event = void*;   // opaque: a cudaEvent_t

  struct MemoryInfo {
    uint64_t free = 0;
    uint64_t total = 0;
  };

  virtual ~GpuDevice() = default;

  // "cuda:N", and the device's model and compute capability for logs.
  virtual std::string name() const = 0;
  virtual std::string description() const = 0;
  // The driver's view of the device's memory now.
  virtual absl::StatusOr<MemoryInfo> GetMemoryInfo() = 0;

  // Device memory (cudaMalloc: never managed memory). kResourceExhausted with the numbers when
  // the device has no room.
  virtual absl::StatusOr<void*> Allocate(uint64_t bytes) = 0;
  virtual void Free(void* device) = 0;
  // Page-locked host memory, for copies that overlap other work.
  virtual absl::StatusOr<void*> AllocateHost(uint64_t bytes) = 0;
  virtual void FreeHost(void* host) = 0;

  virtual absl::StatusOr<Stream> CreateStream() = 0;
  virtual void DestroyStream(Stream stream) = 0;
  virtual absl::StatusOr<Event> CreateEvent() = 0;
  // An event that also records when the stream reached it, for ElapsedSeconds (profiling).
  virtual absl::StatusOr<Event> CreateTimingEvent() = 0;
  // Seconds of device time from `start` to `end`, both timing events that have completed.
  virtual absl::StatusOr<double> ElapsedSeconds(Event start, Event end) = 0;
  virtual void DestroyEvent(Event event) = 0;
  // Marks the current end of `stream` with `event`.
  virtual absl::Status Record(Event event, Stream stream) = 0;
  // Work enqueued on `stream` from now on starts after `event`.
  virtual absl::Status StreamWait(Stream stream, Event event) = 0;
  // Blocks the host until `event` (or everything enqueued on `stream`) has run.
  virtual absl::Status EventSynchronize(Event event) = 0;
  virtual absl::Status StreamSynchronize(Stream stream) = 0;

  // Enqueues a copy of `bytes` between any two of device and host memory. From page-locked host
  // memory the host may go on at once; the source must then stay unchanged until the stream
  // passes this point.
  virtual absl::Status CopyAsync(void* dst, const void* src, uint64_t bytes, Stream stream) = 0;
  virtual absl::Status MemsetAsync(void* dst, uint8_t value, uint64_t bytes, Stream stream) = 0;
  // `rows` pieces of `width` bytes, `src_pitch` bytes apart from `src`, to `dst`, `dst_pitch`
  // bytes apart: one copy (cudaMemcpy2DAsync), as CopyAsync otherwise. Reads many small flags
  // with one copy.
  virtual absl::Status CopyStridedAsync(void* dst, uint64_t dst_pitch, const void* src,
                                        uint64_t src_pitch, uint64_t width, uint64_t rows,
                                        Stream stream) = 0;

  // codec::gpu::DecodeUnits and BuildSegmentOffsets on this device (codec/gpu_decoder.h). The
  // caller reads the error flag (kDecodeErrorOffset) once the launch is done.
  virtual absl::Status DecodeUnits(std::span<const codec::gpu::UnitView> views, void* workspace,
                                   uint64_t workspace_bytes, Stream stream) = 0;
  virtual absl::Status BuildSegmentOffsets(std::span<const codec::gpu::UnitView> views,
                                           void* workspace, uint64_t workspace_bytes,
                                           Stream stream) = 0;
  // The error flag's place in a decode launch's workspace: a 32-bit word, not 0 when the launch
  // found corrupt codes.
  static constexpr uint64_t kDecodeErrorOffset = 0;
  // Device workspace one DecodeUnits call with `views` views needs.
  virtual uint64_t DecodeWorkspaceBytes(size_t views) const = 0;
  // codec::gpu::DecodeTiled (codec/gpu_tiled.h): tiled matrices into BF16, with the same error
  // flag; and the workspace a launch of `views` views needs.
  virtual absl::Status DecodeTiled(std::span<const codec::gpu::TiledDecodeView> views,
                                   void* workspace, uint64_t workspace_bytes, Stream stream) = 0;
  virtual uint64_t TiledWorkspaceBytes(size_t views) const = 0;
  // codec::gpu::DecodeLanes (codec/gpu_lane.h): lane-stream units into BF16, with the same
  // error flag; its workspace is the flag (codec::gpu::LaneWorkspaceBytes()).
  virtual absl::Status DecodeLanes(std::span<const codec::gpu::LaneView> views, void* workspace,
                                   uint64_t workspace_bytes, Stream stream) = 0;

  // The forward pass's operations on this device (forward_ops.h), owned by the device; nullptr
  // when it has none.
  virtual ForwardOps* forward_ops() = 0;

  // What was enqueued on the device since it was opened: kernel launches, copies and memsets
  // (one per cuBLAS product, which may launch more), event records and waits, and the host's
  // waits for the device.
  struct Counters {
    uint64_t launches = 0;
    uint64_t event_ops = 0;
    uint64_t host_syncs = 0;
  };
  virtual Counters counters() const = 0;
};

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_BACKENDS_CUDA_GPU_DEVICE_H_
