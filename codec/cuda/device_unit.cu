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

absl::StatusOr<DeviceUnit> DeviceUnit::Upload(const Unit& unit, const GpuLayout& layout) {
  const UnitTensors& t = unit.tensors();
  DeviceUnit d;
  d.n_elements_ = static_cast<uint32_t>(unit.num_elements());
  d.n_bytes_ = static_cast<uint32_t>(unit.num_bytes());
  d.n_blocks_ = static_cast<uint32_t>(unit.num_blocks());
  d.lut_rows_ = static_cast<uint32_t>(unit.lut_rows());
  // Sections 256-byte aligned, in one allocation.
  size_t size = 0;
  auto section = [&size](size_t bytes) {
    const size_t at = size;
    size = (size + bytes + 255) / 256 * 256;
    return at;
  };
  d.stream_ = section(t.encoded_exponent.size() + kStreamPadBytes);
  d.sign_mantissa_ = section(t.sign_mantissa.size());
  d.gaps_ = section(t.gaps.size() + 1);
  d.positions_ = section(unit.positions().size_bytes());
  d.segment_offsets_ = section(layout.segment_offsets.size() * sizeof(uint16_t));
  d.table_ = section(layout.table.size() * sizeof(uint32_t));
  d.luts_ = section(t.luts.size());
  DF11_ASSIGN_OR_RETURN(d.buffer_, DeviceBuffer::Allocate(size));
  auto* base = static_cast<char*>(d.buffer_.data());
  DF11_CUDA_RETURN_IF_ERROR(cudaMemset(base, 0, size));  // stream and gap padding read as zero
  auto copy = [base](size_t at, const void* src, size_t bytes) {
    return cuda::CudaStatus(cudaMemcpy(base + at, src, bytes, cudaMemcpyHostToDevice),
                            "cudaMemcpy");
  };
  DF11_RETURN_IF_ERROR(copy(d.stream_, t.encoded_exponent.data(), t.encoded_exponent.size()));
  DF11_RETURN_IF_ERROR(copy(d.sign_mantissa_, t.sign_mantissa.data(), t.sign_mantissa.size()));
  DF11_RETURN_IF_ERROR(copy(d.gaps_, t.gaps.data(), t.gaps.size()));
  DF11_RETURN_IF_ERROR(copy(d.positions_, unit.positions().data(), unit.positions().size_bytes()));
  DF11_RETURN_IF_ERROR(copy(d.segment_offsets_, layout.segment_offsets.data(),
                            layout.segment_offsets.size() * sizeof(uint16_t)));
  DF11_RETURN_IF_ERROR(copy(d.table_, layout.table.data(), layout.table.size() * sizeof(uint32_t)));
  DF11_RETURN_IF_ERROR(copy(d.luts_, t.luts.data(), t.luts.size()));
  return d;
}

UnitView DeviceUnit::view(uint16_t* out) const {
  const auto* base = static_cast<const char*>(buffer_.data());
  return UnitView{reinterpret_cast<const uint32_t*>(base + stream_),
                  reinterpret_cast<const uint8_t*>(base + sign_mantissa_),
                  reinterpret_cast<const uint8_t*>(base + gaps_),
                  reinterpret_cast<const uint32_t*>(base + positions_),
                  reinterpret_cast<const uint16_t*>(base + segment_offsets_),
                  reinterpret_cast<const uint32_t*>(base + table_),
                  reinterpret_cast<const uint8_t*>(base + luts_),
                  out,
                  n_elements_,
                  n_bytes_,
                  n_blocks_,
                  lut_rows_};
}

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
