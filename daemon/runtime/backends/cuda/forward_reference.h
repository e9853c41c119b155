// ForwardOps computed on the host, one operation after another, rounding as the kernels do
// (format::FloatToBf16): the definition of what each operation gives (forward_ops.h), which the
// CUDA kernels, and their steps run on the host by the tests' emulated device, are checked
// against. The emulated device takes its matrix products from it.
#ifndef DF11_DAEMON_RUNTIME_BACKENDS_CUDA_FORWARD_REFERENCE_H_
#define DF11_DAEMON_RUNTIME_BACKENDS_CUDA_FORWARD_REFERENCE_H_

#include <atomic>

#include "daemon/runtime/backends/cuda/forward_ops.h"

namespace df11::runtime {

class ReferenceForwardOps final : public ForwardOps {
 public:
  absl::Status UseWorkspace(void* device, uint64_t bytes) override { return absl::OkStatus(); }
  absl::Status Linear(const uint16_t* x, const uint16_t* w, const uint16_t* bias, int64_t rows,
                      int64_t in, int64_t out, void* y, bool y_fp32, Stream stream) override;
  absl::Status RmsNorm(const uint16_t* x, const uint16_t* w, int64_t rows, int64_t n, float eps,
                       float offset, uint16_t* y, Stream stream) override;
  absl::Status FloatRmsNorm(const float* x, const uint16_t* w, int64_t rows, int64_t n, float eps,
                            float offset, void* y, bool y_fp32, Stream stream) override;
  absl::Status AddRmsNorm(float* x, const float* y, const uint16_t* w, int64_t rows, int64_t n,
                          float eps, float offset, uint16_t* out, Stream stream) override;
  absl::Status Rope(uint16_t* x, int64_t rows, int64_t heads, int64_t head_dim,
                    const int32_t* row_position, const RopeTable& table, Stream stream) override;
  absl::Status WriteKv(const uint16_t* k, const uint16_t* v, int64_t rows, const PagedKv& kv,
                       Stream stream) override;
  absl::Status PrepareHeadsAndStoreKv(uint16_t* q, uint16_t* k, const uint16_t* v, int64_t rows,
                                      int64_t heads, const uint16_t* q_norm,
                                      const uint16_t* k_norm, float eps, float offset,
                                      const RopeTable& table, const PagedKv& kv,
                                      Stream stream) override;
  absl::Status Attention(const uint16_t* q, int64_t rows, const AttentionShape& shape,
                         const PagedKv& kv, uint16_t* out, Stream stream) override;
  absl::Status GatedActivation(const uint16_t* gate, const uint16_t* up, int64_t n,
                               Activation activation, uint16_t* y, Stream stream) override;
  absl::Status Add(float* x, const float* y, int64_t n, Stream stream) override;
  absl::Status Widen(const uint16_t* in, int64_t n, float scale, float* out,
                     Stream stream) override;
  absl::Status SoftCap(float* x, int64_t n, float cap, Stream stream) override;
  absl::Status GatherRows(const char* base, const uint64_t* offsets, int64_t n, int64_t row_bytes,
                          void* out, Stream stream) override;
  absl::Status SplitColumns(const uint16_t* in, int64_t rows, int64_t in_width,
                            std::span<const ColumnRange> pieces, Stream stream) override;
  // Decodes each matrix with the GPU kernels' steps (codec::DecodeTiledView), then Linear.
  absl::Status TiledLinear(const uint16_t* x, int64_t rows, std::span<const TiledProduct> products,
                           bool y_fp32, Stream stream) override;
  // MultiplyLaneProducts: the kernels' steps run on the host.
  absl::Status LaneLinear(const uint16_t* x, int64_t rows,
                          std::span<const codec::gpu::LaneProduct> products, bool y_fp32,
                          void* workspace, uint64_t workspace_bytes, Stream stream) override;
  absl::Status CheckTiled(Stream stream) override;

 private:
  std::atomic<bool> tiled_error_{false};
};

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_BACKENDS_CUDA_FORWARD_REFERENCE_H_
