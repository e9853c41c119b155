#include "daemon/runtime/backends/cuda/device/cuda_device.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <string>

#include "absl/strings/str_cat.h"
#include "codec/cuda/cuda_status.h"
#include "codec/base/status_macros.h"
#include "codec/gpu_decoder.h"
#include "codec/gpu_lane.h"
#include "codec/gpu_tiled.h"
#include "daemon/runtime/backends/cuda/device/forward_ops.h"

namespace df11::runtime::cuda {
namespace {

class CudaDevice final : public GpuDevice {
 public:
  CudaDevice(int index, std::string description, std::shared_ptr<std::atomic<uint64_t>> launches,
             std::unique_ptr<ForwardOps> forward_ops)
      : index_(index),
        description_(std::move(description)),
        launches_(std::move(launches)),
        forward_ops_(std::move(forward_ops)) {}

  std::string name() const override { return absl::StrCat("cuda:", index_); }
  std::string description() const override { return description_; }

  absl::StatusOr<MemoryInfo> GetMemoryInfo() override {
    DF11_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
    size_t free = 0, total = 0;
    DF11_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free, &total));
    return MemoryInfo{.free = free, .total = total};
  }

  absl::StatusOr<void*> Allocate(uint64_t bytes) override {
    DF11_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky: clear it
      size_t free = 0, total = 0;
      cudaMemGetInfo(&free, &total);
      return absl::ResourceExhaustedError(absl::StrCat(
          "cudaMalloc of ", bytes, " bytes on ", name(), ": ", free, " of ", total, " bytes free"));
    }
    DF11_CUDA_RETURN_IF_ERROR(e);
    return p;
  }

  void Free(void* device) override {
    cudaSetDevice(index_);
    cudaFree(device);
  }

  absl::StatusOr<void*> AllocateHost(uint64_t bytes) override {
    DF11_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
    void* p = nullptr;
    DF11_CUDA_RETURN_IF_ERROR(cudaMallocHost(&p, bytes));
    return p;
  }

  void FreeHost(void* host) override { cudaFreeHost(host); }

  absl::StatusOr<Stream> CreateStream() override {
    DF11_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
    cudaStream_t s = nullptr;
    DF11_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return static_cast<Stream>(s);
  }

  void DestroyStream(Stream stream) override {
    cudaSetDevice(index_);
    cudaStreamDestroy(static_cast<cudaStream_t>(stream));
  }

  absl::StatusOr<Event> CreateEvent() override {
    DF11_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
    cudaEvent_t e = nullptr;
    DF11_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return static_cast<Event>(e);
  }

  absl::StatusOr<Event> CreateTimingEvent() override {
    DF11_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
    cudaEvent_t e = nullptr;
    DF11_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
    return static_cast<Event>(e);
  }

  absl::StatusOr<double> ElapsedSeconds(Event start, Event end) override {
    float ms = 0;
    DF11_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start),
                                                   static_cast<cudaEvent_t>(end)));
    return ms / 1000.0;
  }

  Counters counters() const override {
    return Counters{.launches = launches_->load(),
                    .event_ops = event_ops_.load(),
                    .host_syncs = host_syncs_.load()};
  }

  void DestroyEvent(Event event) override {
    cudaSetDevice(index_);
    cudaEventDestroy(static_cast<cudaEvent_t>(event));
  }

  absl::Status Record(Event event, Stream stream) override {
    ++event_ops_;
    DF11_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
    DF11_CUDA_RETURN_IF_ERROR(
        cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)));
    return absl::OkStatus();
  }

  absl::Status StreamWait(Stream stream, Event event) override {
    ++event_ops_;
    DF11_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
    DF11_CUDA_RETURN_IF_ERROR(
        cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0));
    return absl::OkStatus();
  }

  absl::Status EventSynchronize(Event event) override {
    ++host_syncs_;
    DF11_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(static_cast<cudaEvent_t>(event)));
    return absl::OkStatus();
  }

  absl::Status StreamSynchronize(Stream stream) override {
    ++host_syncs_;
    DF11_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
    return absl::OkStatus();
  }

  absl::Status CopyAsync(void* dst, const void* src, uint64_t bytes, Stream stream) override {
    ++*launches_;
    DF11_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
    DF11_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)));
    return absl::OkStatus();
  }

  absl::Status MemsetAsync(void* dst, uint8_t value, uint64_t bytes, Stream stream) override {
    ++*launches_;
    DF11_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
    DF11_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(dst, value, bytes, static_cast<cudaStream_t>(stream)));
    return absl::OkStatus();
  }

  absl::Status CopyStridedAsync(void* dst, uint64_t dst_pitch, const void* src, uint64_t src_pitch,
                                uint64_t width, uint64_t rows, Stream stream) override {
    ++*launches_;
    DF11_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
    DF11_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, rows,
                                                cudaMemcpyDefault,
                                                static_cast<cudaStream_t>(stream)));
    return absl::OkStatus();
  }

  // The operations launch on the calling thread's current device: this makes it this one.
  ForwardOps* forward_ops() override {
    cudaSetDevice(index_);
    return forward_ops_.get();
  }

  absl::Status DecodeUnits(std::span<const codec::gpu::UnitView> views, void* workspace,
                           uint64_t workspace_bytes, Stream stream) override {
    *launches_ += 3;  // the views' copy, the error flag's memset and the kernel
    DF11_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
    return codec::gpu::DecodeUnits(views, workspace, workspace_bytes, stream);
  }

  absl::Status BuildSegmentOffsets(std::span<const codec::gpu::UnitView> views, void* workspace,
                                   uint64_t workspace_bytes, Stream stream) override {
    *launches_ += 3;  // the views' copy, the error flag's memset and the kernel
    DF11_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
    return codec::gpu::BuildSegmentOffsets(views, workspace, workspace_bytes, stream);
  }

  uint64_t DecodeWorkspaceBytes(size_t views) const override {
    return codec::gpu::DecodeWorkspaceBytes(views);
  }

  absl::Status DecodeTiled(std::span<const codec::gpu::TiledDecodeView> views, void* workspace,
                           uint64_t workspace_bytes, Stream stream) override {
    *launches_ += 2;  // the error flag's memset and the kernel
    DF11_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
    return codec::gpu::DecodeTiled(views, workspace, workspace_bytes, stream);
  }

  absl::Status DecodeLanes(std::span<const codec::gpu::LaneView> views, void* workspace,
                           uint64_t workspace_bytes, Stream stream) override {
    *launches_ += 2;  // the error flag's memset and the kernel
    DF11_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
    return codec::gpu::DecodeLanes(views, workspace, workspace_bytes, stream);
  }

  uint64_t TiledWorkspaceBytes(size_t views) const override {
    return codec::gpu::TiledWorkspaceBytes(views);
  }

 private:
  const int index_;
  const std::string description_;
  // Shared with the operations, which count their own launches.
  const std::shared_ptr<std::atomic<uint64_t>> launches_;
  std::atomic<uint64_t> event_ops_{0}, host_syncs_{0};
  const std::unique_ptr<ForwardOps> forward_ops_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GpuDevice>> OpenDevice(int index) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
    cudaGetLastError();
    count = 0;
  } else {
    DF11_CUDA_RETURN_IF_ERROR(e);
  }
  if (index < 0 || index >= count) {
    return absl::NotFoundError(absl::StrCat("cuda:", index, ": no such device (", count,
                                            " CUDA devices visible",
                                            count == 0 ? ": no GPU or no driver" : "", ")"));
  }
  cudaDeviceProp props{};
  DF11_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&props, index));
  DF11_CUDA_RETURN_IF_ERROR(cudaSetDevice(index));
  DF11_RETURN_IF_ERROR(CheckKernelImage(absl::StrCat("cuda:", index, " (", props.name, ")")));
  auto launches = std::make_shared<std::atomic<uint64_t>>(0);
  DF11_ASSIGN_OR_RETURN(std::unique_ptr<ForwardOps> forward_ops, NewForwardOps(launches));
  return std::unique_ptr<GpuDevice>(
      new CudaDevice(index,
                     absl::StrCat(props.name, " (sm_", props.major, props.minor, ", ",
                                  props.totalGlobalMem >> 20, " MiB)"),
                     std::move(launches), std::move(forward_ops)));
}

}  // namespace df11::runtime::cuda
