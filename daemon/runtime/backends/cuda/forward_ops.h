// The operations of the forward pass on device memory that the CUDA backend enqueues, and what
// each computes. The residual stream is fp32 [rows][hidden]; the other activations are BF16
// [rows][n] row-major, each operation computing in fp32 and rounding its BF16 result (to nearest
// even) once, at its end; logits are fp32. KV pages follow KvPagePool's layout. No CUDA type
// appears here.
//
// ReferenceForwardOps (forward_reference.h) computes every operation on the host and is the
// definition of their results. The CUDA kernels (device/forward_ops.cu) are checked against it on
// a GPU, and their per-thread steps (device/forward_steps.h) on the host, by the tests' emulated
// device.
#ifndef DF11_DAEMON_RUNTIME_BACKENDS_CUDA_FORWARD_OPS_H_
#define DF11_DAEMON_RUNTIME_BACKENDS_CUDA_FORWARD_OPS_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "codec/cuda/lane_steps.h"
#include "codec/cuda/tiled_steps.h"
#include "daemon/runtime/engine/model_config.h"
#include "daemon/runtime/engine/rotary_embedding.h"

namespace df11::runtime {

// A RotaryEmbedding as a kernel takes it (by value): head_dim up to 256.
struct RopeTable {
  static constexpr int kMaxFrequencies = 128;
  int32_t rotary_dim = 0;
  float scale = 1.0f;
  int64_t long_from = 0;  // positions from here on use long_inverse
  float inverse[kMaxFrequencies] = {};
  float long_inverse[kMaxFrequencies] = {};
  // kInvalidArgument when rotary_dim / 2 exceeds kMaxFrequencies.
  static absl::StatusOr<RopeTable> Of(const RotaryEmbedding& rope, int64_t rotary_dim);
};

// Where the rows of one forward step keep their keys and values, for one layer: row r belongs to
// a sequence whose pages are pages[row_first_page[r]], ... in position order, and sits at
// position row_position[r]. A page holds positions_per_page positions of every layer:
// [layer 0 keys][layer 0 values][layer 1 keys] ..., each positions_per_page x kv_heads x head_dim
// BF16 values.
struct PagedKv {
  char* pool = nullptr;  // the KV pool's first byte (device)
  uint64_t page_bytes = 0;
  int64_t positions_per_page = 0;
  int64_t layer = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  const uint32_t* pages = nullptr;          // device
  const int32_t* row_first_page = nullptr;  // device, per row
  const int32_t* row_position = nullptr;    // device, per row
  // Per sequence (device), filled for every pass: its pages are [page_indptr[i],
  // page_indptr[i + 1]) of `pages` (S + 1 offsets), the last of them holding last_page_length[i]
  // positions. What FlashInfer reads; a decode step's row i is sequence i.
  const int32_t* page_indptr = nullptr;
  const int32_t* last_page_length = nullptr;

  // Bytes from a page's start to position `slot` (< positions_per_page) of this layer's keys;
  // the values follow the keys. The one definition of the layout, for the host and the kernels.
  DF11_HOST_DEVICE uint64_t KeyOffset(int64_t slot) const {
    const uint64_t plane = uint64_t(positions_per_page) * kv_heads * head_dim * 2;
    return 2 * plane * layer + uint64_t(slot) * kv_heads * head_dim * 2;
  }
  DF11_HOST_DEVICE uint64_t ValueOffset(int64_t slot) const {
    return KeyOffset(slot) + uint64_t(positions_per_page) * kv_heads * head_dim * 2;
  }
};

// The largest head the kernels take (RopeTable rotates up to 2 * kMaxFrequencies dimensions).
inline constexpr int64_t kMaxHeadDim = 256;

struct AttentionShape {
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t window = 0;  // 0: full attention; else the positions p - window + 1 .. p
  float scale = 0.0f;
  float softcap = 0.0f;  // 0: none
};

// The sequences of a decode step, one row each, on the host: sequence i holds pages
// [page_indptr[i], page_indptr[i + 1]) of the pass's page list (PagedKv::pages); the same offsets
// are in device memory as PagedKv::page_indptr.
struct DecodeBatch {
  int64_t sequences = 0;
  const int32_t* page_indptr = nullptr;
};

// The checks every ForwardOps makes of its arguments, kInvalidArgument naming the numbers: heads
// of head_dim (rotating rotary_dim of them) the kernels take; GatherRows' rows of row_bytes bytes
// (an even number); a SplitColumns piece inside rows of in_width.
absl::Status CheckHeads(int64_t head_dim, int64_t rotary_dim);
absl::Status CheckRowBytes(int64_t row_bytes);
absl::Status CheckColumns(int64_t first, int64_t width, int64_t in_width);

class ForwardOps {
 public:
  using Stream = void*;  // GpuDevice::Stream
  virtual ~ForwardOps() = default;

  // Device memory the operations may use as scratch (the matrix library's workspace), from the
  // backend's arena; called once, before any operation.
  virtual absl::Status UseWorkspace(void* device, uint64_t bytes) = 0;

  // y[rows][out] = x[rows][in] · w[out][in]ᵀ (+ bias[out] when not null), summed in fp32; y is
  // BF16, or fp32 when y_fp32.
  virtual absl::Status Linear(const uint16_t* x, const uint16_t* w, const uint16_t* bias,
                              int64_t rows, int64_t in, int64_t out, void* y, bool y_fp32,
                              Stream stream) = 0;
  // Per row of n: y = x · rsqrt(mean(x²) + eps) · (offset + w); y may be x. FloatRmsNorm reads
  // fp32 (the residual stream, or a projection's fp32 output) and writes BF16, or fp32 when
  // y_fp32.
  virtual absl::Status RmsNorm(const uint16_t* x, const uint16_t* w, int64_t rows, int64_t n,
                               float eps, float offset, uint16_t* y, Stream stream) = 0;
  virtual absl::Status FloatRmsNorm(const float* x, const uint16_t* w, int64_t rows, int64_t n,
                                    float eps, float offset, void* y, bool y_fp32,
                                    Stream stream) = 0;
  // x += y, then out = RMSNorm(x) · (offset + w) per row of n, out BF16: a block's output joins
  // the residual stream and the next block's input is normalised, in one pass over x.
  virtual absl::Status AddRmsNorm(float* x, const float* y, const uint16_t* w, int64_t rows,
                                  int64_t n, float eps, float offset, uint16_t* out,
                                  Stream stream) = 0;
  // Rotates the first rotary_dim dimensions of each of the `heads` heads of every row (half-split
  // layout) for the row's position, in place.
  virtual absl::Status Rope(uint16_t* x, int64_t rows, int64_t heads, int64_t head_dim,
                            const int32_t* row_position, const RopeTable& table, Stream stream) = 0;
  // Stores each row's keys and values (kv_heads x head_dim) at its position in its pages.
  virtual absl::Status WriteKv(const uint16_t* k, const uint16_t* v, int64_t rows,
                               const PagedKv& kv, Stream stream) = 0;
  // The heads of one step before attention, in one launch: each head of q (rows x heads) and of k
  // (rows x kv_heads) normalised with q_norm / k_norm when they are not null (RmsNorm over
  // head_dim, rounded to BF16), then rotated (Rope), in place; then each row's keys and values
  // stored in its pages (WriteKv). What RmsNorm, Rope and WriteKv give one after another.
  virtual absl::Status PrepareHeadsAndStoreKv(uint16_t* q, uint16_t* k, const uint16_t* v,
                                              int64_t rows, int64_t heads,
                                              const uint16_t* q_norm, const uint16_t* k_norm,
                                              float eps, float offset, const RopeTable& table,
                                              const PagedKv& kv, Stream stream) = 0;
  // Called at the start of every pass, before its first Attention: a decode step's sequences
  // (`batch`, and the model's heads in `shape`), or a batch of no sequences for any other pass.
  // An implementation may plan the step's attention once for all its layers (FlashInfer's split
  // of the KV across blocks); the default does nothing.
  virtual absl::Status PlanAttention(const DecodeBatch& batch, const AttentionShape& shape,
                                     int64_t positions_per_page, Stream stream) {
    return absl::OkStatus();
  }
  // Each row's query heads attend to its sequence's positions up to its own (causal, within
  // the window), read from the pages after WriteKv: softmax(scale · q·k, soft-capped) · v, a
  // query head h reading KV head h / (heads / kv_heads). out: rows x heads x head_dim.
  virtual absl::Status Attention(const uint16_t* q, int64_t rows, const AttentionShape& shape,
                                 const PagedKv& kv, uint16_t* out, Stream stream) = 0;
  // y[i] = act(gate[i]) · up[i] for i < n.
  virtual absl::Status GatedActivation(const uint16_t* gate, const uint16_t* up, int64_t n,
                                       Activation activation, uint16_t* y, Stream stream) = 0;
  // For i < n: x[i] += y[i] (fp32: the residual stream and a projection's output); out[i] =
  // scale · in[i] (BF16 to fp32); and x[i] = cap · tanh(x[i] / cap).
  virtual absl::Status Add(float* x, const float* y, int64_t n, Stream stream) = 0;
  virtual absl::Status Widen(const uint16_t* in, int64_t n, float scale, float* out,
                             Stream stream) = 0;
  virtual absl::Status SoftCap(float* x, int64_t n, float cap, Stream stream) = 0;

  // Row r of out (row_bytes bytes, an even number) = the row_bytes bytes at base + offsets[r], for
  // r < n; offsets is device memory. Gathers a pass's embedding rows, and each sequence's last
  // row, in one launch.
  virtual absl::Status GatherRows(const char* base, const uint64_t* offsets, int64_t n,
                                  int64_t row_bytes, void* out, Stream stream) = 0;

  // Columns [first, first + width) of in[rows][in_width] into out[rows][width], for each piece:
  // the outputs of one product of concatenated weights (q, k and v; gate and up) back into
  // buffers of their own.
  struct ColumnRange {
    int64_t first = 0;
    int64_t width = 0;
    uint16_t* out = nullptr;
  };
  virtual absl::Status SplitColumns(const uint16_t* in, int64_t rows, int64_t in_width,
                                    std::span<const ColumnRange> pieces, Stream stream) = 0;

  // One product of TiledLinear: y[rows][w.rows] = x[rows][w.cols] · wᵀ (+ bias[w.rows] when not
  // null), w a tiled matrix in device memory (codec::TiledMatrix); y BF16, or fp32 when y_fp32.
  struct TiledProduct {
    codec::gpu::TiledView w;
    const uint16_t* bias = nullptr;
    void* y = nullptr;
  };
  static constexpr int64_t kMaxTiledRows = 8;
  // Every product of `products` from the same x, rows <= kMaxTiledRows, in one launch: what
  // Linear gives on the decoded weights (the sums may run in another order), decoding the
  // weights inside the product (codec/gpu_tiled.h), so no decoded weight reaches memory.
  virtual absl::Status TiledLinear(const uint16_t* x, int64_t rows,
                                   std::span<const TiledProduct> products, bool y_fp32,
                                   Stream stream) = 0;
  // The products of `products` from the same x (rows <= kMaxTiledRows, BF16, row length the
  // products' cols), each decoded from its lane-stream unit inside the product
  // (codec::gpu::LaneGemv): what Linear gives on the decoded weights, summed in another order.
  // `workspace` (device memory of codec::gpu::LaneGemvWorkspace bytes) holds the row pieces and,
  // at its start, an error flag that is not cleared: the caller clears it before a pass and
  // reads it after (GpuDevice::kDecodeErrorOffset).
  virtual absl::Status LaneLinear(const uint16_t* x, int64_t rows,
                                  std::span<const codec::gpu::LaneProduct> products, bool y_fp32,
                                  void* workspace, uint64_t workspace_bytes, Stream stream) = 0;
  // Waits for `stream`; kDataLoss if a tiled matrix of a TiledLinear since the last call had
  // codes inconsistent with its index (its products are then not to be used).
  virtual absl::Status CheckTiled(Stream stream) = 0;
};

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_BACKENDS_CUDA_FORWARD_OPS_H_
