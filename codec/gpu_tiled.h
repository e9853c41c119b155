// The GPU kernels of codec::TiledMatrix: the fused decode + matrix product Y = W X (X of 1 to 8
// columns) and the standalone decoder into row-major BF16, CUB-style like gpu_decoder.h: explicit
// stream, caller workspace with a size query, several matrices per launch, no allocation. No CUDA
// type appears here; the implementation is codec/cuda/tiled_gemv.cu, built when CUDA is (guard
// callers with DF11_HAVE_CUDA). Design: codec/cuda/tiled_steps.h.
//
//   TiledMatrix m = TiledMatrix::Build(bf16, rows, cols, &pool).value();
//   DeviceTiledMatrix d = DeviceTiledMatrix::Upload(m).value();
//   TiledGemvView v{.matrix = d.view(), .x = x, .y = y, .ldx = cols, .ldy = rows};
//   DF11_RETURN_IF_ERROR(gpu::TiledGemv(std::span(&v, 1), /*n_cols=*/1, TiledType::kBf16,
//                                       TiledType::kF32, workspace, bytes, stream));
//   DF11_RETURN_IF_ERROR(gpu::CheckDecoded(workspace, stream));   // synchronizes
#ifndef DF11_CODEC_GPU_TILED_H_
#define DF11_CODEC_GPU_TILED_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codec/cuda/device_unit.h"
#include "codec/cuda/tiled_steps.h"
#include "codec/gpu_decoder.h"
#include "codec/tiled_matrix.h"

namespace df11::codec::gpu {

// Element types of X and Y.
enum class TiledType { kBf16, kF32 };

// One product of a launch: Y = W X (+ bias) for the columns n < n_cols, with column n of X at
// x + n * ldx (W.cols values) and column n of Y at y + n * ldy (W.rows values), both in device
// memory: the layout of a batch of activations, one row per sequence. fp32 accumulation, the
// bias (BF16, W.rows values; null: none) added in fp32; Y in fp32, or rounded once to BF16.
struct TiledGemvView {
  TiledView matrix;
  const void* x;
  void* y;
  uint64_t ldx;
  uint64_t ldy;
  const uint16_t* bias = nullptr;
};

// Bytes of device workspace a call with `n_views` views needs (its error flag: the views travel
// as kernel parameters). Pure.
size_t TiledWorkspaceBytes(size_t n_views);

// Enqueues Y = W X for every view, in one launch per 8 views on `stream`, with nothing copied
// before it (the views are kernel parameters). The sums are in a fixed order: the
// result does not depend on the launch, the other views or the other columns. `ctas_per_sm`
// (0: 4) caps the CTAs of 256 threads, for benchmarks. kInvalidArgument for no views, more than
// kMaxUnitsPerLaunch, n_cols outside 1..8, a small workspace, X or Y misaligned (X: 4 bytes for
// BF16, 8 for fp32; Y: its element; ldx even); kInternal naming the CUDA call that failed.
// CheckDecoded on the workspace then reports a stream inconsistent with its index as kDataLoss;
// with `keep_error` the launch leaves the workspace's error flag as earlier launches set it
// (the caller clears it), so that one check covers several launches. Allocates nothing;
// thread-safe.
absl::Status TiledGemv(std::span<const TiledGemvView> views, int n_cols, TiledType x_type,
                       TiledType y_type, void* workspace, size_t workspace_bytes, StreamRef stream,
                       int ctas_per_sm = 0, bool keep_error = false);

// Enqueues decoding every view's W into its `out` (4-byte aligned, ld even), as TiledGemv.
absl::Status DecodeTiled(std::span<const TiledDecodeView> views, void* workspace,
                         size_t workspace_bytes, StreamRef stream, int ctas_per_sm = 0);

// One TiledMatrix resident on the current device, in one allocation. For tests, benchmarks and
// tools.
class DeviceTiledMatrix {
 public:
  // Copies synchronously. Errors as DeviceBuffer::Allocate, and kInternal for a failed copy.
  static absl::StatusOr<DeviceTiledMatrix> Upload(const TiledMatrix& matrix);

  TiledView view() const;
  uint64_t device_bytes() const { return buffer_.size(); }

 private:
  DeviceBuffer buffer_;
  TiledImage image_;
};

}  // namespace df11::codec::gpu

#endif  // DF11_CODEC_GPU_TILED_H_
