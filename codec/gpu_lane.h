// The GPU decoder of codec::LaneUnit (the lane-stream layout), CUB-style like gpu_decoder.h:
// explicit stream, caller workspace with a size query, many units (or segment ranges) per launch,
// no allocation, nothing copied before a launch (the views travel as the kernel's parameters). No
// CUDA type appears here; the implementation is codec/cuda/lane_decode.cu, built when CUDA is
// (guard callers with DF11_HAVE_CUDA). Design: codec/cuda/lane_steps.h.
//
//   LaneUnit u = LaneUnit::Build(values, &pool).value();
//   DeviceLaneUnit d = DeviceLaneUnit::Upload(u).value();
//   LaneView view = d.view(out);                        // out: device memory, 16-byte aligned
//   DF11_RETURN_IF_ERROR(gpu::DecodeLanes(std::span(&view, 1), workspace, bytes, stream));
//   DF11_RETURN_IF_ERROR(gpu::CheckDecoded(workspace, stream));   // synchronizes
#ifndef DF11_CODEC_GPU_LANE_H_
#define DF11_CODEC_GPU_LANE_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codec/cuda/device_unit.h"
#include "codec/cuda/lane_steps.h"
#include "codec/gpu_decoder.h"
#include "codec/lane_unit.h"

namespace df11::codec::gpu {

// Enqueues decoding of every view into its `out` (16-byte aligned; nullptr: decode and check
// only) with one launch on `stream`: one warp per segment. CheckDecoded on the same workspace
// then reports an inconsistent segment as kDataLoss; a corrupt stream reads nothing outside its
// segment's words. kInvalidArgument as CheckLaneDecodeLaunch; kInternal naming the CUDA call
// that failed. Thread-safe.
absl::Status DecodeLanes(std::span<const LaneView> views, void* workspace, size_t workspace_bytes,
                         StreamRef stream);

// The fused decode + product on the same layout (lane_steps.h): y = x · Wᵀ (+ bias) for each of
// `products`, x [columns][cols] BF16 in device memory (16-byte aligned rows; every product of a
// launch has the same cols), columns 1 to kLaneMaxColumns, y fp32 or BF16. Two launches: the
// products' row pieces (one warp per segment, nothing decoded reaches memory), then each row's
// pieces summed in order with its bias. Deterministic; each column independent of the others. The
// error flag as DecodeLanes (with `keep_error`, not cleared first, so several launches share it
// until one CheckDecoded). kInvalidArgument as CheckLaneProducts, for misaligned x, y or
// sign/mantissa bytes, or a workspace under LaneGemvWorkspaceBytes.
absl::Status LaneGemv(std::span<const LaneProduct> products, const uint16_t* x, int columns,
                      bool y_fp32, void* workspace, size_t workspace_bytes, StreamRef stream,
                      bool keep_error = false);

// One LaneUnit resident on the current device in one allocation: words, segment index, table,
// and the sign/mantissa bytes with their tail. For tests, benchmarks and tools.
class DeviceLaneUnit {
 public:
  // Copies synchronously. Errors as DeviceBuffer::Allocate, and kInternal for a failed copy.
  static absl::StatusOr<DeviceLaneUnit> Upload(const LaneUnit& unit);

  // The view of the whole unit, writing to `out` (device memory of num_elements() values).
  LaneView view(uint16_t* out) const;
  uint64_t device_bytes() const { return buffer_.size(); }
  uint64_t num_elements() const { return elements_; }

 private:
  DeviceBuffer buffer_;
  uint64_t elements_ = 0;
  uint32_t n_segments_ = 0;
  uint64_t words_at_ = 0, index_at_ = 0, table_at_ = 0, sign_mantissa_at_ = 0;
};

}  // namespace df11::codec::gpu

#endif  // DF11_CODEC_GPU_LANE_H_
