// The GPU decoder of codec::InterleavedUnit (the lane-interleaved layout), CUB-style like
// gpu_decoder.h: explicit stream, caller workspace with a size query, many units per launch, no
// allocation. No CUDA type appears here; the implementation is codec/cuda/interleaved_decode.cu,
// built when CUDA is (guard callers with DF11_HAVE_CUDA). Design: codec/cuda/interleaved_steps.h.
//
//   InterleavedUnit u = InterleavedUnit::Build(decoder, regions, &pool).value();
//   DeviceInterleavedUnit d = DeviceInterleavedUnit::Upload(u).value();
//   InterleavedView view = d.view(out);                 // out: device memory, num_elements()
//   DF11_RETURN_IF_ERROR(gpu::DecodeInterleaved(std::span(&view, 1), workspace, bytes, stream));
//   DF11_RETURN_IF_ERROR(gpu::CheckDecoded(workspace, stream));   // synchronizes
#ifndef DF11_CODEC_GPU_INTERLEAVED_H_
#define DF11_CODEC_GPU_INTERLEAVED_H_

#include <cstddef>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codec/cuda/device_unit.h"
#include "codec/cuda/interleaved_steps.h"
#include "codec/gpu_decoder.h"
#include "codec/interleaved.h"

namespace df11::codec::gpu {

// Bytes of device workspace DecodeInterleaved needs for `n_views` views. Pure.
size_t InterleavedWorkspaceBytes(size_t n_views);

// CTAs of 256 threads resident per SM (a launch's occupancy) when the caller does not choose.
inline constexpr int kDefaultInterleavedCtasPerSm = 4;

// Enqueues decoding of every view (whole units or segment ranges, in device memory; the array
// itself is host memory, copied into `workspace`) into their `out` buffers with one launch on
// `stream`. A view whose `out` is null is decoded and checked without writing. CheckDecoded on the
// same workspace then reports an inconsistent stream as kDataLoss. `ctas_per_sm` (4, 6 or 8; 0:
// the default) trades registers per thread for resident warps, for benchmarks to compare.
// kInvalidArgument for no views, more than kMaxUnitsPerLaunch, a small workspace, more than 2^32
// segments or another CTA count; kInternal naming the CUDA call that failed. Allocates nothing;
// thread-safe.
absl::Status DecodeInterleaved(std::span<const InterleavedView> views, void* workspace,
                               size_t workspace_bytes, StreamRef stream, int ctas_per_sm = 0);

// One InterleavedUnit resident on the current device, in one allocation: segments, table, words,
// escape bytes and sign/mantissa bytes. For tests, benchmarks and tools.
class DeviceInterleavedUnit {
 public:
  // Copies synchronously. Errors as DeviceBuffer::Allocate, and kInternal for a failed copy.
  static absl::StatusOr<DeviceInterleavedUnit> Upload(const InterleavedUnit& unit);

  // The view of the whole unit, writing to `out` (device memory of num_elements() values).
  InterleavedView view(uint16_t* out) const;
  uint64_t device_bytes() const { return buffer_.size(); }
  uint64_t num_elements() const { return elements_; }

 private:
  DeviceBuffer buffer_;
  uint64_t elements_ = 0;
  uint32_t n_segments_ = 0;
  uint64_t segments_at_ = 0, table_at_ = 0, words_at_ = 0, escapes_at_ = 0, sign_mantissa_at_ = 0;
};

}  // namespace df11::codec::gpu

#endif  // DF11_CODEC_GPU_INTERLEAVED_H_
