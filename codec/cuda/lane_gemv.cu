// The fused decode + product on the lane-stream layout (codec/gpu_lane.h, LaneGemv): the row
// pieces' kernel and the kernel that sums them. The per-lane steps are codec/cuda/lane_steps.h;
// MultiplyLaneProducts (codec/lane_unit.h) runs them on the host.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "codec/base/status_macros.h"
#include "codec/cuda/cuda_status.h"
#include "codec/cuda/launch_items.cuh"
#include "codec/gpu_lane.h"

namespace df11::codec::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerCta = kThreads / kLaneWarp;
constexpr unsigned kFullWarp = 0xFFFFFFFFu;
constexpr size_t kErrorOffset = 0;  // where CheckDecoded reads it

struct GemvLaunch {
  LaneProduct products[kMaxLaneProducts];
  uint64_t pieces_at[kMaxLaneProducts];  // floats from the workspace's pieces
  uint32_t first_segment[kMaxLaneProducts + 1];  // launch-wide number of each one's first segment
  uint32_t n_products;
  const uint16_t* x;
  int columns;
};

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = kLaneWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(kFullWarp, v, o);
  return v;
}

// One warp per segment of one product: decode every group (the stream runs through all of
// them); the groups inside the matrix multiply into the lanes' accumulators, a row run's sum goes
// to its piece when the row changes and at the segment's end.
__global__ void __launch_bounds__(kThreads) lane_pieces_kernel(const __grid_constant__ GemvLaunch
                                                                   launch,
                                                               float* pieces, uint32_t* error) {
  __shared__ uint32_t tables[kWarpsPerCta][kLaneTableEntries];
  const int warp = threadIdx.x / kLaneWarp, lane = threadIdx.x % kLaneWarp;
  const uint32_t g_launch = blockIdx.x * kWarpsPerCta + warp;
  if (g_launch >= launch.first_segment[launch.n_products]) return;
  const uint32_t v = ViewOfItem(launch.first_segment, launch.n_products, g_launch);
  const LaneProduct& p = launch.products[v];
  uint32_t* table = tables[warp];
  for (int i = lane; i < kLaneTableEntries; i += kLaneWarp) table[i] = __ldg(p.unit.table + i);
  __syncwarp();
  const uint64_t g = LaneProductFirstSegment(p) + (g_launch - launch.first_segment[v]);
  const uint32_t start = __ldg(p.unit.segment_words + g), end = __ldg(p.unit.segment_words + g + 1);
  if (!LaneSegmentSound(start, end)) {
    if (lane == 0) atomicOr(error, 1u);
    return;
  }
  const uint32_t* segment = p.unit.words + start;
  const uint32_t rows = (end - start) / kLaneWarp;
  const uint32_t per_row = LanePiecesPerRow(p.cols);
  const int columns = launch.columns;
  float* my_pieces = pieces + launch.pieces_at[v];
  const uint64_t matrix_end = p.first_element + uint64_t{p.rows} * p.cols;
  LaneState s;
  LaneStart(s, segment, rows, lane);
  float acc[kLaneMaxColumns];
#pragma unroll
  for (int c = 0; c < kLaneMaxColumns; ++c) acc[c] = 0;
  int64_t row = -1;
  auto flush = [&]() {
    const uint64_t k = g - LaneFirstSegmentOfRow(p.first_element, p.cols, row);
    float* to = my_pieces + (uint64_t(row) * per_row + k) * columns;
#pragma unroll
    for (int c = 0; c < kLaneMaxColumns; ++c) {
      if (c < columns) {
        const float sum = WarpSum(acc[c]);
        if (lane == 0) to[c] = sum;
      }
      acc[c] = 0;
    }
  };
  const auto* sm = reinterpret_cast<const uint2*>(p.unit.sign_mantissa + g * kLaneSegment) + lane;
  uint2 c2 = __ldg(sm);
  for (int j = 0; j < kLaneGroups; ++j) {
    const uint2 next = __ldg(sm + (j + 1) * (kLaneGroup / kLaneWeights));
    const uint64_t e0 = g * kLaneSegment + uint64_t(j) * kLaneGroup;
    const bool inside = e0 >= p.first_element && e0 < matrix_end;  // uniform across the warp
    const int64_t group_row = inside ? int64_t((e0 - p.first_element) / p.cols) : -1;
    if (group_row != row && row >= 0) flush();
    uint32_t pairs[4];
    LaneGroup(s, table, segment, rows, lane, c2.x, c2.y, pairs);
    c2 = next;
    if (inside) {
      const uint32_t col =
          static_cast<uint32_t>((e0 - p.first_element) % p.cols) + uint32_t(lane) * kLaneWeights;
      LaneMultiply(pairs, launch.x, p.cols, col, columns, acc);
    }
    row = group_row;
  }
  if (row >= 0) flush();
  const uint32_t longest = __reduce_max_sync(kFullWarp, s.consumed);
  const bool ok = LaneFits(s, rows) && LaneRowsTight(longest, rows);
  if (__any_sync(kFullWarp, !ok) && lane == 0) atomicOr(error, 1u);
}

// One thread per (row, column) of one product (blockIdx.y): its pieces in segment order, plus
// the bias, into y.
template <typename Out>
__global__ void lane_sum_kernel(const __grid_constant__ GemvLaunch launch, const float* pieces) {
  const LaneProduct& p = launch.products[blockIdx.y];
  const int columns = launch.columns;
  const uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x;
  if (i >= uint64_t{p.rows} * columns) return;
  const uint32_t t = static_cast<uint32_t>(i % p.rows), c = static_cast<uint32_t>(i / p.rows);
  const uint32_t per_row = LanePiecesPerRow(p.cols);
  const uint64_t s0 = LaneFirstSegmentOfRow(p.first_element, p.cols, t);
  const uint64_t s1 = LaneLastSegmentOfRow(p.first_element, p.cols, t);
  const float bias = p.bias == nullptr ? 0.0f : BitsFloat(uint32_t{p.bias[t]} << 16);
  const float y = LaneSumPieces(pieces + launch.pieces_at[blockIdx.y] +
                                    (uint64_t{t} * per_row) * columns + c,
                                static_cast<uint32_t>(s1 - s0 + 1), columns, bias);
  if constexpr (sizeof(Out) == 4) {
    static_cast<float*>(p.y)[uint64_t{c} * p.rows + t] = y;
  } else {
    static_cast<uint16_t*>(p.y)[uint64_t{c} * p.rows + t] =
        __bfloat16_as_ushort(__float2bfloat16_rn(y));
  }
}

}  // namespace

absl::Status LaneGemv(std::span<const LaneProduct> products, const uint16_t* x, int columns,
                      bool y_fp32, void* workspace, size_t workspace_bytes, StreamRef stream_ref,
                      bool keep_error) {
  const auto stream = static_cast<cudaStream_t>(stream_ref);
  DF11_RETURN_IF_ERROR(CheckLaneProducts(products, columns));
  const std::string what = "LaneGemv";
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0) {
    return absl::InvalidArgumentError(what + ": x must be 16-byte aligned");
  }
  if (workspace_bytes < LaneGemvWorkspaceBytes(products, columns)) {
    return absl::InvalidArgumentError(what + ": a workspace of " +
                                      std::to_string(workspace_bytes) + " bytes; " +
                                      std::to_string(LaneGemvWorkspaceBytes(products, columns)) +
                                      " needed");
  }
  GemvLaunch launch{};
  uint64_t segments = 0, pieces = 0, most = 0;
  for (size_t i = 0; i < products.size(); ++i) {
    const LaneProduct& p = products[i];
    if (reinterpret_cast<uintptr_t>(p.unit.sign_mantissa) % 8 != 0 ||
        reinterpret_cast<uintptr_t>(p.y) % (y_fp32 ? 4 : 2) != 0) {
      return absl::InvalidArgumentError(what + ": product " + std::to_string(i) +
                                        " has misaligned sign/mantissa bytes or y");
    }
    launch.products[i] = p;
    launch.pieces_at[i] = pieces;
    launch.first_segment[i] = static_cast<uint32_t>(segments);
    segments += LaneProductSegments(p);
    pieces += LanePieceFloats(p, columns);
    most = std::max<uint64_t>(most, uint64_t{p.rows} * columns);
  }
  launch.first_segment[products.size()] = static_cast<uint32_t>(segments);
  launch.n_products = static_cast<uint32_t>(products.size());
  launch.x = x;
  launch.columns = columns;
  auto* base = static_cast<char*>(workspace);
  auto* error = reinterpret_cast<uint32_t*>(base + kErrorOffset);
  auto* piece_base = reinterpret_cast<float*>(base + kLanePiecesOffset);
  if (!keep_error) DF11_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(error, 0, sizeof(uint32_t), stream));
  const uint64_t grid = (segments + kWarpsPerCta - 1) / kWarpsPerCta;
  lane_pieces_kernel<<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(launch, piece_base,
                                                                           error);
  DF11_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  const dim3 sums(static_cast<unsigned>((most + kThreads - 1) / kThreads), launch.n_products);
  if (y_fp32) {
    lane_sum_kernel<float><<<sums, kThreads, 0, stream>>>(launch, piece_base);
  } else {
    lane_sum_kernel<uint16_t><<<sums, kThreads, 0, stream>>>(launch, piece_base);
  }
  DF11_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace df11::codec::gpu
