// The kernels of codec::TiledMatrix (codec/gpu_tiled.h): fused decode + tensor-core product, and
// the standalone decoder. The per-lane steps are codec/cuda/tiled_steps.h.
//
// A CTA of 8 warps takes a band (16 rows of W) at a time; its warps share the band's segments
// (warp w: segments w, w + 8, ...), each accumulating a 16 x 8 fp32 result in the registers of
// mma.m16n8k16; the 8 partial results are then summed in shared memory in warp order, so the
// result is deterministic. The matrix's pair table sits in shared memory, built again from its
// 64 codes only when the CTA moves on to another matrix of the launch.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "codec/base/status_macros.h"
#include "codec/cuda/cuda_status.h"
#include "codec/cuda/launch_items.cuh"
#include "codec/gpu_tiled.h"

namespace df11::codec::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFullWarp = 0xFFFFFFFFu;
constexpr int kDefaultCtasPerSm = 4;
constexpr int kMaxColumns = 8;
// 32-bit words of each warp's stage: a segment's streams take about 2.8 KB on LLM weights (32
// lanes x 256 codes x 2.7 bits). With the 16 KB table, 44 KB per CTA: 4 CTAs fit in an SM.
constexpr uint32_t kStageWords = 896;
constexpr size_t kSharedBytes = (kTiledTableEntries + kWarps * kStageWords) * sizeof(uint32_t);
static_assert(kStageWords >= 32 * 4, "the stages hold the warps' partial results");
// Within the 48 KB a CTA has without asking (cudaFuncSetAttribute): 4 CTAs fit in an SM.
static_assert(kSharedBytes <= 48 * 1024);

// Workspace: the error flag (where CheckDecoded reads it).
constexpr size_t kErrorOffset = 0;
constexpr size_t kWorkspaceBytes = 16;
// Views a kernel takes by value (kernel parameters: no copy to the device before the launch); a
// call with more launches once per group.
constexpr uint32_t kViewsPerLaunch = 8;

enum class Work { kGemvBf16, kGemvF32, kDecode };

// What a launch's kernel reads per view: a product's X and Y, or a decode's output.
struct LaunchView {
  TiledView m;
  const void* x;
  void* y;  // fp32 or BF16 Y, or the BF16 output of a decode
  uint64_t ldx, ldy;
  const uint16_t* bias;
};
struct LaunchViews {
  LaunchView v[kViewsPerLaunch];
  uint32_t n;
};

// D += A B for one 16 x 8 x 16 step, BF16 operands, fp32 accumulation.
__device__ __forceinline__ void Mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void PrefetchL2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}

__device__ __forceinline__ uint32_t WarpExclusiveSum(uint32_t v, int lane) {
  uint32_t sum = v;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const uint32_t below = __shfl_up_sync(kFullWarp, sum, d);
    if (lane >= d) sum += below;
  }
  return sum - v;
}

// Segment `s` of band `band` of v.m by one warp: decoded tile by tile into the product's
// accumulators (or, for a decode, into v.y). A lane whose codes do not end where its stream does
// clears `ok`; its reads never leave its stream's words.
template <Work kWork>
__device__ __forceinline__ void Segment(const LaunchView& v, const uint32_t* table, uint32_t* stage,
                                        uint64_t band, uint32_t s, int lane, int n_cols,
                                        float (&acc)[4], bool& ok) {
  const uint32_t tiles_per_band = TilesPerBand(v.m);
  const uint64_t seg = band * SegmentsPerBand(v.m) + s;
  const uint64_t seg_bit = v.m.segment_bits[seg], seg_end = v.m.segment_bits[seg + 1];
  const uint32_t bits = v.m.lane_bits[seg * kTiledLanes + lane];
  const uint64_t bit = seg_bit + WarpExclusiveSum(bits, lane);
  const uint64_t end = bit + bits;
  if (!__all_sync(kFullWarp, seg_end >= seg_bit && end <= seg_end)) {
    ok = false;
    return;
  }
  const uint32_t first_tile = s * kTilesPerSegment;
  const uint32_t end_tile = min(tiles_per_band, first_tile + kTilesPerSegment);
  // Ask L2 for the segment's sign/mantissa bytes at once, rather than as the lanes reach them.
  const uint8_t* sm = v.m.sign_mantissa + SignMantissaOffset(band, tiles_per_band, first_tile, 0);
  for (uint32_t o = 128 * lane; o < (end_tile - first_tile) * kTileBytes; o += 128 * 32) {
    PrefetchL2(sm + o);
  }
  // The segment's streams (segments start on a word) into the warp's stage, 128 bytes per load:
  // the lanes' windows then read shared memory, not 32 scattered cache lines per load. A segment
  // too long for the stage (escapes in bulk) is read where it is.
  const uint64_t first_word = seg_bit >> 5;
  const uint32_t n_words = static_cast<uint32_t>((seg_end - seg_bit) >> 5) + kTiledWordsRoom;
  const bool staged = n_words <= kStageWords;
  __syncwarp();  // the warp's reads of the last segment's stage are done
  if (staged) {
    for (uint32_t i = lane; i < n_words; i += 32) stage[i] = v.m.words[first_word + i];
  }
  __syncwarp();
  const uint32_t* words = staged ? stage : v.m.words + first_word;
  // Positions from the segment's first word: a segment holds fewer than 2^17 bits.
  uint32_t bit32 = static_cast<uint32_t>(bit - first_word * 32);
  const uint32_t end_bit = static_cast<uint32_t>(end - first_word * 32);
  // Each pair of tiles' sign/mantissa bytes, loaded a pair ahead.
  auto load_bytes = [&](uint32_t t) {
    return __ldg(reinterpret_cast<const uint4*>(v.m.sign_mantissa +
                                                SignMantissaOffset(band, tiles_per_band, t, lane)));
  };
  uint4 next_bytes = load_bytes(first_tile);
  for (uint32_t t = first_tile; t < end_tile; t += 2) {
    const uint4 bytes = next_bytes;
    if (t + 2 < end_tile) next_bytes = load_bytes(t + 2);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t tile = t + h;
      uint32_t pairs[4], escapes;
      uint32_t used = DecodePairs(table, ReadWindow(words, bit32), pairs, escapes);
      if (__any_sync(kFullWarp, escapes != 0)) {
        used = DecodeCodesOneByOne(table, words, bit32, pairs);
      }
      bit32 += used;
      if (bit32 > end_bit) {  // inconsistent: stay inside the stream
        ok = false;
        bit32 = end_bit;
      }
      uint32_t a[4];
      JoinTile(h == 0 ? bytes.x : bytes.z, h == 0 ? bytes.y : bytes.w, pairs, a);
      if constexpr (kWork == Work::kDecode) {
        auto* out = static_cast<uint16_t*>(v.y);
#pragma unroll
        for (int p = 0; p < 4; ++p) {
          const uint64_t row = band * kTileRows + SlotRow(lane, 2 * p);
          const uint64_t col = uint64_t(tile) * kTileCols + SlotCol(lane, 2 * p);
          *reinterpret_cast<uint32_t*>(out + row * v.ldy + col) = a[p];
        }
      } else if constexpr (kWork == Work::kGemvBf16) {
        uint32_t b[2];
        LoadXBf16(static_cast<const uint16_t*>(v.x), v.ldx, n_cols, tile, lane, b);
        Mma(acc, a, b[0], b[1]);
      } else {
        uint32_t b[3][2];
        LoadXF32(static_cast<const float*>(v.x), v.ldx, n_cols, tile, lane, b);
#pragma unroll
        for (int part = 0; part < 3; ++part) Mma(acc, a, b[part][0], b[part][1]);
      }
    }
  }
  if (bit32 != end_bit) ok = false;
}

template <Work kWork>
__global__ void __launch_bounds__(kThreads, kDefaultCtasPerSm)
    tiled_kernel(const __grid_constant__ LaunchViews launch, int n_cols, bool y_bf16,
                 uint32_t* __restrict__ error) {
  const LaunchView* const views = launch.v;
  const uint32_t n_views = launch.n;
  __shared__ uint32_t first_band[kViewsPerLaunch + 1];  // launch-wide band of each view
  // Dynamic: the pair table (PairEntry of every index), then each warp's stage; once a band's
  // segments are done, the stages hold the warps' partial results.
  extern __shared__ uint32_t dynamic[];
  uint32_t* const table = dynamic;
  uint32_t* const stages = dynamic + kTiledTableEntries;
  auto partial = reinterpret_cast<float(*)[32][4]>(stages);
  NumberItems(views, n_views, first_band, [](const LaunchView& v) { return Bands(v.m); });
  __syncthreads();
  const uint32_t total = first_band[n_views];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  uint32_t table_view = n_views;  // none yet
  bool ok = true;
  for (uint32_t item = blockIdx.x; item < total; item += gridDim.x) {
    const uint32_t vi = ViewOfItem(first_band, n_views, item);
    const LaunchView v = views[vi];
    if (vi != table_view) {  // uniform across the CTA
      __syncthreads();
      for (int i = threadIdx.x; i < kTiledTableEntries; i += kThreads) {
        table[i] = PairEntry(v.m.codes, i);
      }
      __syncthreads();
      table_view = vi;
    }
    const uint64_t band = item - first_band[vi];
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    uint32_t* const stage = stages + warp * kStageWords;
    for (uint32_t s = warp; s < SegmentsPerBand(v.m); s += kWarps) {
      Segment<kWork>(v, table, stage, band, s, lane, n_cols, acc, ok);
    }
    if constexpr (kWork != Work::kDecode) {
      __syncthreads();  // every warp is done with its stage
      *reinterpret_cast<float4*>(partial[warp][lane]) = make_float4(acc[0], acc[1], acc[2], acc[3]);
      __syncthreads();
      if (threadIdx.x < 128) {
        const int l = threadIdx.x / 4, r = threadIdx.x % 4;
        float sum = partial[0][l][r];
#pragma unroll
        for (int w = 1; w < kWarps; ++w) sum += partial[w][l][r];
        const int col = AccCol(l, r);
        const uint64_t row = band * kTileRows + AccRow(l, r);
        if (v.bias != nullptr) sum += __uint_as_float(uint32_t{__ldg(v.bias + row)} << 16);
        if (col < n_cols) {
          if (y_bf16) {
            static_cast<uint16_t*>(v.y)[col * v.ldy + row] =
                __bfloat16_as_ushort(__float2bfloat16_rn(sum));
          } else {
            static_cast<float*>(v.y)[col * v.ldy + row] = sum;
          }
        }
      }
      __syncthreads();
    }
  }
  if (__any_sync(kFullWarp, !ok) && lane == 0) atomicOr(error, 1u);
}

bool Aligned(const void* p, uintptr_t to) { return reinterpret_cast<uintptr_t>(p) % to == 0; }

absl::Status Launch(Work work, std::span<const LaunchView> views, int n_cols, bool y_bf16,
                    void* workspace, size_t workspace_bytes, cudaStream_t stream, int ctas_per_sm,
                    bool keep_error, const std::string& what) {
  const size_t n = views.size();
  if (n == 0) return absl::InvalidArgumentError(what + ": no views");
  if (n > kMaxUnitsPerLaunch) {
    return absl::InvalidArgumentError(what + ": " + std::to_string(n) +
                                      " views in one launch; at most " +
                                      std::to_string(kMaxUnitsPerLaunch));
  }
  if (workspace_bytes < TiledWorkspaceBytes(n)) {
    return absl::InvalidArgumentError(what + ": workspace of " + std::to_string(workspace_bytes) +
                                      " bytes; " + std::to_string(n) + " views need " +
                                      std::to_string(TiledWorkspaceBytes(n)));
  }
  if (ctas_per_sm == 0) ctas_per_sm = kDefaultCtasPerSm;
  if (ctas_per_sm < 1 || ctas_per_sm > kDefaultCtasPerSm) {
    return absl::InvalidArgumentError(what + ": " + std::to_string(ctas_per_sm) +
                                      " CTAs per SM; 1 to " + std::to_string(kDefaultCtasPerSm));
  }
  uint64_t total = 0;
  for (const LaunchView& v : views) {
    if (!TiledMatrix::Supports(v.m.rows, v.m.cols)) {
      return absl::InvalidArgumentError(what + ": a " + std::to_string(v.m.rows) + " x " +
                                        std::to_string(v.m.cols) + " matrix is not tiled");
    }
    total += Bands(v.m);
  }
  if (total >= (uint64_t{1} << 32)) {
    return absl::InvalidArgumentError(what + ": more than 2^32 bands in one launch");
  }
  auto* error = reinterpret_cast<uint32_t*>(static_cast<char*>(workspace) + kErrorOffset);
  if (!keep_error) DF11_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(error, 0, sizeof(uint32_t), stream));
  int device = 0, sms = 0;
  DF11_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  DF11_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  for (size_t first = 0; first < n; first += kViewsPerLaunch) {
    LaunchViews group{};
    group.n = static_cast<uint32_t>(std::min<size_t>(kViewsPerLaunch, n - first));
    uint64_t bands = 0;
    for (uint32_t i = 0; i < group.n; ++i) {
      group.v[i] = views[first + i];
      bands += Bands(group.v[i].m);
    }
    const dim3 blocks(
        static_cast<unsigned>(std::min<uint64_t>(bands, uint64_t(sms) * ctas_per_sm)));
    switch (work) {
      case Work::kGemvBf16:
        tiled_kernel<Work::kGemvBf16>
            <<<blocks, kThreads, kSharedBytes, stream>>>(group, n_cols, y_bf16, error);
        break;
      case Work::kGemvF32:
        tiled_kernel<Work::kGemvF32>
            <<<blocks, kThreads, kSharedBytes, stream>>>(group, n_cols, y_bf16, error);
        break;
      case Work::kDecode:
        tiled_kernel<Work::kDecode>
            <<<blocks, kThreads, kSharedBytes, stream>>>(group, n_cols, y_bf16, error);
        break;
    }
    DF11_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  }
  return absl::OkStatus();
}

}  // namespace

size_t TiledWorkspaceBytes(size_t n_views) { return kWorkspaceBytes; }

absl::Status TiledGemv(std::span<const TiledGemvView> views, int n_cols, TiledType x_type,
                       TiledType y_type, void* workspace, size_t workspace_bytes, StreamRef stream,
                       int ctas_per_sm, bool keep_error) {
  const std::string what = "TiledGemv";
  if (n_cols < 1 || n_cols > kMaxColumns) {
    return absl::InvalidArgumentError(what + ": " + std::to_string(n_cols) + " columns; 1 to " +
                                      std::to_string(kMaxColumns));
  }
  const bool x_bf16 = x_type == TiledType::kBf16, y_bf16 = y_type == TiledType::kBf16;
  absl::InlinedVector<LaunchView, kViewsPerLaunch> launch;
  launch.reserve(views.size());
  for (const TiledGemvView& v : views) {
    if (!Aligned(v.x, x_bf16 ? 4 : 8) || v.ldx % 2 != 0 || !Aligned(v.y, y_bf16 ? 2 : 4) ||
        v.ldx < v.matrix.cols || v.ldy < v.matrix.rows) {
      return absl::InvalidArgumentError(
          what + ": X must be " + (x_bf16 ? "4" : "8") +
          "-byte aligned with an even ldx of at least the matrix's columns, and Y aligned with "
          "ldy of at least its rows");
    }
    launch.push_back({v.matrix, v.x, v.y, v.ldx, v.ldy, v.bias});
  }
  return Launch(x_bf16 ? Work::kGemvBf16 : Work::kGemvF32, launch, n_cols, y_bf16, workspace,
                workspace_bytes, static_cast<cudaStream_t>(stream), ctas_per_sm, keep_error, what);
}

absl::Status DecodeTiled(std::span<const TiledDecodeView> views, void* workspace,
                         size_t workspace_bytes, StreamRef stream, int ctas_per_sm) {
  const std::string what = "DecodeTiled";
  absl::InlinedVector<LaunchView, kViewsPerLaunch> launch;
  launch.reserve(views.size());
  for (const TiledDecodeView& v : views) {
    if (!Aligned(v.out, 4) || v.ld % 2 != 0 || v.ld < v.matrix.cols) {
      return absl::InvalidArgumentError(
          what + ": the output must be 4-byte aligned with an even ld of at least the columns");
    }
    launch.push_back({v.matrix, nullptr, v.out, 0, v.ld, nullptr});
  }
  return Launch(Work::kDecode, launch, 0, false, workspace, workspace_bytes,
                static_cast<cudaStream_t>(stream), ctas_per_sm, false, what);
}

absl::StatusOr<DeviceTiledMatrix> DeviceTiledMatrix::Upload(const TiledMatrix& matrix) {
  DeviceTiledMatrix d;
  d.image_ = matrix.image();
  std::vector<char> host(d.image_.bytes);
  matrix.CopyImage(host.data());
  DF11_ASSIGN_OR_RETURN(d.buffer_, DeviceBuffer::Allocate(d.image_.bytes));
  DF11_RETURN_IF_ERROR(d.buffer_.CopyFromHost(host.data(), host.size()));
  return d;
}

TiledView DeviceTiledMatrix::view() const {
  return image_.View(static_cast<const char*>(buffer_.data()));
}

}  // namespace df11::codec::gpu
