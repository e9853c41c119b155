// The kernels of the forward pass on a CUDA device: their per-thread steps (forward_steps.h),
// joined by barriers and by the warp and block sums below. Each computes what the reference does
// (forward_reference.cc) with its fp32 sums in another order. Included by forward_ops.cu only,
// which launches them: each kernel is defined in that one translation unit.
#ifndef DF11_DAEMON_RUNTIME_BACKENDS_CUDA_DEVICE_FORWARD_KERNELS_CUH_
#define DF11_DAEMON_RUNTIME_BACKENDS_CUDA_DEVICE_FORWARD_KERNELS_CUH_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "daemon/runtime/backends/cuda/device/forward_steps.h"
#include "daemon/runtime/backends/cuda/forward_ops.h"

namespace df11::runtime::cuda {
namespace {

__device__ __forceinline__ int64_t GridIndex() {
  return blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
}

// The butterfly of forward_steps.h: every lane ends with the warp's sum.
__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffff, v, o);
  return v;
}

// The sum of every thread's `v` (blocks of up to kThreads threads): each warp's WarpSum, then the
// warps' sums in warp order through the first warp's WarpSum; every thread gets it.
__device__ __forceinline__ float BlockSum(float v) {
  __shared__ float partial[kWarps];
  v = WarpSum(v);
  if (threadIdx.x % kWarp == 0) partial[threadIdx.x / kWarp] = v;
  __syncthreads();
  if (threadIdx.x < kWarp) {
    v = WarpSum(threadIdx.x < blockDim.x / kWarp ? partial[threadIdx.x] : 0.0f);
    if (threadIdx.x == 0) partial[0] = v;
  }
  __syncthreads();
  return partial[0];
}

template <typename Out>
__global__ void BroadcastBias(const uint16_t* bias, int64_t rows, int64_t out, Out* y) {
  const int64_t i = GridIndex();
  if (i < rows * out) BroadcastBiasStep(bias, out, y, i);
}

// One block per row.
template <typename In, typename Out>
__global__ void RmsNormKernel(const In* x, const uint16_t* w, int64_t n, float eps, float offset,
                              Out* y) {
  const In* row = x + blockIdx.x * n;
  const float sum = BlockSum(RmsSquares(row, n, threadIdx.x, blockDim.x));
  RmsStore(row, w, n, RmsScale(sum, n, eps), offset, y + blockIdx.x * n, threadIdx.x, blockDim.x);
}

// One block per row: x += y, then the new x normalised into out.
__global__ void AddRmsNormKernel(float* x, const float* y, const uint16_t* w, int64_t n, float eps,
                                 float offset, uint16_t* out) {
  float* row = x + blockIdx.x * n;
  const float sum = BlockSum(AddSquares(row, y + blockIdx.x * n, n, threadIdx.x, blockDim.x));
  RmsStore(row, w, n, RmsScale(sum, n, eps), offset, out + blockIdx.x * n, threadIdx.x, blockDim.x);
}

__global__ void RopeKernel(uint16_t* x, int64_t rows, int64_t heads, int64_t head_dim,
                           const int32_t* row_position, RopeTable t) {
  const int64_t i = GridIndex();
  if (i < rows * heads * (t.rotary_dim / 2)) RopeStep(x, heads, head_dim, row_position, t, i);
}

__global__ void WriteKvKernel(const uint16_t* k, const uint16_t* v, int64_t rows, PagedKv kv) {
  const int64_t i = GridIndex();
  if (i < rows * kv.kv_heads * kv.head_dim) WriteKvStep(k, v, kv, i);
}

// kHeadThreads threads per block.
__global__ void PrepareHeadsKernel(uint16_t* q, uint16_t* k, const uint16_t* v, int64_t heads,
                                   const uint16_t* q_norm, const uint16_t* k_norm, float eps,
                                   float offset, RopeTable t, PagedKv kv) {
  const int64_t d = kv.head_dim;
  const HeadOfBlock h = HeadOf(q, k, heads, kv.kv_heads, d, q_norm, k_norm, blockIdx.x);
  __shared__ float value[kMaxHeadDim];
  __shared__ float partial[kHeadWarps];
  const int threads = kHeadThreads;
  HeadLoad(h.head, d, value, threadIdx.x, threads);
  if (h.norm != nullptr) {
    const float sum = WarpSum(RmsSquares(value, d, threadIdx.x, threads));
    if (threadIdx.x % kWarp == 0) partial[threadIdx.x / kWarp] = sum;
    __syncthreads();
    HeadNormalize(value, h.norm, d, RmsScale(HeadTotal(partial), d, eps), offset, threadIdx.x,
                  threads);
  }
  __syncthreads();
  HeadRotate(value, t, kv.row_position[h.row], threadIdx.x, threads);
  __syncthreads();
  HeadStore(h, value, v, kv, threadIdx.x, threads);
}

// kThreads threads per block.
__global__ void AttentionKernel(const uint16_t* q, AttentionShape s, PagedKv kv, uint16_t* out) {
  const AttentionOfBlock b = AttentionOf(s, kv, blockIdx.x);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  AttentionLane a;
  AttentionStart(q, s, b, lane, a);
  for (int64_t j = b.first + warp; j <= b.last; j += kWarps) {
    const float dot = WarpSum(AttentionDotPart(a, s, kv, b, j, lane));
    AttentionAccumulate(a, dot, s, kv, b, j, lane);
  }
  __shared__ AttentionWarps warps;
  AttentionPublish(a, s.head_dim, warp, lane, warps);
  __syncthreads();
  uint16_t* to = out + (b.row * s.heads + b.head) * s.head_dim;
  for (int64_t i = threadIdx.x; i < s.head_dim; i += kThreads) {
    StoreValue(to, i, AttentionMerged(warps, i));
  }
}

__global__ void GatedActivationKernel(const uint16_t* gate, const uint16_t* up, int64_t n,
                                      bool gelu_tanh, uint16_t* y) {
  const int64_t i = GridIndex();
  if (i < n) GatedActivationStep(gate, up, gelu_tanh, y, i);
}

__global__ void AddKernel(float* x, const float* y, int64_t n) {
  const int64_t i = GridIndex();
  if (i < n) AddStep(x, y, i);
}

__global__ void WidenKernel(const uint16_t* in, int64_t n, float scale, float* out) {
  const int64_t i = GridIndex();
  if (i < n) WidenStep(in, scale, out, i);
}

__global__ void SoftCapKernel(float* x, int64_t n, float cap) {
  const int64_t i = GridIndex();
  if (i < n) SoftCapStep(x, cap, i);
}

// One block per row.
__global__ void GatherRowsKernel(const char* base, const uint64_t* offsets, int64_t words,
                                 uint16_t* out) {
  GatherRowStep(base, offsets, words, out, blockIdx.x, threadIdx.x, blockDim.x);
}

__global__ void SplitColumnsKernel(const uint16_t* in, int64_t rows, int64_t in_width,
                                   int64_t first, int64_t width, uint16_t* out) {
  const int64_t i = GridIndex();
  if (i < rows * width) SplitColumnsStep(in, in_width, first, width, out, i);
}

}  // namespace
}  // namespace df11::runtime::cuda

#endif  // DF11_DAEMON_RUNTIME_BACKENDS_CUDA_DEVICE_FORWARD_KERNELS_CUH_
