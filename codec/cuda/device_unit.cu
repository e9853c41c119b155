#include "codec/cuda/device_unit.h"

#include <cuda_runtime_api.h>

#include <string>
#include <utility>

#include "codec/base/status_macros.h"
#include "codec/cuda/cuda_status.h"
#include "codec/gpu_decoder.h"

namespace df11::codec::gpu {

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(size_t bytes) {
  DeviceBuffer b;
  const cudaError_t e = cudaMalloc(&b.data_, bytes);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear it
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    return absl::ResourceExhaustedError("cudaMalloc of " + std::to_string(bytes) + " bytes: " +
                                        std::to_string(free_bytes) + " of " +
                                        std::to_string(total) + " bytes free");
  }
  DF11_CUDA_RETURN_IF_ERROR(e);
  b.size_ = bytes;
  return b;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);
}

absl::Status DeviceBuffer::Fill(uint8_t byte) {
  DF11_CUDA_RETURN_IF_ERROR(cudaMemset(data_, byte, size_));
  return absl::OkStatus();
}

absl::Status DeviceBuffer::CopyToHost(void* dst, size_t bytes) const {
  if (bytes > size_) return absl::InvalidArgumentError("CopyToHost: more bytes than the buffer");
  DF11_CUDA_RETURN_IF_ERROR(cudaMemcpy(dst, data_, bytes, cudaMemcpyDeviceToHost));
  return absl::OkStatus();
}

absl::Status DeviceBuffer::CopyFromHost(const void* src, size_t bytes) {
  if (bytes > size_) return absl::InvalidArgumentError("CopyFromHost: more bytes than the buffer");
  DF11_CUDA_RETURN_IF_ERROR(cudaMemcpy(data_, src, bytes, cudaMemcpyHostToDevice));
  return absl::OkStatus();
}

absl::StatusOr<DeviceUnit> DeviceUnit::Upload(const Unit& unit, const GpuLayout& layout) {
  const UnitTensors& t = unit.tensors();
  DeviceUnit d;
  d.sizes_ = UnitSizes::Of(unit);
  d.image_ = GpuUnitImage::Of(d.sizes_);
  DF11_ASSIGN_OR_RETURN(d.buffer_, DeviceBuffer::Allocate(d.image_.bytes));
  auto* base = static_cast<char*>(d.buffer_.data());
  DF11_CUDA_RETURN_IF_ERROR(cudaMemset(base, 0, d.image_.bytes));  // padding reads as zero
  auto copy = [base](uint64_t at, const void* src, size_t bytes) {
    return cuda::CudaStatus(cudaMemcpy(base + at, src, bytes, cudaMemcpyHostToDevice),
                            "cudaMemcpy");
  };
  const GpuUnitImage& i = d.image_;
  DF11_RETURN_IF_ERROR(copy(i.stream, t.encoded_exponent.data(), t.encoded_exponent.size()));
  DF11_RETURN_IF_ERROR(copy(i.sign_mantissa, t.sign_mantissa.data(), t.sign_mantissa.size()));
  DF11_RETURN_IF_ERROR(copy(i.gaps, t.gaps.data(), t.gaps.size()));
  DF11_RETURN_IF_ERROR(copy(i.positions, unit.positions().data(), unit.positions().size_bytes()));
  DF11_RETURN_IF_ERROR(copy(i.segment_offsets, layout.segment_offsets.data(),
                            layout.segment_offsets.size() * sizeof(uint16_t)));
  DF11_RETURN_IF_ERROR(copy(i.table, layout.table.data(), layout.table.size() * sizeof(uint32_t)));
  DF11_RETURN_IF_ERROR(copy(i.luts, t.luts.data(), t.luts.size()));
  return d;
}

UnitView DeviceUnit::view(uint16_t* out) const { return image_.View(buffer_.data(), sizes_, out); }

absl::Status DecodeOnDevice(const Unit& unit, std::span<uint16_t> out) {
  if (out.size() != unit.num_elements()) {
    return absl::InvalidArgumentError("DF11 unit " + unit.name() + " has " +
                                      std::to_string(unit.num_elements()) +
                                      " elements; output holds " + std::to_string(out.size()));
  }
  DF11_ASSIGN_OR_RETURN(GpuLayout layout, BuildGpuLayout(unit, nullptr));
  DF11_ASSIGN_OR_RETURN(DeviceUnit device_unit, DeviceUnit::Upload(unit, layout));
  DF11_ASSIGN_OR_RETURN(DeviceBuffer device_out, DeviceBuffer::Allocate(out.size_bytes()));
  DF11_RETURN_IF_ERROR(device_out.Fill(0xFF));
  DF11_ASSIGN_OR_RETURN(DeviceBuffer workspace, DeviceBuffer::Allocate(DecodeWorkspaceBytes(1)));
  const UnitView view = device_unit.view(static_cast<uint16_t*>(device_out.data()));
  DF11_RETURN_IF_ERROR(DecodeUnits(std::span(&view, 1), workspace.data(), workspace.size(), nullptr));
  DF11_RETURN_IF_ERROR(CheckDecoded(workspace.data(), nullptr));
  return device_out.CopyToHost(out.data(), out.size_bytes());
}

}  // namespace df11::codec::gpu
