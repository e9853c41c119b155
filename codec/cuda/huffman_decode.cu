// The DF11 decode kernel: one CTA per 4096-byte block of a unit's stream, one thread per 32-byte
// segment, many units per launch. The per-thread and per-block steps live in decode_steps.h, where
// the CPU harness runs them too; this file holds the launch, the unit lookup and shared memory.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "codec/cuda/cuda_status.h"
#include "codec/cuda/decode_steps.h"
#include "codec/cuda/launch_items.cuh"
#include "codec/gpu_decoder.h"

namespace df11::codec::gpu {
namespace {

// Shared memory of a CTA: the unit's multi-symbol table, its LUT rows and the block's exponents.
constexpr size_t kTableSmemBytes = kTableEntries * sizeof(uint32_t);
constexpr size_t kLutSmemBytes = kMaxLutRows * 256;
constexpr size_t kSmemBytes = kTableSmemBytes + kLutSmemBytes + kMaxBlockElements;
static_assert(kSmemBytes + (kMaxUnitsPerLaunch + 1 + kSegmentsPerBlock) * sizeof(uint32_t) <=
                  48 * 1024,
              "dynamic and static shared memory stay within the default 48 KB");
// CTAs resident per SM with 45 KB of shared memory each on Hopper (228 KB per SM).
constexpr int kCtasPerSm = 4;

// Workspace: an error flag (first, so that CheckDecoded finds it without the unit count), then
// the unit views. Each CTA sums the views' block counts itself (at most kMaxUnitsPerLaunch), so
// a launch needs nothing from the host but the views.
struct Workspace {
  static constexpr size_t kErrorOffset = 0;
  static constexpr size_t kViewsOffset = 16;
  static size_t Bytes(size_t n) { return kViewsOffset + n * sizeof(UnitView); }
};

// The loop both kernels share. The CTAs take the launch's blocks in turn; for each, every thread
// calls step(view, b), b being the block's number in its unit, with the view's table and LUT rows
// in shared memory (loaded again only when the view changes). Each CTA first sums the views'
// block counts, to find the view of a launch-wide block by binary search.
template <typename Step>
__device__ void ForEachBlock(const UnitView* units, uint32_t n_units, uint32_t* table,
                             uint8_t* luts, Step step) {
  __shared__ uint32_t first_block[kMaxUnitsPerLaunch + 1];  // launch-wide block of each view
  NumberItems(units, n_units, first_block, [](const UnitView& u) { return u.n_blocks; });
  __syncthreads();
  const uint32_t total_blocks = first_block[n_units];
  uint32_t loaded = n_units;  // no view's tables in shared memory yet
  for (uint32_t g = blockIdx.x; g < total_blocks; g += gridDim.x) {
    const uint32_t lo = ViewOfItem(first_block, n_units, g);
    const UnitView unit = units[lo];
    if (lo != loaded) {  // uniform across the CTA
      __syncthreads();
      for (uint32_t i = threadIdx.x; i < kTableEntries; i += blockDim.x) table[i] = unit.table[i];
      for (uint32_t i = threadIdx.x; i < unit.lut_rows * 256; i += blockDim.x) {
        luts[i] = unit.luts[i];
      }
      __syncthreads();
      loaded = lo;
    }
    step(unit, unit.first_block + (g - first_block[lo]));
  }
}

__global__ void __launch_bounds__(kSegmentsPerBlock)
    decode_units_kernel(const UnitView* units, uint32_t n_units, uint32_t* error) {
  extern __shared__ uint32_t smem[];
  uint32_t* table = smem;
  uint8_t* luts = reinterpret_cast<uint8_t*>(smem + kTableEntries);
  uint8_t* exps = luts + kLutSmemBytes;
  ForEachBlock(units, n_units, table, luts, [&](const UnitView& unit, uint32_t b) {
    if (!DecodeSegment(unit, table, luts, b, threadIdx.x, exps)) atomicOr(error, 1u);
    __syncthreads();
    if (unit.out != nullptr) JoinSlice(unit, b, exps, threadIdx.x, blockDim.x);  // else a check
    __syncthreads();
  });
}

// The layout pass: per block, each thread counts its segment's codes, then thread 0 turns the
// counts into the block's segment offsets (128 additions).
__global__ void __launch_bounds__(kSegmentsPerBlock)
    build_offsets_kernel(const UnitView* units, uint32_t n_units, uint32_t* error) {
  extern __shared__ uint32_t smem[];
  uint32_t* table = smem;
  uint8_t* luts = reinterpret_cast<uint8_t*>(smem + kTableEntries);
  __shared__ uint32_t counts[kSegmentsPerBlock];
  ForEachBlock(units, n_units, table, luts, [&](const UnitView& unit, uint32_t b) {
    counts[threadIdx.x] = CountSegment(unit, table, luts, b, threadIdx.x);
    __syncthreads();
    if (threadIdx.x == 0) {
      // The view's offsets are the device memory this pass fills.
      uint16_t* offsets =
          const_cast<uint16_t*>(unit.segment_offsets) + uint64_t{b} * kSegmentsPerBlock;
      if (!FinishBlockOffsets(unit, b, counts, offsets)) atomicOr(error, 1u);
    }
    __syncthreads();
  });
}

// Checks and enqueues one launch of `kernel` over `units` (DecodeUnits and BuildSegmentOffsets).
template <typename Kernel>
absl::Status Launch(Kernel kernel, const char* what, std::span<const UnitView> units,
                    void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  const size_t n = units.size();
  if (n == 0) return absl::InvalidArgumentError(std::string(what) + ": no units");
  if (n > kMaxUnitsPerLaunch) {
    return absl::InvalidArgumentError(std::string(what) + ": " + std::to_string(n) +
                                      " units in one launch; at most " +
                                      std::to_string(kMaxUnitsPerLaunch));
  }
  if (workspace_bytes < Workspace::Bytes(n)) {
    return absl::InvalidArgumentError(
        std::string(what) + ": workspace of " + std::to_string(workspace_bytes) + " bytes; " +
        std::to_string(n) + " units need " + std::to_string(Workspace::Bytes(n)));
  }
  uint64_t total = 0;
  for (const UnitView& u : units) total += u.n_blocks;
  if (total >= (uint64_t{1} << 32)) {
    return absl::InvalidArgumentError(std::string(what) + ": more than 2^32 blocks in one launch");
  }
  auto* base = static_cast<char*>(workspace);
  DF11_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(base + Workspace::kViewsOffset, units.data(),
                                            n * sizeof(UnitView), cudaMemcpyHostToDevice, stream));
  DF11_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(base + Workspace::kErrorOffset, 0, sizeof(uint32_t), stream));
  if (total == 0) return absl::OkStatus();
  int device = 0, sms = 0;
  DF11_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  DF11_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const uint64_t grid = std::min<uint64_t>(total, uint64_t(sms) * kCtasPerSm);
  kernel<<<static_cast<unsigned>(grid), kSegmentsPerBlock, kSmemBytes, stream>>>(
      reinterpret_cast<const UnitView*>(base + Workspace::kViewsOffset), static_cast<uint32_t>(n),
      reinterpret_cast<uint32_t*>(base + Workspace::kErrorOffset));
  DF11_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace

size_t DecodeWorkspaceBytes(size_t n_units) { return Workspace::Bytes(n_units); }

absl::Status DecodeUnits(std::span<const UnitView> units, void* workspace, size_t workspace_bytes,
                         StreamRef stream) {
  return Launch(decode_units_kernel, "DecodeUnits", units, workspace, workspace_bytes,
                static_cast<cudaStream_t>(stream));
}

absl::Status BuildSegmentOffsets(std::span<const UnitView> units, void* workspace,
                                 size_t workspace_bytes, StreamRef stream) {
  return Launch(build_offsets_kernel, "BuildSegmentOffsets", units, workspace, workspace_bytes,
                static_cast<cudaStream_t>(stream));
}

absl::Status CheckDecoded(const void* workspace, StreamRef stream_ref) {
  auto stream = static_cast<cudaStream_t>(stream_ref);
  uint32_t error = 0;
  DF11_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&error,
                                            static_cast<const char*>(workspace) +
                                                Workspace::kErrorOffset,
                                            sizeof(error), cudaMemcpyDeviceToHost, stream));
  DF11_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  if (error != 0) {
    return absl::DataLossError(kCorruptCodesMessage);
  }
  return absl::OkStatus();
}

}  // namespace df11::codec::gpu
