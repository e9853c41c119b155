// The GPU decoder of the lane-interleaved layout: the kernel, its host API and the device unit
// (codec/gpu_interleaved.h). The per-thread steps are codec/cuda/interleaved_steps.h.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "codec/base/align.h"
#include "codec/base/status_macros.h"
#include "codec/cuda/cuda_status.h"
#include "codec/cuda/launch_items.cuh"
#include "codec/gpu_interleaved.h"

namespace df11::codec::gpu {
namespace {

static_assert(kInterleavedLanes == InterleavedUnit::kLanes);
static_assert(kInterleavedPrefixBits == InterleavedUnit::kMaxCodeLength);

constexpr int kThreads = 256;  // 8 warps, one segment each at a time
constexpr unsigned kFullWarp = 0xFFFFFFFFu;

// Workspace: the error flag first (where CheckDecoded reads it), then the views.
constexpr size_t kErrorOffset = 0;
constexpr size_t kViewsOffset = 16;

// Thread t of a warp decodes its share of segment s of `v` (see interleaved_steps.h), with the
// unit's table in `table` (shared memory). `v` is a copy in registers: read through a pointer,
// its fields would be loaded again after every store to the output, which may alias them.
// Offsets inside the segment are 32-bit, to save registers.
__device__ __forceinline__ void DecodeSegment(const InterleavedView v, const uint16_t* table,
                                              uint32_t s, int t, uint32_t* error) {
  const InterleavedSegment seg = v.segments[s], next = v.segments[s + 1];
  // Every lane starts with two words; a segment must have them (uniform across the warp).
  if (next.first < seg.first || next.first - seg.first >= (uint64_t{1} << 31) ||
      next.word < seg.word + 2 * kInterleavedLanes || next.word - seg.word >= (uint64_t{1} << 32) ||
      next.escape < seg.escape || next.escape - seg.escape >= (uint64_t{1} << 32)) {
    if (t == 0) atomicOr(error, 1u);
    return;
  }
  const uint32_t count = static_cast<uint32_t>(next.first - seg.first);
  const uint32_t steps = (count + kInterleavedLanes - 1) / kInterleavedLanes;
  const uint16_t* words = v.words + seg.word;
  const uint8_t* escapes = v.escapes + seg.escape;
  const uint32_t n_words = static_cast<uint32_t>(next.word - seg.word);
  const uint32_t n_escapes = static_cast<uint32_t>(next.escape - seg.escape);
  const uint8_t* sm = v.sign_mantissa + seg.first;
  uint16_t* out = v.out == nullptr ? nullptr : v.out + (seg.first - v.segments[0].first);
  // Two values per thread in one 32-bit store and one 16-bit load where both are aligned.
  const bool paired = out != nullptr && (reinterpret_cast<uintptr_t>(out) & 3) == 0 &&
                      (reinterpret_cast<uintptr_t>(sm) & 1) == 0;
  // The sign/mantissa bytes of the thread's two elements of a step, loaded a step ahead so that
  // the store does not wait for them.
  auto load_sign_mantissa = [&](uint32_t step) -> uint32_t {
    const uint32_t j = step * kInterleavedLanes + 2 * t;
    if (paired && j + 1 < count) return __ldg(reinterpret_cast<const uint16_t*>(sm + j));
    uint32_t pair = 0;
    if (j < count) pair = __ldg(sm + j);
    if (j + 1 < count) pair |= uint32_t{__ldg(sm + j + 1)} << 8;
    return pair;
  };
  uint32_t next_pair = out != nullptr ? load_sign_mantissa(0) : 0;
  LaneBits lanes[2];
  StartLanes(lanes, words, 0, t);
  uint32_t word = 2 * kInterleavedLanes, escape = 0;
  bool ok = true;
  for (uint32_t step = 0; step < steps; ++step) {
    const uint32_t pair = next_pair;
    if (out != nullptr && step + 1 < steps) next_pair = load_sign_mantissa(step + 1);
    LaneCodes c = DecodeLanes(lanes, table);
    const uint32_t esc0 = __ballot_sync(kFullWarp, c.escaped[0]);
    const uint32_t esc1 = __ballot_sync(kFullWarp, c.escaped[1]);
    const uint32_t ask0 = __ballot_sync(kFullWarp, c.asks[0]);
    const uint32_t ask1 = __ballot_sync(kFullWarp, c.asks[1]);
    if ((esc0 | esc1) != 0) {  // rare on weights: escapes are the least frequent exponents
      const Ranks r = RankLanes(esc0, esc1, t);
      for (int k = 0; k < 2; ++k) {
        if (!c.escaped[k]) continue;
        const uint32_t at = escape + r.rank[k];
        if (at < n_escapes) {
          c.exponent[k] = __ldg(escapes + at);
        } else {
          ok = false;
        }
      }
      escape += r.total;
    }
    const Ranks r = RankLanes(ask0, ask1, t);
    for (int k = 0; k < 2; ++k) {
      if (c.asks[k]) ok &= AskWord(lanes[k], words, word + r.rank[k], n_words);
    }
    word += r.total;
    if (out == nullptr) continue;
    const uint32_t j = step * kInterleavedLanes + 2 * t;
    const uint32_t bf16_0 = JoinExponent(c.exponent[0], pair & 0xFF);
    const uint32_t bf16_1 = JoinExponent(c.exponent[1], pair >> 8);
    if (paired && j + 1 < count) {
      *reinterpret_cast<uint32_t*>(out + j) = bf16_0 | bf16_1 << 16;
    } else {
      if (j < count) out[j] = static_cast<uint16_t>(bf16_0);
      if (j + 1 < count) out[j + 1] = static_cast<uint16_t>(bf16_1);
    }
  }
  // The codes must end exactly where the next segment's words and escape bytes start.
  if (word != n_words || escape != n_escapes) ok = false;
  if (__any_sync(kFullWarp, !ok) && t == 0) atomicOr(error, 1u);
}

// kCtasPerSm CTAs resident per SM: the registers per thread are bounded to let them be.
template <int kCtasPerSm>
__global__ void __launch_bounds__(kThreads, kCtasPerSm)
    decode_interleaved_kernel(const InterleavedView* __restrict__ views, uint32_t n_views,
                              uint32_t* __restrict__ error) {
  __shared__ uint32_t first_segment[kMaxUnitsPerLaunch + 1];  // launch-wide segment of each view
  // Each warp's copy of the table of the unit it decodes (loaded again when the unit changes).
  __shared__ uint16_t tables[kThreads / 32][kInterleavedTableEntries];
  NumberItems(views, n_views, first_segment, [](const InterleavedView& v) { return v.n_segments; });
  __syncthreads();
  const uint32_t total = first_segment[n_views];
  const int t = threadIdx.x % 32;
  const uint32_t warps_per_cta = blockDim.x / 32;
  const uint32_t stride = gridDim.x * warps_per_cta;
  uint16_t* const table = tables[threadIdx.x / 32];
  uint32_t table_view = n_views;  // none yet
  for (uint32_t w = blockIdx.x * warps_per_cta + threadIdx.x / 32; w < total; w += stride) {
    const uint32_t lo = ViewOfItem(first_segment, n_views, w);
    const InterleavedView v = views[lo];
    if (lo != table_view) {  // uniform across the warp
      __syncwarp();
      for (int i = t; i < kInterleavedTableEntries; i += 32) table[i] = __ldg(v.table + i);
      __syncwarp();
      table_view = lo;
    }
    DecodeSegment(v, table, w - first_segment[lo], t, error);
  }
}

}  // namespace

size_t InterleavedWorkspaceBytes(size_t n_views) {
  return kViewsOffset + n_views * sizeof(InterleavedView);
}

absl::Status DecodeInterleaved(std::span<const InterleavedView> views, void* workspace,
                               size_t workspace_bytes, StreamRef stream_ref, int ctas_per_sm) {
  const auto stream = static_cast<cudaStream_t>(stream_ref);
  const size_t n = views.size();
  const std::string what = "DecodeInterleaved";
  if (ctas_per_sm == 0) ctas_per_sm = kDefaultInterleavedCtasPerSm;
  if (ctas_per_sm != 4 && ctas_per_sm != 6 && ctas_per_sm != 8) {
    return absl::InvalidArgumentError(what + ": " + std::to_string(ctas_per_sm) +
                                      " CTAs per SM; 4, 6 or 8");
  }
  if (n == 0) return absl::InvalidArgumentError(what + ": no views");
  if (n > kMaxUnitsPerLaunch) {
    return absl::InvalidArgumentError(what + ": " + std::to_string(n) +
                                      " views in one launch; at most " +
                                      std::to_string(kMaxUnitsPerLaunch));
  }
  if (workspace_bytes < InterleavedWorkspaceBytes(n)) {
    return absl::InvalidArgumentError(what + ": workspace of " + std::to_string(workspace_bytes) +
                                      " bytes; " + std::to_string(n) + " views need " +
                                      std::to_string(InterleavedWorkspaceBytes(n)));
  }
  uint64_t total = 0;
  for (const InterleavedView& v : views) total += v.n_segments;
  if (total >= (uint64_t{1} << 32)) {
    return absl::InvalidArgumentError(what + ": more than 2^32 segments in one launch");
  }
  auto* base = static_cast<char*>(workspace);
  DF11_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(base + kViewsOffset, views.data(),
                                            n * sizeof(InterleavedView), cudaMemcpyHostToDevice,
                                            stream));
  DF11_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(base + kErrorOffset, 0, sizeof(uint32_t), stream));
  if (total == 0) return absl::OkStatus();
  int device = 0, sms = 0;
  DF11_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  DF11_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const uint64_t warps_per_cta = kThreads / 32;
  const uint64_t grid =
      std::min<uint64_t>((total + warps_per_cta - 1) / warps_per_cta, uint64_t(sms) * ctas_per_sm);
  const auto* device_views = reinterpret_cast<const InterleavedView*>(base + kViewsOffset);
  auto* error = reinterpret_cast<uint32_t*>(base + kErrorOffset);
  const dim3 blocks(static_cast<unsigned>(grid));
  if (ctas_per_sm == 4) {
    decode_interleaved_kernel<4><<<blocks, kThreads, 0, stream>>>(device_views, n, error);
  } else if (ctas_per_sm == 6) {
    decode_interleaved_kernel<6><<<blocks, kThreads, 0, stream>>>(device_views, n, error);
  } else {
    decode_interleaved_kernel<8><<<blocks, kThreads, 0, stream>>>(device_views, n, error);
  }
  DF11_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

absl::StatusOr<DeviceInterleavedUnit> DeviceInterleavedUnit::Upload(const InterleavedUnit& unit) {
  const std::vector<InterleavedSegment> segments = unit.GpuSegments();
  const std::vector<uint16_t> table = unit.GpuTable();
  DeviceInterleavedUnit d;
  d.elements_ = unit.num_elements();
  d.n_segments_ = static_cast<uint32_t>(unit.num_segments());
  uint64_t at = 0;
  auto place = [&at](uint64_t bytes) {
    const uint64_t here = at;
    at += base::AlignUp(bytes, 256);
    return here;
  };
  d.segments_at_ = place(segments.size() * sizeof(InterleavedSegment));
  d.table_at_ = place(table.size() * sizeof(uint16_t));
  d.words_at_ = place(unit.words().size_bytes());
  d.escapes_at_ = place(unit.escapes().size_bytes());
  d.sign_mantissa_at_ = place(unit.sign_mantissa().size_bytes());
  DF11_ASSIGN_OR_RETURN(d.buffer_, DeviceBuffer::Allocate(std::max<uint64_t>(at, 256)));
  auto* base = static_cast<char*>(d.buffer_.data());
  auto copy = [base](uint64_t to, const void* src, size_t bytes) {
    return cuda::CudaStatus(cudaMemcpy(base + to, src, bytes, cudaMemcpyHostToDevice),
                            "cudaMemcpy");
  };
  DF11_RETURN_IF_ERROR(
      copy(d.segments_at_, segments.data(), segments.size() * sizeof(InterleavedSegment)));
  DF11_RETURN_IF_ERROR(copy(d.table_at_, table.data(), table.size() * sizeof(uint16_t)));
  DF11_RETURN_IF_ERROR(copy(d.words_at_, unit.words().data(), unit.words().size_bytes()));
  DF11_RETURN_IF_ERROR(copy(d.escapes_at_, unit.escapes().data(), unit.escapes().size_bytes()));
  DF11_RETURN_IF_ERROR(
      copy(d.sign_mantissa_at_, unit.sign_mantissa().data(), unit.sign_mantissa().size_bytes()));
  return d;
}

InterleavedView DeviceInterleavedUnit::view(uint16_t* out) const {
  const auto* base = static_cast<const char*>(buffer_.data());
  return {.words = reinterpret_cast<const uint16_t*>(base + words_at_),
          .escapes = reinterpret_cast<const uint8_t*>(base + escapes_at_),
          .sign_mantissa = reinterpret_cast<const uint8_t*>(base + sign_mantissa_at_),
          .segments = reinterpret_cast<const InterleavedSegment*>(base + segments_at_),
          .table = reinterpret_cast<const uint16_t*>(base + table_at_),
          .out = out,
          .n_segments = n_segments_};
}

}  // namespace df11::codec::gpu
