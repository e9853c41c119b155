// Device memory for the GPU decoder's callers: a plain owned buffer, and a DF11 unit uploaded with
// its GPU layout in one allocation. CUDA-free header; built with CUDA only (DF11_HAVE_CUDA).
// The daemon sub-allocates from a per-device arena instead; these serve tests, benchmarks and
// tools.
#ifndef DF11_CODEC_CUDA_DEVICE_UNIT_H_
#define DF11_CODEC_CUDA_DEVICE_UNIT_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "codec/cuda/decode_steps.h"
#include "codec/gpu_layout.h"
#include "codec/unit.h"

namespace df11::codec::gpu {

// cudaMalloc'ed memory, freed on destruction. Movable.
class DeviceBuffer {
 public:
  // kResourceExhausted with the numbers when the device has no room; kInternal for other errors.
  static absl::StatusOr<DeviceBuffer> Allocate(size_t bytes);
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  ~DeviceBuffer();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  // Synchronous helpers: every byte set to `byte`; the first `bytes` bytes copied to host `dst`.
  absl::Status Fill(uint8_t byte);
  absl::Status CopyToHost(void* dst, size_t bytes) const;
  // The first `bytes` bytes from host `src`.
  absl::Status CopyFromHost(const void* src, size_t bytes);

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// One unit resident on the current device in its GpuUnitImage (official tensors, stream
// zero-padded, and the GPU layout), in one allocation.
class DeviceUnit {
 public:
  // Copies synchronously. Errors as DeviceBuffer::Allocate, and kInternal for a failed copy.
  static absl::StatusOr<DeviceUnit> Upload(const Unit& unit, const GpuLayout& layout);

  // The view DecodeUnits takes, writing to `out` (device memory of num_elements() values).
  UnitView view(uint16_t* out) const;
  uint64_t device_bytes() const { return buffer_.size(); }
  uint32_t num_elements() const { return static_cast<uint32_t>(sizes_.elements); }

 private:
  DeviceBuffer buffer_;
  UnitSizes sizes_;
  GpuUnitImage image_;  // where each section is in buffer_
};

// Decodes `unit` on the current device into host `out` (num_elements() values): builds the layout,
// uploads, poisons the device output (0xFF bytes), launches, checks the error flag, copies back.
// Synchronous; for tests and tools. kInvalidArgument for a wrong `out` size, kDataLoss from the
// layout or the kernel, device errors as above.
absl::Status DecodeOnDevice(const Unit& unit, std::span<uint16_t> out);

}  // namespace df11::codec::gpu

#endif  // DF11_CODEC_CUDA_DEVICE_UNIT_H_
