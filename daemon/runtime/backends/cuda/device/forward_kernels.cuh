// The kernels of the forward pass on a CUDA device, each the reference's arithmetic
// (forward_reference.cc) with fp32 sums reduced in a different order. Included by forward_ops.cu
// only, which launches them: each kernel is defined in that one translation unit.
#ifndef DF11_DAEMON_RUNTIME_BACKENDS_CUDA_DEVICE_FORWARD_KERNELS_CUH_
#define DF11_DAEMON_RUNTIME_BACKENDS_CUDA_DEVICE_FORWARD_KERNELS_CUH_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "daemon/runtime/backends/cuda/forward_ops.h"

namespace df11::runtime::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float Load(const uint16_t* p, int64_t i) {
  return __bfloat162float(__ushort_as_bfloat16(p[i]));
}
__device__ __forceinline__ float Load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ void Store(uint16_t* p, int64_t i, float v) {
  p[i] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
}
__device__ __forceinline__ void Store(float* p, int64_t i, float v) { p[i] = v; }

// Fills y[rows][out] with the bias row, so that the product adds onto it (beta 1): for fp32
// outputs only, since with a BF16 output cuBLAS rounds the product to BF16 before adding it.
template <typename Out>
__global__ void BroadcastBias(const uint16_t* bias, int64_t rows, int64_t out, Out* y) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < rows * out) Store(y, i, Load(bias, i % out));
}

// The sum of every thread's `v` (blocks of up to kThreads threads): within each warp, then the
// warps' sums in warp order; every thread gets it.
__device__ __forceinline__ float BlockSum(float v) {
  __shared__ float partial[kThreads / 32];
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffff, v, o);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.0f;
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffff, v, o);
    if (threadIdx.x == 0) partial[0] = v;
  }
  __syncthreads();
  return partial[0];
}

// One block per row: the sum of squares in fp32, then the scaled row.
template <typename In, typename Out>
__global__ void RmsNormKernel(const In* x, const uint16_t* w, int64_t n, float eps, float offset,
                              Out* y) {
  const In* row = x + blockIdx.x * n;
  Out* out = y + blockIdx.x * n;
  float sum = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = Load(row, i);
    sum += v * v;
  }
  const float scale = 1.0f / sqrtf(BlockSum(sum) / static_cast<float>(n) + eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    Store(out, i, Load(row, i) * scale * (offset + Load(w, i)));
  }
}

// One block per row: x += y (stored), the sum of squares of the new x in fp32 as RmsNormKernel
// sums, then the scaled row in BF16.
__global__ void AddRmsNormKernel(float* x, const float* y, const uint16_t* w, int64_t n, float eps,
                                 float offset, uint16_t* out) {
  float* row = x + blockIdx.x * n;
  const float* add = y + blockIdx.x * n;
  uint16_t* to = out + blockIdx.x * n;
  float sum = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = row[i] + add[i];
    row[i] = v;
    sum += v * v;
  }
  const float scale = 1.0f / sqrtf(BlockSum(sum) / static_cast<float>(n) + eps);
  // Each thread reads back the elements it wrote: no barrier needed for them.
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    Store(to, i, row[i] * scale * (offset + Load(w, i)));
  }
}

// One thread per (row, head, frequency).
__global__ void RopeKernel(uint16_t* x, int64_t rows, int64_t heads, int64_t head_dim,
                           const int32_t* row_position, RopeTable t) {
  const int64_t half = t.rotary_dim / 2;
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= rows * heads * half) return;
  const int64_t f = i % half, rh = i / half, r = rh / heads;
  const int64_t pos = row_position[r];
  const float inverse = pos >= t.long_from ? t.long_inverse[f] : t.inverse[f];
  const float angle = static_cast<float>(pos) * inverse;
  const float cos = cosf(angle) * t.scale, sin = sinf(angle) * t.scale;
  uint16_t* v = x + rh * head_dim;
  const float a = Load(v, f), b = Load(v, f + half);
  Store(v, f, a * cos - b * sin);
  Store(v, f + half, b * cos + a * sin);
}

__device__ __forceinline__ uint16_t* KvAt(const PagedKv& kv, int64_t r, int64_t pos, bool value) {
  const uint32_t page = kv.pages[kv.row_first_page[r] + pos / kv.positions_per_page];
  const int64_t slot = pos % kv.positions_per_page;
  const uint64_t plane = uint64_t(kv.positions_per_page) * kv.kv_heads * kv.head_dim * 2;
  const uint64_t offset =
      2 * plane * kv.layer + uint64_t(slot) * kv.kv_heads * kv.head_dim * 2 + (value ? plane : 0);
  return reinterpret_cast<uint16_t*>(kv.pool + uint64_t{page} * kv.page_bytes + offset);
}

// One thread per (row, element of its keys).
__global__ void WriteKvKernel(const uint16_t* k, const uint16_t* v, int64_t rows, PagedKv kv) {
  const int64_t row = kv.kv_heads * kv.head_dim;
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= rows * row) return;
  const int64_t r = i / row, e = i % row;
  const int64_t pos = kv.row_position[r];
  KvAt(kv, r, pos, false)[e] = k[i];
  KvAt(kv, r, pos, true)[e] = v[i];
}

constexpr int kMaxHeadDim = 256;
constexpr int kWarps = kThreads / 32;

// A block per head: heads of q first (rows x heads), then of k (rows x kv_heads). The head goes
// through shared memory: its norm (rounded to BF16, as RmsNormKernel writes it), then RoPE as
// RopeKernel computes it, back in place; a head of k is then stored in its row's page, with the
// same head of v.
constexpr int kHeadThreads = 128;
__global__ void PrepareHeadsKernel(uint16_t* q, uint16_t* k, const uint16_t* v, int64_t heads,
                                   const uint16_t* q_norm, const uint16_t* k_norm, float eps,
                                   float offset, RopeTable t, PagedKv kv) {
  const int64_t d = kv.head_dim, half = t.rotary_dim / 2;
  const int64_t per_row = heads + kv.kv_heads;
  const int64_t r = blockIdx.x / per_row, h = blockIdx.x % per_row;
  const bool is_key = h >= heads;
  uint16_t* head = is_key ? k + (r * kv.kv_heads + (h - heads)) * d : q + (r * heads + h) * d;
  const uint16_t* norm = is_key ? k_norm : q_norm;
  __shared__ float value[kMaxHeadDim];
  __shared__ float partial[kHeadThreads / 32];
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) value[i] = Load(head, i);
  if (norm != nullptr) {
    float sum = 0;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) sum += value[i] * value[i];
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffff, sum, o);
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
    __syncthreads();
    float total = 0;
    for (int w = 0; w < kHeadThreads / 32; ++w) total += partial[w];
    const float scale = 1.0f / sqrtf(total / static_cast<float>(d) + eps);
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      value[i] = __bfloat162float(__float2bfloat16_rn(value[i] * scale * (offset + Load(norm, i))));
    }
  }
  __syncthreads();
  const int64_t pos = kv.row_position[r];
  const float* inverse = pos >= t.long_from ? t.long_inverse : t.inverse;
  for (int64_t f = threadIdx.x; f < half; f += blockDim.x) {
    const float angle = static_cast<float>(pos) * inverse[f];
    const float cos = cosf(angle) * t.scale, sin = sinf(angle) * t.scale;
    const float a = value[f], b = value[f + half];
    value[f] = __bfloat162float(__float2bfloat16_rn(a * cos - b * sin));
    value[f + half] = __bfloat162float(__float2bfloat16_rn(b * cos + a * sin));
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) Store(head, i, value[i]);
  if (!is_key) return;
  const int64_t kvh = h - heads;
  uint16_t* key = KvAt(kv, r, pos, false) + kvh * d;
  uint16_t* val = KvAt(kv, r, pos, true) + kvh * d;
  const uint16_t* v_head = v + (r * kv.kv_heads + kvh) * d;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    Store(key, i, value[i]);
    val[i] = v_head[i];
  }
}

// One block per (row, query head); each warp takes every kWarps-th position and keeps an online
// softmax (running max m, sum l, and the weighted values, head_dim / 32 per lane); the warps'
// states are merged at the end.
__global__ void AttentionKernel(const uint16_t* q, AttentionShape s, PagedKv kv, uint16_t* out) {
  const int64_t r = blockIdx.x / s.heads, h = blockIdx.x % s.heads;
  const int64_t d = s.head_dim, kvh = h / (s.heads / s.kv_heads);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int per_lane = static_cast<int>((d + 31) / 32);
  const int64_t pos = kv.row_position[r];
  const int64_t first = s.window > 0 ? max(int64_t{0}, pos - s.window + 1) : 0;
  float qv[kMaxHeadDim / 32], acc[kMaxHeadDim / 32];
  const uint16_t* qh = q + (r * s.heads + h) * d;
  for (int e = 0; e < per_lane; ++e) {
    const int64_t i = lane + 32 * e;
    qv[e] = i < d ? Load(qh, i) : 0.0f;
    acc[e] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int64_t j = first + warp; j <= pos; j += kWarps) {
    const uint16_t* k = KvAt(kv, r, j, false) + kvh * d;
    float dot = 0;
    for (int e = 0; e < per_lane; ++e) {
      const int64_t i = lane + 32 * e;
      if (i < d) dot += qv[e] * Load(k, i);
    }
    for (int o = 16; o > 0; o /= 2) dot += __shfl_xor_sync(0xffffffff, dot, o);
    float score = dot * s.scale;
    if (s.softcap > 0) score = tanhf(score / s.softcap) * s.softcap;
    const float m_new = fmaxf(m, score);
    const float correction = expf(m - m_new), p = expf(score - m_new);
    l = l * correction + p;
    const uint16_t* v = KvAt(kv, r, j, true) + kvh * d;
    for (int e = 0; e < per_lane; ++e) {
      const int64_t i = lane + 32 * e;
      acc[e] = acc[e] * correction + (i < d ? p * Load(v, i) : 0.0f);
    }
    m = m_new;
  }
  __shared__ float warp_m[kWarps], warp_l[kWarps];
  __shared__ float warp_acc[kWarps][kMaxHeadDim];
  if (lane == 0) {
    warp_m[warp] = m;
    warp_l[warp] = l;
  }
  for (int e = 0; e < per_lane; ++e) {
    const int64_t i = lane + 32 * e;
    if (i < d) warp_acc[warp][i] = acc[e];
  }
  __syncthreads();
  float m_all = -INFINITY;
  for (int w = 0; w < kWarps; ++w) m_all = fmaxf(m_all, warp_m[w]);
  float l_all = 0;
  for (int w = 0; w < kWarps; ++w) {
    if (warp_l[w] > 0) l_all += warp_l[w] * expf(warp_m[w] - m_all);
  }
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    float sum = 0;
    for (int w = 0; w < kWarps; ++w) {
      if (warp_l[w] > 0) sum += warp_acc[w][i] * expf(warp_m[w] - m_all);
    }
    Store(out, (r * s.heads + h) * d + i, sum / l_all);
  }
}

__global__ void GatedActivationKernel(const uint16_t* gate, const uint16_t* up, int64_t n,
                                      bool gelu_tanh, uint16_t* y) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  const float g = Load(gate, i);
  float a;
  if (gelu_tanh) {
    constexpr float kBeta = 0.7978845608028654f;  // sqrt(2 / pi)
    a = 0.5f * g * (1.0f + tanhf(kBeta * (g + 0.044715f * g * g * g)));
  } else {
    a = g / (1.0f + expf(-g));
  }
  Store(y, i, a * Load(up, i));
}

__global__ void AddKernel(float* x, const float* y, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) x[i] += y[i];
}

__global__ void WidenKernel(const uint16_t* in, int64_t n, float scale, float* out) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) out[i] = Load(in, i) * scale;
}

__global__ void SoftCapKernel(float* x, int64_t n, float cap) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) x[i] = tanhf(x[i] / cap) * cap;
}

// One block per row, in 2-byte words.
__global__ void GatherRowsKernel(const char* base, const uint64_t* offsets, int64_t words,
                                 uint16_t* out) {
  const auto* row = reinterpret_cast<const uint16_t*>(base + offsets[blockIdx.x]);
  uint16_t* to = out + blockIdx.x * words;
  for (int64_t i = threadIdx.x; i < words; i += blockDim.x) to[i] = row[i];
}

__global__ void SplitColumnsKernel(const uint16_t* in, int64_t rows, int64_t in_width,
                                   int64_t first, int64_t width, uint16_t* out) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < rows * width) out[i] = in[(i / width) * in_width + first + i % width];
}

}  // namespace
}  // namespace df11::runtime::cuda

#endif  // DF11_DAEMON_RUNTIME_BACKENDS_CUDA_DEVICE_FORWARD_KERNELS_CUH_
