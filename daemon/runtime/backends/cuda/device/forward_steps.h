// The per-thread steps of the forward pass's kernels (forward_kernels.cuh), written once for the
// kernels and for the host harness that runs them thread by thread in the kernels' launch shapes
// (tests/runtime/emulated_forward_ops.cc, the operations of the tests' emulated device). Plain
// C++ without CUDA; __host__ __device__ under nvcc.
//
// A kernel is its steps with what joins them: the barriers between a block's steps, and the sums
// across a warp's lanes (WarpSum: a butterfly of shuffles by 16, 8, 4, 2, 1, after which every
// lane holds the same sum) and across a block (BlockSum: each warp's butterfly, then the warps'
// sums in warp order through a second butterfly). The harness joins the same steps in the same
// order and writes those two sums out lane by lane, so its results differ from a GPU's only where
// nvcc contracts a multiply and an add into one FMA (the host build does not) and where the
// device's expf, tanhf, cosf and sinf round differently from the host's.
#ifndef DF11_DAEMON_RUNTIME_BACKENDS_CUDA_DEVICE_FORWARD_STEPS_H_
#define DF11_DAEMON_RUNTIME_BACKENDS_CUDA_DEVICE_FORWARD_STEPS_H_

#include <math.h>

#include <cstdint>

#include "codec/lut_walk.h"  // DF11_HOST_DEVICE, BitsFloat
#include "daemon/runtime/backends/cuda/forward_ops.h"
#if !defined(__CUDA_ARCH__)
#include "codec/format.h"
#endif

namespace df11::runtime::cuda {

inline constexpr int kThreads = 256;  // a block's threads, unless said otherwise
inline constexpr int kWarp = 32;
inline constexpr int kWarps = kThreads / kWarp;
inline constexpr int kHeadThreads = 128;  // PrepareHeadsKernel's block
inline constexpr int kHeadWarps = kHeadThreads / kWarp;
inline constexpr int kHeadValuesPerLane = kMaxHeadDim / kWarp;

// ---------------------------------------------------------------------------------------------
// Values: BF16 widened exactly, fp32 rounded to the nearest BF16 (ties to even).

DF11_HOST_DEVICE float Bf16Value(uint16_t b) { return codec::gpu::BitsFloat(uint32_t{b} << 16); }
DF11_HOST_DEVICE uint16_t RoundToBf16(float f) {
#if defined(__CUDA_ARCH__)
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
#else
  return format::FloatToBf16(f);
#endif
}
DF11_HOST_DEVICE float RoundedToBf16(float f) { return Bf16Value(RoundToBf16(f)); }

DF11_HOST_DEVICE float LoadValue(const uint16_t* p, int64_t i) { return Bf16Value(p[i]); }
DF11_HOST_DEVICE float LoadValue(const float* p, int64_t i) { return p[i]; }
DF11_HOST_DEVICE void StoreValue(uint16_t* p, int64_t i, float v) { p[i] = RoundToBf16(v); }
DF11_HOST_DEVICE void StoreValue(float* p, int64_t i, float v) { p[i] = v; }

// ---------------------------------------------------------------------------------------------
// One thread per element: `i` is the thread's index in the grid, below the operation's count.

// y[i] = bias[i % out]: the bias rows a product then adds onto (beta 1).
template <typename Out>
DF11_HOST_DEVICE void BroadcastBiasStep(const uint16_t* bias, int64_t out, Out* y, int64_t i) {
  StoreValue(y, i, LoadValue(bias, i % out));
}

DF11_HOST_DEVICE void GatedActivationStep(const uint16_t* gate, const uint16_t* up, bool gelu_tanh,
                                          uint16_t* y, int64_t i) {
  const float g = LoadValue(gate, i);
  float a;
  if (gelu_tanh) {
    constexpr float kBeta = 0.7978845608028654f;  // sqrt(2 / pi)
    a = 0.5f * g * (1.0f + tanhf(kBeta * (g + 0.044715f * g * g * g)));
  } else {
    a = g / (1.0f + expf(-g));
  }
  StoreValue(y, i, a * LoadValue(up, i));
}

DF11_HOST_DEVICE void AddStep(float* x, const float* y, int64_t i) { x[i] += y[i]; }
DF11_HOST_DEVICE void WidenStep(const uint16_t* in, float scale, float* out, int64_t i) {
  out[i] = LoadValue(in, i) * scale;
}
DF11_HOST_DEVICE void SoftCapStep(float* x, float cap, int64_t i) {
  x[i] = tanhf(x[i] / cap) * cap;
}

// Element i of out[rows][width] from columns [first, first + width) of in[rows][in_width].
DF11_HOST_DEVICE void SplitColumnsStep(const uint16_t* in, int64_t in_width, int64_t first,
                                       int64_t width, uint16_t* out, int64_t i) {
  out[i] = in[(i / width) * in_width + first + i % width];
}

// The angle of frequency f at position pos, as cos and sin scaled by the table's factor.
DF11_HOST_DEVICE void RopeCosSin(const RopeTable& t, int64_t pos, int64_t f, float& cos,
                                 float& sin) {
  const float inverse = pos >= t.long_from ? t.long_inverse[f] : t.inverse[f];
  const float angle = static_cast<float>(pos) * inverse;
  cos = cosf(angle) * t.scale;
  sin = sinf(angle) * t.scale;
}

// Thread i of rows x heads x rotary_dim / 2 rotates one pair (f, f + rotary_dim / 2) of a head.
DF11_HOST_DEVICE void RopeStep(uint16_t* x, int64_t heads, int64_t head_dim,
                               const int32_t* row_position, const RopeTable& t, int64_t i) {
  const int64_t half = t.rotary_dim / 2;
  const int64_t f = i % half, row_head = i / half, r = row_head / heads;
  float cos, sin;
  RopeCosSin(t, row_position[r], f, cos, sin);
  uint16_t* v = x + row_head * head_dim;
  const float a = LoadValue(v, f), b = LoadValue(v, f + half);
  StoreValue(v, f, a * cos - b * sin);
  StoreValue(v, f + half, b * cos + a * sin);
}

// Position `pos` of row r's sequence in this layer's keys (its values when `value`).
DF11_HOST_DEVICE uint16_t* KvAt(const PagedKv& kv, int64_t r, int64_t pos, bool value) {
  const uint32_t page = kv.pages[kv.row_first_page[r] + pos / kv.positions_per_page];
  const int64_t slot = pos % kv.positions_per_page;
  const uint64_t offset = value ? kv.ValueOffset(slot) : kv.KeyOffset(slot);
  return reinterpret_cast<uint16_t*>(kv.pool + uint64_t{page} * kv.page_bytes + offset);
}

// Thread i of rows x kv_heads x head_dim stores one key and one value at its row's position.
DF11_HOST_DEVICE void WriteKvStep(const uint16_t* k, const uint16_t* v, const PagedKv& kv,
                                  int64_t i) {
  const int64_t per_row = kv.kv_heads * kv.head_dim;
  const int64_t r = i / per_row, e = i % per_row;
  const int64_t pos = kv.row_position[r];
  KvAt(kv, r, pos, false)[e] = k[i];
  KvAt(kv, r, pos, true)[e] = v[i];
}

// ---------------------------------------------------------------------------------------------
// One block per row: thread t of `threads` takes elements t, t + threads, ...

// Row `row` of out (words 2-byte words) from the bytes at base + offsets[row].
DF11_HOST_DEVICE void GatherRowStep(const char* base, const uint64_t* offsets, int64_t words,
                                    uint16_t* out, int64_t row, int t, int threads) {
  const auto* from = reinterpret_cast<const uint16_t*>(base + offsets[row]);
  uint16_t* to = out + row * words;
  for (int64_t i = t; i < words; i += threads) to[i] = from[i];
}

// RMSNorm of a row: each thread's sum of squares (RmsSquares, or AddSquares, which first adds
// `add` into the fp32 row and stores the sum), the block's sum, its scale (RmsScale), then each
// thread's elements scaled (RmsStore; a thread reads back only elements it wrote itself).
template <typename In>
DF11_HOST_DEVICE float RmsSquares(const In* row, int64_t n, int t, int threads) {
  float sum = 0;
  for (int64_t i = t; i < n; i += threads) {
    const float v = LoadValue(row, i);
    sum += v * v;
  }
  return sum;
}
DF11_HOST_DEVICE float AddSquares(float* row, const float* add, int64_t n, int t, int threads) {
  float sum = 0;
  for (int64_t i = t; i < n; i += threads) {
    const float v = row[i] + add[i];
    row[i] = v;
    sum += v * v;
  }
  return sum;
}
DF11_HOST_DEVICE float RmsScale(float sum_of_squares, int64_t n, float eps) {
  return 1.0f / sqrtf(sum_of_squares / static_cast<float>(n) + eps);
}
template <typename In, typename Out>
DF11_HOST_DEVICE void RmsStore(const In* row, const uint16_t* w, int64_t n, float scale,
                               float offset, Out* out, int t, int threads) {
  for (int64_t i = t; i < n; i += threads) {
    StoreValue(out, i, LoadValue(row, i) * scale * (offset + LoadValue(w, i)));
  }
}

// ---------------------------------------------------------------------------------------------
// PrepareHeadsKernel: one block of kHeadThreads per head, heads of q first (rows x heads), then
// those of k (rows x kv_heads). The head goes through shared memory (`value`): loaded (HeadLoad);
// normalised when it has a norm (RmsSquares, each warp's WarpSum into partial[warp], a barrier,
// HeadTotal, RmsScale, HeadNormalize: rounded to BF16, as RmsNorm stores it); a barrier; rotated
// (HeadRotate, rounded as Rope stores); a barrier; stored back (HeadStore), and, for a head of k,
// stored with the same head of v in its row's page.

struct HeadOfBlock {
  int64_t row;
  int64_t kv_head;  // the head of k this block holds; -1 for a head of q
  uint16_t* head;
  const uint16_t* norm;  // nullptr: none
};
DF11_HOST_DEVICE HeadOfBlock HeadOf(uint16_t* q, uint16_t* k, int64_t heads, int64_t kv_heads,
                                    int64_t head_dim, const uint16_t* q_norm,
                                    const uint16_t* k_norm, int64_t block) {
  const int64_t per_row = heads + kv_heads;
  const int64_t r = block / per_row, h = block % per_row;
  if (h < heads) return {r, -1, q + (r * heads + h) * head_dim, q_norm};
  return {r, h - heads, k + (r * kv_heads + (h - heads)) * head_dim, k_norm};
}
DF11_HOST_DEVICE void HeadLoad(const uint16_t* head, int64_t d, float* value, int t, int threads) {
  for (int64_t i = t; i < d; i += threads) value[i] = LoadValue(head, i);
}
DF11_HOST_DEVICE float HeadTotal(const float (&partial)[kHeadWarps]) {
  float total = 0;
  for (int w = 0; w < kHeadWarps; ++w) total += partial[w];
  return total;
}
DF11_HOST_DEVICE void HeadNormalize(float* value, const uint16_t* norm, int64_t d, float scale,
                                    float offset, int t, int threads) {
  for (int64_t i = t; i < d; i += threads) {
    value[i] = RoundedToBf16(value[i] * scale * (offset + LoadValue(norm, i)));
  }
}
DF11_HOST_DEVICE void HeadRotate(float* value, const RopeTable& table, int64_t pos, int t,
                                 int threads) {
  const int64_t half = table.rotary_dim / 2;
  for (int64_t f = t; f < half; f += threads) {
    float cos, sin;
    RopeCosSin(table, pos, f, cos, sin);
    const float a = value[f], b = value[f + half];
    value[f] = RoundedToBf16(a * cos - b * sin);
    value[f + half] = RoundedToBf16(b * cos + a * sin);
  }
}
DF11_HOST_DEVICE void HeadStore(const HeadOfBlock& h, const float* value, const uint16_t* v,
                                const PagedKv& kv, int t, int threads) {
  const int64_t d = kv.head_dim;
  for (int64_t i = t; i < d; i += threads) StoreValue(h.head, i, value[i]);
  if (h.kv_head < 0) return;
  const int64_t pos = kv.row_position[h.row];
  uint16_t* key = KvAt(kv, h.row, pos, false) + h.kv_head * d;
  uint16_t* val = KvAt(kv, h.row, pos, true) + h.kv_head * d;
  const uint16_t* v_head = v + (h.row * kv.kv_heads + h.kv_head) * d;
  for (int64_t i = t; i < d; i += threads) {
    StoreValue(key, i, value[i]);
    val[i] = v_head[i];
  }
}

// ---------------------------------------------------------------------------------------------
// AttentionKernel: one block of kThreads per (row, query head). Warp w takes positions first + w,
// first + w + kWarps, ... up to the row's own; for each, every lane's part of q·k
// (AttentionDotPart over elements lane, lane + 32, ...), the warp's WarpSum, then the lane's
// online softmax update (AttentionAccumulate: running max m, sum l and weighted values). The
// warps publish their states (AttentionPublish) into shared memory; after a barrier, thread t
// writes elements t, t + kThreads, ... of the output, each the warps' states merged in warp
// order (AttentionMerged).

struct AttentionOfBlock {
  int64_t row, head, kv_head;
  int64_t first, last;  // the positions attended: [first, last]
};
DF11_HOST_DEVICE AttentionOfBlock AttentionOf(const AttentionShape& s, const PagedKv& kv,
                                              int64_t block) {
  const int64_t r = block / s.heads, h = block % s.heads;
  const int64_t pos = kv.row_position[r];
  const int64_t first = s.window > 0 && pos - s.window + 1 > 0 ? pos - s.window + 1 : 0;
  return {r, h, h / (s.heads / s.kv_heads), first, pos};
}

struct AttentionLane {
  float q[kHeadValuesPerLane];    // the lane's elements of q: lane, lane + 32, ...
  float acc[kHeadValuesPerLane];  // the weighted values, at the same elements
  float m;                        // the largest score so far
  float l;                        // the sum of exp(score - m)
};
DF11_HOST_DEVICE void AttentionStart(const uint16_t* q, const AttentionShape& s,
                                     const AttentionOfBlock& b, int lane, AttentionLane& a) {
  const uint16_t* qh = q + (b.row * s.heads + b.head) * s.head_dim;
  for (int e = 0; e < kHeadValuesPerLane; ++e) {
    const int64_t i = lane + kWarp * e;
    a.q[e] = i < s.head_dim ? LoadValue(qh, i) : 0.0f;
    a.acc[e] = 0.0f;
  }
  a.m = -INFINITY;
  a.l = 0.0f;
}
DF11_HOST_DEVICE float AttentionDotPart(const AttentionLane& a, const AttentionShape& s,
                                        const PagedKv& kv, const AttentionOfBlock& b, int64_t j,
                                        int lane) {
  const uint16_t* k = KvAt(kv, b.row, j, false) + b.kv_head * s.head_dim;
  float dot = 0;
  for (int e = 0; e < kHeadValuesPerLane; ++e) {
    const int64_t i = lane + kWarp * e;
    if (i < s.head_dim) dot += a.q[e] * LoadValue(k, i);
  }
  return dot;
}
// `dot`: the warp's sum of its lanes' parts for position j.
DF11_HOST_DEVICE void AttentionAccumulate(AttentionLane& a, float dot, const AttentionShape& s,
                                          const PagedKv& kv, const AttentionOfBlock& b, int64_t j,
                                          int lane) {
  float score = dot * s.scale;
  if (s.softcap > 0) score = tanhf(score / s.softcap) * s.softcap;
  const float m = fmaxf(a.m, score);
  const float correction = expf(a.m - m), p = expf(score - m);
  a.l = a.l * correction + p;
  const uint16_t* v = KvAt(kv, b.row, j, true) + b.kv_head * s.head_dim;
  for (int e = 0; e < kHeadValuesPerLane; ++e) {
    const int64_t i = lane + kWarp * e;
    a.acc[e] = a.acc[e] * correction + (i < s.head_dim ? p * LoadValue(v, i) : 0.0f);
  }
  a.m = m;
}

// What the warps leave in shared memory for the merge.
struct AttentionWarps {
  float m[kWarps];
  float l[kWarps];
  float acc[kWarps][kMaxHeadDim];
};
DF11_HOST_DEVICE void AttentionPublish(const AttentionLane& a, int64_t head_dim, int warp, int lane,
                                       AttentionWarps& w) {
  if (lane == 0) {
    w.m[warp] = a.m;
    w.l[warp] = a.l;
  }
  for (int e = 0; e < kHeadValuesPerLane; ++e) {
    const int64_t i = lane + kWarp * e;
    if (i < head_dim) w.acc[warp][i] = a.acc[e];
  }
}
// Element i of the head's output: the warps' sums rescaled to the largest max; a warp that saw
// no position (l = 0) adds nothing.
DF11_HOST_DEVICE float AttentionMerged(const AttentionWarps& w, int64_t i) {
  float m = -INFINITY;
  for (int k = 0; k < kWarps; ++k) m = fmaxf(m, w.m[k]);
  float l = 0, sum = 0;
  for (int k = 0; k < kWarps; ++k) {
    if (w.l[k] > 0) {
      const float scale = expf(w.m[k] - m);
      l += w.l[k] * scale;
      sum += w.acc[k][i] * scale;
    }
  }
  return sum / l;
}

}  // namespace df11::runtime::cuda

#endif  // DF11_DAEMON_RUNTIME_BACKENDS_CUDA_DEVICE_FORWARD_STEPS_H_
