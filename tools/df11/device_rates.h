// The ceilings a GPU's forward step is measured against, taken in the same run as the step: the
// rate at which a kernel that only reads can stream a buffer much larger than L2 from memory, and
// cuBLAS's BF16 matrix-product rate (fp32 accumulation) on a large square product.
//
// MeasureDeviceRates is built in CUDA builds only (device_rates.cu); the read kernel's
// per-thread step is here, plain C++ under a host compiler, so that tests run it on the CPU.
#ifndef DF11_TOOLS_DF11_DEVICE_RATES_H_
#define DF11_TOOLS_DF11_DEVICE_RATES_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "codec/lut_walk.h"  // DF11_HOST_DEVICE

namespace df11::tool {

struct DeviceRates {
  double read_gbps = 0;           // bytes read over the read kernel's median time
  uint64_t read_bytes = 0;        // the buffer it read
  double bf16_matmul_tflops = 0;  // 2 n^3 over cublasGemmEx's median time
  int64_t matmul_size = 0;        // n
};

// Allocates what it measures with (the read buffer, max(1 GiB, 16 x L2), then the product's
// 3 x 128 MiB and cuBLAS's workspace) and frees it before returning.
absl::StatusOr<DeviceRates> MeasureDeviceRates(int device);

// 16 bytes, loaded as one vector.
struct alignas(16) Quad {
  uint32_t x, y, z, w;
};

// One thread of the read kernel: the sum (modulo 2^32) of every 32-bit word of the quads first,
// first + stride, ... below n. The threads' sums add up to the whole buffer's, which the
// measurement checks (a read the compiler dropped, or a grid that skips quads, changes it).
DF11_HOST_DEVICE uint32_t SumOfQuads(const Quad* quads, uint64_t n, uint64_t first,
                                     uint64_t stride) {
  uint32_t sum = 0;
  for (uint64_t i = first; i < n; i += stride) {
    const Quad q = quads[i];
    sum += q.x + q.y + q.z + q.w;
  }
  return sum;
}

// 0 + 1 + ... + (n - 1) modulo 2^32: what the read kernel gives for a buffer whose word i holds
// i (n below 2^32).
DF11_HOST_DEVICE uint32_t SumOfIndices(uint64_t n) {
  return static_cast<uint32_t>(n % 2 == 0 ? (n / 2) * (n - 1) : n * ((n - 1) / 2));
}

}  // namespace df11::tool

#endif  // DF11_TOOLS_DF11_DEVICE_RATES_H_
