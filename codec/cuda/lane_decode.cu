// The GPU decoder of the lane-stream layout: the kernel, its host API and the device unit
// (codec/gpu_lane.h). The per-lane steps are codec/cuda/lane_steps.h.
#include <cuda_runtime_api.h>

#include <algorithm>

#include "codec/base/align.h"
#include "codec/base/status_macros.h"
#include "codec/cuda/cuda_status.h"
#include "codec/cuda/launch_items.cuh"
#include "codec/gpu_lane.h"

namespace df11::codec::gpu {
namespace {

constexpr int kThreads = 256;  // 8 warps, one segment each
constexpr int kWarpsPerCta = kThreads / kLaneWarp;
constexpr unsigned kFullWarp = 0xFFFFFFFFu;

// The views of a launch, by value: nothing to copy before the launch.
struct LaneLaunch {
  LaneView views[kMaxLaneViews];
  uint32_t first_segment[kMaxLaneViews + 1];  // launch-wide number of each view's first segment
  uint32_t n_views;
};

// One warp per segment. The view's table goes to the warp's own part of shared memory (a CTA's
// warps may decode segments of different views); each lane then decodes its 8 weights of every
// group, the next group's sign/mantissa bytes loaded while it decodes this one's.
__global__ void __launch_bounds__(kThreads) decode_lanes_kernel(const __grid_constant__ LaneLaunch
                                                                    launch,
                                                                uint32_t* error) {
  __shared__ uint32_t tables[kWarpsPerCta][kLaneTableEntries];
  const int warp = threadIdx.x / kLaneWarp, lane = threadIdx.x % kLaneWarp;
  const uint32_t g_launch = blockIdx.x * kWarpsPerCta + warp;
  if (g_launch >= launch.first_segment[launch.n_views]) return;
  const uint32_t v = ViewOfItem(launch.first_segment, launch.n_views, g_launch);
  const LaneView& view = launch.views[v];
  uint32_t* table = tables[warp];
  for (int i = lane; i < kLaneTableEntries; i += kLaneWarp) table[i] = __ldg(view.table + i);
  __syncwarp();
  const uint32_t g = view.first_segment + (g_launch - launch.first_segment[v]);
  const uint32_t start = __ldg(view.segment_words + g), end = __ldg(view.segment_words + g + 1);
  if (!LaneSegmentSound(start, end)) {  // uniform across the warp
    if (lane == 0) atomicOr(error, 1u);
    return;
  }
  const uint32_t* segment = view.words + start;
  const uint32_t n_rows = (end - start) / kLaneWarp;
  LaneState s;
  LaneStart(s, segment, n_rows, lane);
  const uint64_t first = uint64_t{g} * kLaneSegment + uint64_t(lane) * kLaneWeights;
  const auto* sm = reinterpret_cast<const uint2*>(view.sign_mantissa + first);
  uint16_t* out = view.out == nullptr
                      ? nullptr
                      : view.out + (first - uint64_t{view.first_segment} * kLaneSegment);
  uint2 c = __ldg(sm);
#pragma unroll 2
  for (int j = 0; j < kLaneGroups; ++j) {
    const uint2 next = __ldg(sm + (j + 1) * (kLaneGroup / kLaneWeights));
    uint32_t pairs[4];
    LaneGroup(s, table, segment, n_rows, lane, c.x, c.y, pairs);
    c = next;
    if (out == nullptr) continue;
    const uint64_t at = first + uint64_t(j) * kLaneGroup;
    uint16_t* to = out + uint64_t(j) * kLaneGroup;
    if (at + kLaneWeights <= view.n_elements) {
      *reinterpret_cast<uint4*>(to) = make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]);
    } else {
      for (int i = 0; i < kLaneWeights; ++i) {
        if (at + i < view.n_elements) to[i] = static_cast<uint16_t>(pairs[i / 2] >> (16 * (i % 2)));
      }
    }
  }
  const uint32_t longest = __reduce_max_sync(kFullWarp, s.consumed);
  const bool ok = LaneFits(s, n_rows) && LaneRowsTight(longest, n_rows);
  if (__any_sync(kFullWarp, !ok) && lane == 0) atomicOr(error, 1u);
}

constexpr size_t kErrorOffset = 0;  // where CheckDecoded reads it

}  // namespace

absl::Status DecodeLanes(std::span<const LaneView> views, void* workspace, size_t workspace_bytes,
                         StreamRef stream_ref) {
  const auto stream = static_cast<cudaStream_t>(stream_ref);
  DF11_RETURN_IF_ERROR(CheckLaneDecodeLaunch(views, workspace_bytes));
  LaneLaunch launch{};
  uint64_t total = 0;
  for (size_t i = 0; i < views.size(); ++i) {
    launch.views[i] = views[i];
    launch.first_segment[i] = static_cast<uint32_t>(total);
    total += views[i].n_segments;
  }
  launch.first_segment[views.size()] = static_cast<uint32_t>(total);
  launch.n_views = static_cast<uint32_t>(views.size());
  auto* error = reinterpret_cast<uint32_t*>(static_cast<char*>(workspace) + kErrorOffset);
  DF11_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(error, 0, sizeof(uint32_t), stream));
  if (total == 0) return absl::OkStatus();
  const uint64_t grid = (total + kWarpsPerCta - 1) / kWarpsPerCta;
  decode_lanes_kernel<<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(launch, error);
  DF11_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

absl::StatusOr<DeviceLaneUnit> DeviceLaneUnit::Upload(const LaneUnit& unit) {
  DeviceLaneUnit d;
  d.elements_ = unit.num_elements();
  d.n_segments_ = unit.num_segments();
  uint64_t at = 0;
  auto place = [&at](uint64_t bytes) {
    const uint64_t here = at;
    at += base::AlignUp(bytes, 256);
    return here;
  };
  d.words_at_ = place(unit.words().size() * sizeof(uint32_t));
  d.index_at_ = place(unit.segment_words().size() * sizeof(uint32_t));
  d.table_at_ = place(unit.table().size() * sizeof(uint32_t));
  d.sign_mantissa_at_ = place(unit.sign_mantissa().size());
  DF11_ASSIGN_OR_RETURN(d.buffer_, DeviceBuffer::Allocate(std::max<uint64_t>(at, 256)));
  auto* base = static_cast<char*>(d.buffer_.data());
  auto copy = [base](uint64_t to, const void* src, size_t bytes) {
    return cuda::CudaStatus(cudaMemcpy(base + to, src, bytes, cudaMemcpyHostToDevice),
                            "cudaMemcpy");
  };
  DF11_RETURN_IF_ERROR(copy(d.words_at_, unit.words().data(), unit.words().size() * 4));
  DF11_RETURN_IF_ERROR(
      copy(d.index_at_, unit.segment_words().data(), unit.segment_words().size() * 4));
  DF11_RETURN_IF_ERROR(copy(d.table_at_, unit.table().data(), unit.table().size() * 4));
  DF11_RETURN_IF_ERROR(
      copy(d.sign_mantissa_at_, unit.sign_mantissa().data(), unit.sign_mantissa().size()));
  return d;
}

LaneView DeviceLaneUnit::view(uint16_t* out) const {
  const auto* base = static_cast<const char*>(buffer_.data());
  return {.words = reinterpret_cast<const uint32_t*>(base + words_at_),
          .segment_words = reinterpret_cast<const uint32_t*>(base + index_at_),
          .sign_mantissa = reinterpret_cast<const uint8_t*>(base + sign_mantissa_at_),
          .table = reinterpret_cast<const uint32_t*>(base + table_at_),
          .out = out,
          .n_elements = elements_,
          .first_segment = 0,
          .n_segments = n_segments_};
}

}  // namespace df11::codec::gpu
