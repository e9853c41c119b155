#include "tests/runtime/emulated_forward_ops.h"

#include <algorithm>
#include <memory>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codec/base/status_macros.h"
#include "daemon/runtime/backends/cuda/device/forward_steps.h"

namespace df11::testing {
namespace {

using namespace runtime::cuda;  // the kernels' steps and launch shapes

// WarpSum of forward_kernels.cuh: shuffles by 16, 8, 4, 2, 1, each lane adding the value of the
// lane its index differs from in that bit. Every lane ends with the same sum.
void WarpSum(float (&lanes)[kWarp]) {
  for (int o = kWarp / 2; o > 0; o /= 2) {
    float next[kWarp];
    for (int l = 0; l < kWarp; ++l) next[l] = lanes[l] + lanes[l ^ o];
    std::copy(next, next + kWarp, lanes);
  }
}

// BlockSum of forward_kernels.cuh over the `threads` values of a block (a multiple of kWarp, at
// most kThreads): each warp's WarpSum, its lane 0 storing it; then the first warp's WarpSum of
// those sums in warp order (zeros past the block's warps).
float BlockSum(const float* values, int threads) {
  float partial[kWarps];
  for (int w = 0; w < threads / kWarp; ++w) {
    float lanes[kWarp];
    std::copy(values + w * kWarp, values + (w + 1) * kWarp, lanes);
    WarpSum(lanes);
    partial[w] = lanes[0];
  }
  float lanes[kWarp];
  for (int l = 0; l < kWarp; ++l) lanes[l] = l < threads / kWarp ? partial[l] : 0.0f;
  WarpSum(lanes);
  return lanes[0];
}

// RmsNormKernel (AddRmsNormKernel when `add` is not null): a block of kThreads per row.
template <typename In, typename Out>
void RmsNormBlocks(In* x, const float* add, const uint16_t* w, int64_t rows, int64_t n, float eps,
                   float offset, Out* y) {
  float sums[kThreads];
  for (int64_t r = 0; r < rows; ++r) {
    In* row = x + r * n;
    for (int t = 0; t < kThreads; ++t) {
      if constexpr (std::is_same_v<In, float>) {
        sums[t] = add != nullptr ? AddSquares(row, add + r * n, n, t, kThreads)
                                 : RmsSquares(row, n, t, kThreads);
      } else {
        sums[t] = RmsSquares(row, n, t, kThreads);
      }
    }
    const float scale = RmsScale(BlockSum(sums, kThreads), n, eps);
    for (int t = 0; t < kThreads; ++t) RmsStore(row, w, n, scale, offset, y + r * n, t, kThreads);
  }
}

}  // namespace

absl::Status EmulatedForwardOps::UseWorkspace(void* device, uint64_t bytes) {
  return reference_.UseWorkspace(device, bytes);
}

absl::Status EmulatedForwardOps::Linear(const uint16_t* x, const uint16_t* w, const uint16_t* bias,
                                        int64_t rows, int64_t in, int64_t out, void* y, bool y_fp32,
                                        Stream stream) {
  // On a GPU, an fp32 output with a bias is BroadcastBias then a product adding onto it.
  if (bias != nullptr && y_fp32) {
    auto* to = static_cast<float*>(y);
    for (int64_t i = 0; i < rows * out; ++i) BroadcastBiasStep(bias, out, to, i);
    std::vector<float> product(rows * out);
    DF11_RETURN_IF_ERROR(
        reference_.Linear(x, w, nullptr, rows, in, out, product.data(), true, stream));
    for (int64_t i = 0; i < rows * out; ++i) to[i] += product[i];
    return absl::OkStatus();
  }
  return reference_.Linear(x, w, bias, rows, in, out, y, y_fp32, stream);
}

absl::Status EmulatedForwardOps::RmsNorm(const uint16_t* x, const uint16_t* w, int64_t rows,
                                         int64_t n, float eps, float offset, uint16_t* y, Stream) {
  RmsNormBlocks(x, nullptr, w, rows, n, eps, offset, y);
  return absl::OkStatus();
}

absl::Status EmulatedForwardOps::FloatRmsNorm(const float* x, const uint16_t* w, int64_t rows,
                                              int64_t n, float eps, float offset, void* y,
                                              bool y_fp32, Stream) {
  if (y_fp32) {
    RmsNormBlocks(x, nullptr, w, rows, n, eps, offset, static_cast<float*>(y));
  } else {
    RmsNormBlocks(x, nullptr, w, rows, n, eps, offset, static_cast<uint16_t*>(y));
  }
  return absl::OkStatus();
}

absl::Status EmulatedForwardOps::AddRmsNorm(float* x, const float* y, const uint16_t* w,
                                            int64_t rows, int64_t n, float eps, float offset,
                                            uint16_t* out, Stream) {
  RmsNormBlocks(x, y, w, rows, n, eps, offset, out);
  return absl::OkStatus();
}

absl::Status EmulatedForwardOps::Rope(uint16_t* x, int64_t rows, int64_t heads, int64_t head_dim,
                                      const int32_t* row_position, const runtime::RopeTable& table,
                                      Stream) {
  DF11_RETURN_IF_ERROR(runtime::CheckHeads(head_dim, table.rotary_dim));
  const int64_t n = rows * heads * (table.rotary_dim / 2);
  for (int64_t i = 0; i < n; ++i) RopeStep(x, heads, head_dim, row_position, table, i);
  return absl::OkStatus();
}

absl::Status EmulatedForwardOps::WriteKv(const uint16_t* k, const uint16_t* v, int64_t rows,
                                         const runtime::PagedKv& kv, Stream) {
  const int64_t n = rows * kv.kv_heads * kv.head_dim;
  for (int64_t i = 0; i < n; ++i) WriteKvStep(k, v, kv, i);
  return absl::OkStatus();
}

absl::Status EmulatedForwardOps::PrepareHeadsAndStoreKv(
    uint16_t* q, uint16_t* k, const uint16_t* v, int64_t rows, int64_t heads,
    const uint16_t* q_norm, const uint16_t* k_norm, float eps, float offset,
    const runtime::RopeTable& table, const runtime::PagedKv& kv, Stream) {
  DF11_RETURN_IF_ERROR(runtime::CheckHeads(kv.head_dim, table.rotary_dim));
  const int64_t d = kv.head_dim;
  for (int64_t block = 0; block < rows * (heads + kv.kv_heads); ++block) {
    const HeadOfBlock h = HeadOf(q, k, heads, kv.kv_heads, d, q_norm, k_norm, block);
    float value[runtime::kMaxHeadDim];
    for (int t = 0; t < kHeadThreads; ++t) HeadLoad(h.head, d, value, t, kHeadThreads);
    if (h.norm != nullptr) {
      float partial[kHeadWarps];
      for (int w = 0; w < kHeadWarps; ++w) {
        float lanes[kWarp];
        for (int l = 0; l < kWarp; ++l)
          lanes[l] = RmsSquares(value, d, w * kWarp + l, kHeadThreads);
        WarpSum(lanes);
        partial[w] = lanes[0];
      }
      // (the barrier)
      const float scale = RmsScale(HeadTotal(partial), d, eps);
      for (int t = 0; t < kHeadThreads; ++t) {
        HeadNormalize(value, h.norm, d, scale, offset, t, kHeadThreads);
      }
    }
    const int64_t pos = kv.row_position[h.row];
    for (int t = 0; t < kHeadThreads; ++t) HeadRotate(value, table, pos, t, kHeadThreads);
    for (int t = 0; t < kHeadThreads; ++t) HeadStore(h, value, v, kv, t, kHeadThreads);
  }
  return absl::OkStatus();
}

absl::Status EmulatedForwardOps::PlanAttention(const runtime::DecodeBatch& batch,
                                               const runtime::AttentionShape& shape,
                                               int64_t positions_per_page, Stream) {
  decode_ = batch;
  positions_per_page_ = positions_per_page;
  return absl::OkStatus();
}

absl::Status EmulatedForwardOps::Attention(const uint16_t* q, int64_t rows,
                                           const runtime::AttentionShape& shape,
                                           const runtime::PagedKv& kv, uint16_t* out, Stream) {
  DF11_RETURN_IF_ERROR(runtime::CheckHeads(shape.head_dim, 0));
  if (decode_.sequences == rows) {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t pages = kv.page_indptr[r + 1] - kv.page_indptr[r];
      const int64_t last = kv.last_page_length[r];
      const int64_t length = (pages - 1) * positions_per_page_ + last;
      if (decode_.page_indptr[r] != kv.page_indptr[r] ||
          decode_.page_indptr[r + 1] != kv.page_indptr[r + 1] ||
          kv.page_indptr[r] != kv.row_first_page[r] || length != kv.row_position[r] + 1 ||
          last < 1 || last > positions_per_page_) {
        return absl::InternalError(
            absl::StrCat("decode step, row ", r, ": pages from ", kv.page_indptr[r], " (", pages,
                         ", the last holding ", last, " positions) for a row at ",
                         kv.row_position[r], " whose pages start at ", kv.row_first_page[r]));
      }
    }
  }
  auto warps = std::make_unique<AttentionWarps>();  // the block's shared memory
  for (int64_t block = 0; block < rows * shape.heads; ++block) {
    const AttentionOfBlock b = AttentionOf(shape, kv, block);
    for (int warp = 0; warp < kWarps; ++warp) {
      AttentionLane lanes[kWarp];
      for (int l = 0; l < kWarp; ++l) AttentionStart(q, shape, b, l, lanes[l]);
      for (int64_t j = b.first + warp; j <= b.last; j += kWarps) {
        float dot[kWarp];
        for (int l = 0; l < kWarp; ++l) dot[l] = AttentionDotPart(lanes[l], shape, kv, b, j, l);
        WarpSum(dot);
        for (int l = 0; l < kWarp; ++l) AttentionAccumulate(lanes[l], dot[l], shape, kv, b, j, l);
      }
      for (int l = 0; l < kWarp; ++l) AttentionPublish(lanes[l], shape.head_dim, warp, l, *warps);
    }
    // (the barrier)
    uint16_t* to = out + (b.row * shape.heads + b.head) * shape.head_dim;
    for (int t = 0; t < kThreads; ++t) {
      for (int64_t i = t; i < shape.head_dim; i += kThreads) {
        StoreValue(to, i, AttentionMerged(*warps, i));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status EmulatedForwardOps::GatedActivation(const uint16_t* gate, const uint16_t* up,
                                                 int64_t n, runtime::Activation activation,
                                                 uint16_t* y, Stream) {
  const bool gelu_tanh = activation == runtime::Activation::kGeluTanh;
  for (int64_t i = 0; i < n; ++i) GatedActivationStep(gate, up, gelu_tanh, y, i);
  return absl::OkStatus();
}

absl::Status EmulatedForwardOps::Add(float* x, const float* y, int64_t n, Stream) {
  for (int64_t i = 0; i < n; ++i) AddStep(x, y, i);
  return absl::OkStatus();
}

absl::Status EmulatedForwardOps::Widen(const uint16_t* in, int64_t n, float scale, float* out,
                                       Stream) {
  for (int64_t i = 0; i < n; ++i) WidenStep(in, scale, out, i);
  return absl::OkStatus();
}

absl::Status EmulatedForwardOps::SoftCap(float* x, int64_t n, float cap, Stream) {
  for (int64_t i = 0; i < n; ++i) SoftCapStep(x, cap, i);
  return absl::OkStatus();
}

absl::Status EmulatedForwardOps::GatherRows(const char* base, const uint64_t* offsets, int64_t n,
                                            int64_t row_bytes, void* out, Stream) {
  DF11_RETURN_IF_ERROR(runtime::CheckRowBytes(row_bytes));
  for (int64_t row = 0; row < n; ++row) {
    for (int t = 0; t < kThreads; ++t) {
      GatherRowStep(base, offsets, row_bytes / 2, static_cast<uint16_t*>(out), row, t, kThreads);
    }
  }
  return absl::OkStatus();
}

absl::Status EmulatedForwardOps::SplitColumns(const uint16_t* in, int64_t rows, int64_t in_width,
                                              std::span<const ColumnRange> pieces, Stream) {
  for (const ColumnRange& p : pieces) {
    DF11_RETURN_IF_ERROR(runtime::CheckColumns(p.first, p.width, in_width));
    for (int64_t i = 0; i < rows * p.width; ++i) {
      SplitColumnsStep(in, in_width, p.first, p.width, p.out, i);
    }
  }
  return absl::OkStatus();
}

absl::Status EmulatedForwardOps::TiledLinear(const uint16_t* x, int64_t rows,
                                             std::span<const TiledProduct> products, bool y_fp32,
                                             Stream stream) {
  return reference_.TiledLinear(x, rows, products, y_fp32, stream);
}

absl::Status EmulatedForwardOps::LaneLinear(const uint16_t* x, int64_t rows,
                                            std::span<const codec::gpu::LaneProduct> products,
                                            bool y_fp32, void* workspace, uint64_t workspace_bytes,
                                            Stream stream) {
  return reference_.LaneLinear(x, rows, products, y_fp32, workspace, workspace_bytes, stream);
}

absl::Status EmulatedForwardOps::CheckTiled(Stream stream) { return reference_.CheckTiled(stream); }

}  // namespace df11::testing
