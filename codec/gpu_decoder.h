// The GPU decoder of DF11 units resident in device memory (CUB-style host API). No CUDA type
// appears here; the implementation is codec/cuda/huffman_decode.cu, built when CUDA is (guard
// callers with DF11_HAVE_CUDA).
//
//   GpuLayout layout = BuildGpuLayout(unit, &pool).value();   // on the CPU, or on the device:
//   ... upload the unit (DeviceUnit), BuildSegmentOffsets, fill gpu::UnitView views[] ...
//   std::vector<std::byte> needs gpu::DecodeWorkspaceBytes(n) bytes of device workspace
//   DF11_RETURN_IF_ERROR(gpu::DecodeUnits(views, workspace, bytes, stream));  // enqueued
//   DF11_RETURN_IF_ERROR(gpu::CheckDecoded(workspace, stream));               // synchronizes
#ifndef DF11_CODEC_GPU_DECODER_H_
#define DF11_CODEC_GPU_DECODER_H_

#include <cstddef>
#include <span>

#include "absl/status/status.h"
#include "codec/cuda/decode_steps.h"

namespace df11::codec::gpu {

// An opaque CUDA stream (a cudaStream_t); nullptr is the legacy default stream.
using StreamRef = void*;

// The most views one DecodeUnits call takes.
inline constexpr size_t kMaxUnitsPerLaunch = 64;

// Bytes of device workspace DecodeUnits needs for `n_units` units. Pure; allocates nothing.
size_t DecodeWorkspaceBytes(size_t n_units);

// Enqueues decoding of every view of `units` (whole units or block ranges of them, in device
// memory, see UnitView; the array itself is host memory and is copied into `workspace`) into
// their `out` buffers, with one kernel launch, on `stream`; does not synchronize. A view whose
// `out` is null is decoded and checked without writing anything (CheckDecoded gives the result).
// `workspace` must hold DecodeWorkspaceBytes(n) bytes of device memory and stay untouched until the
// stream has passed this point. Allocates nothing, on the device or the host. kInvalidArgument for
// no units, more than kMaxUnitsPerLaunch, a small workspace or more than 2^32 blocks in all;
// kInternal naming the CUDA call that failed. Thread-safe: no shared state.
absl::Status DecodeUnits(std::span<const UnitView> units, void* workspace, size_t workspace_bytes,
                         StreamRef stream);

// Enqueues the layout pass: each view's GpuLayout::segment_offsets computed on the device from its
// uploaded stream, gaps, positions, table and LUT rows, and written to the view's segment_offsets
// (writable device memory here; `out` is unused). Equal to BuildGpuLayout's offsets for a sound
// unit. Workspace, limits and errors as DecodeUnits; CheckDecoded then reports a block whose codes
// do not add up to its output_positions as kDataLoss (a full decode checks the rest).
absl::Status BuildSegmentOffsets(std::span<const UnitView> units, void* workspace,
                                 size_t workspace_bytes, StreamRef stream);

// Waits for `stream`, then reports whether the decode enqueued with `workspace` found every
// thread's codes consistent with the unit's metadata: kDataLoss if not (the output is then not to
// be used), kInternal for a CUDA error.
absl::Status CheckDecoded(const void* workspace, StreamRef stream);

}  // namespace df11::codec::gpu

#endif  // DF11_CODEC_GPU_DECODER_H_
