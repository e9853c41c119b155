// ForwardOps that runs the CUDA kernels' own per-thread steps (forward_steps.h) on the host, in
// the kernels' launch shapes: every block of a launch in turn, its threads one after another
// between two barriers, and the warp and block sums written out lane by lane as the kernels'
// shuffles compute them. The matrix products (cuBLAS on a GPU) and the fused products of the
// tiled and lane-stream layouts are the reference's (ReferenceForwardOps; the lane-stream
// product's reference runs its kernel's steps, the tiled one decodes and multiplies).
//
// The operations of the tests' emulated device (emulated_gpu_device.h), so that every test of
// the CUDA backend runs the kernels' logic, and forward_ops_test checks each operation against
// the reference on the sizes models use.
#ifndef DF11_TESTS_RUNTIME_EMULATED_FORWARD_OPS_H_
#define DF11_TESTS_RUNTIME_EMULATED_FORWARD_OPS_H_

#include "daemon/runtime/backends/cuda/forward_ops.h"
#include "daemon/runtime/backends/cuda/forward_reference.h"

namespace df11::testing {

class EmulatedForwardOps final : public runtime::ForwardOps {
 public:
  absl::Status UseWorkspace(void* device, uint64_t bytes) override;
  absl::Status Linear(const uint16_t* x, const uint16_t* w, const uint16_t* bias, int64_t rows,
                      int64_t in, int64_t out, void* y, bool y_fp32, Stream stream) override;
  absl::Status RmsNorm(const uint16_t* x, const uint16_t* w, int64_t rows, int64_t n, float eps,
                       float offset, uint16_t* y, Stream stream) override;
  absl::Status FloatRmsNorm(const float* x, const uint16_t* w, int64_t rows, int64_t n, float eps,
                            float offset, void* y, bool y_fp32, Stream stream) override;
  absl::Status AddRmsNorm(float* x, const float* y, const uint16_t* w, int64_t rows, int64_t n,
                          float eps, float offset, uint16_t* out, Stream stream) override;
  absl::Status Rope(uint16_t* x, int64_t rows, int64_t heads, int64_t head_dim,
                    const int32_t* row_position, const runtime::RopeTable& table,
                    Stream stream) override;
  absl::Status WriteKv(const uint16_t* k, const uint16_t* v, int64_t rows,
                       const runtime::PagedKv& kv, Stream stream) override;
  absl::Status PrepareHeadsAndStoreKv(uint16_t* q, uint16_t* k, const uint16_t* v, int64_t rows,
                                      int64_t heads, const uint16_t* q_norm, const uint16_t* k_norm,
                                      float eps, float offset, const runtime::RopeTable& table,
                                      const runtime::PagedKv& kv, Stream stream) override;
  // Keeps a decode step's batch: its Attention checks that the sequences' pages (what FlashInfer
  // reads on a GPU) are the rows', then attends with the kernel's steps.
  absl::Status PlanAttention(const runtime::DecodeBatch& batch,
                             const runtime::AttentionShape& shape, int64_t positions_per_page,
                             Stream stream) override;
  absl::Status Attention(const uint16_t* q, int64_t rows, const runtime::AttentionShape& shape,
                         const runtime::PagedKv& kv, uint16_t* out, Stream stream) override;
  absl::Status GatedActivation(const uint16_t* gate, const uint16_t* up, int64_t n,
                               runtime::Activation activation, uint16_t* y, Stream stream) override;
  absl::Status Add(float* x, const float* y, int64_t n, Stream stream) override;
  absl::Status Widen(const uint16_t* in, int64_t n, float scale, float* out,
                     Stream stream) override;
  absl::Status SoftCap(float* x, int64_t n, float cap, Stream stream) override;
  absl::Status GatherRows(const char* base, const uint64_t* offsets, int64_t n, int64_t row_bytes,
                          void* out, Stream stream) override;
  absl::Status SplitColumns(const uint16_t* in, int64_t rows, int64_t in_width,
                            std::span<const ColumnRange> pieces, Stream stream) override;
  absl::Status TiledLinear(const uint16_t* x, int64_t rows, std::span<const TiledProduct> products,
                           bool y_fp32, Stream stream) override;
  absl::Status LaneLinear(const uint16_t* x, int64_t rows,
                          std::span<const codec::gpu::LaneProduct> products, bool y_fp32,
                          void* workspace, uint64_t workspace_bytes, Stream stream) override;
  absl::Status CheckTiled(Stream stream) override;

 private:
  runtime::ReferenceForwardOps reference_;
  runtime::DecodeBatch decode_;
  int64_t positions_per_page_ = 0;
};

}  // namespace df11::testing

#endif  // DF11_TESTS_RUNTIME_EMULATED_FORWARD_OPS_H_
