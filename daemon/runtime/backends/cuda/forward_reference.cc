#include "daemon/runtime/backends/cuda/forward_reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codec/base/status_macros.h"
#include "codec/format.h"
#include "codec/lane_unit.h"
#include "codec/tiled_matrix.h"
#include "daemon/runtime/backends/cuda/device/forward_steps.h"

namespace df11::runtime {
namespace {

using format::Bf16ToFloat;
using format::FloatToBf16;

using cuda::KvAt;  // the address of a row's position in this layer's keys or values

}  // namespace

absl::Status ReferenceForwardOps::Linear(const uint16_t* x, const uint16_t* w, const uint16_t* bias,
                                         int64_t rows, int64_t in, int64_t out, void* y,
                                         bool y_fp32, Stream) {
  std::vector<float> row(in);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < in; ++i) row[i] = Bf16ToFloat(x[r * in + i]);
    for (int64_t o = 0; o < out; ++o) {
      const uint16_t* wo = w + o * in;
      float sum = 0;
      for (int64_t i = 0; i < in; ++i) sum += row[i] * Bf16ToFloat(wo[i]);
      if (bias != nullptr) sum += Bf16ToFloat(bias[o]);
      if (y_fp32) {
        static_cast<float*>(y)[r * out + o] = sum;
      } else {
        static_cast<uint16_t*>(y)[r * out + o] = FloatToBf16(sum);
      }
    }
  }
  return absl::OkStatus();
}

namespace {

template <typename T>
float Value(T v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return Bf16ToFloat(v);
  }
}

template <typename T, typename Out>
void RmsNormRows(const T* x, const uint16_t* w, int64_t rows, int64_t n, float eps, float offset,
                 Out* y) {
  for (int64_t r = 0; r < rows; ++r) {
    float sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float v = Value(x[r * n + i]);
      sum += v * v;
    }
    const float scale = 1.0f / std::sqrt(sum / static_cast<float>(n) + eps);
    for (int64_t i = 0; i < n; ++i) {
      const float out = Value(x[r * n + i]) * scale * (offset + Bf16ToFloat(w[i]));
      if constexpr (std::is_same_v<Out, float>) {
        y[r * n + i] = out;
      } else {
        y[r * n + i] = FloatToBf16(out);
      }
    }
  }
}

}  // namespace

absl::Status ReferenceForwardOps::RmsNorm(const uint16_t* x, const uint16_t* w, int64_t rows,
                                          int64_t n, float eps, float offset, uint16_t* y, Stream) {
  RmsNormRows(x, w, rows, n, eps, offset, y);
  return absl::OkStatus();
}

absl::Status ReferenceForwardOps::FloatRmsNorm(const float* x, const uint16_t* w, int64_t rows,
                                               int64_t n, float eps, float offset, void* y,
                                               bool y_fp32, Stream) {
  if (y_fp32) {
    RmsNormRows(x, w, rows, n, eps, offset, static_cast<float*>(y));
  } else {
    RmsNormRows(x, w, rows, n, eps, offset, static_cast<uint16_t*>(y));
  }
  return absl::OkStatus();
}

absl::Status ReferenceForwardOps::AddRmsNorm(float* x, const float* y, const uint16_t* w,
                                             int64_t rows, int64_t n, float eps, float offset,
                                             uint16_t* out, Stream stream) {
  DF11_RETURN_IF_ERROR(Add(x, y, rows * n, stream));
  return FloatRmsNorm(x, w, rows, n, eps, offset, out, false, stream);
}

absl::Status ReferenceForwardOps::Rope(uint16_t* x, int64_t rows, int64_t heads, int64_t head_dim,
                                       const int32_t* row_position, const RopeTable& t, Stream) {
  DF11_RETURN_IF_ERROR(CheckHeads(head_dim, t.rotary_dim));
  const int64_t half = t.rotary_dim / 2;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t pos = row_position[r];
    const float* inverse = pos >= t.long_from ? t.long_inverse : t.inverse;
    for (int64_t h = 0; h < heads; ++h) {
      uint16_t* v = x + (r * heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float angle = static_cast<float>(pos) * inverse[i];
        const float cos = std::cos(angle) * t.scale, sin = std::sin(angle) * t.scale;
        const float a = Bf16ToFloat(v[i]), b = Bf16ToFloat(v[i + half]);
        v[i] = FloatToBf16(a * cos - b * sin);
        v[i + half] = FloatToBf16(b * cos + a * sin);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ReferenceForwardOps::WriteKv(const uint16_t* k, const uint16_t* v, int64_t rows,
                                          const PagedKv& kv, Stream) {
  const int64_t row = kv.kv_heads * kv.head_dim;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t pos = kv.row_position[r];
    std::memcpy(KvAt(kv, r, pos, false), k + r * row, row * 2);
    std::memcpy(KvAt(kv, r, pos, true), v + r * row, row * 2);
  }
  return absl::OkStatus();
}

absl::Status ReferenceForwardOps::PrepareHeadsAndStoreKv(
    uint16_t* q, uint16_t* k, const uint16_t* v, int64_t rows, int64_t heads,
    const uint16_t* q_norm, const uint16_t* k_norm, float eps, float offset,
    const RopeTable& table, const PagedKv& kv, Stream stream) {
  DF11_RETURN_IF_ERROR(CheckHeads(kv.head_dim, table.rotary_dim));
  const int64_t d = kv.head_dim;
  if (q_norm != nullptr) DF11_RETURN_IF_ERROR(RmsNorm(q, q_norm, rows * heads, d, eps, offset, q, stream));
  if (k_norm != nullptr) {
    DF11_RETURN_IF_ERROR(RmsNorm(k, k_norm, rows * kv.kv_heads, d, eps, offset, k, stream));
  }
  DF11_RETURN_IF_ERROR(Rope(q, rows, heads, d, kv.row_position, table, stream));
  DF11_RETURN_IF_ERROR(Rope(k, rows, kv.kv_heads, d, kv.row_position, table, stream));
  return WriteKv(k, v, rows, kv, stream);
}

absl::Status ReferenceForwardOps::Attention(const uint16_t* q, int64_t rows,
                                            const AttentionShape& s, const PagedKv& kv,
                                            uint16_t* out, Stream) {
  DF11_RETURN_IF_ERROR(CheckHeads(s.head_dim, 0));
  const int64_t d = s.head_dim, group = s.heads / s.kv_heads;
  std::vector<float> scores, acc(d);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t pos = kv.row_position[r];
    const int64_t first = s.window > 0 ? std::max<int64_t>(0, pos - s.window + 1) : 0;
    scores.resize(pos + 1 - first);
    for (int64_t h = 0; h < s.heads; ++h) {
      const uint16_t* qh = q + (r * s.heads + h) * d;
      const int64_t kvh = h / group;
      float max = -INFINITY;
      for (int64_t j = first; j <= pos; ++j) {
        const uint16_t* k = KvAt(kv, r, j, false) + kvh * d;
        float dot = 0;
        for (int64_t i = 0; i < d; ++i) dot += Bf16ToFloat(qh[i]) * Bf16ToFloat(k[i]);
        float score = dot * s.scale;
        if (s.softcap > 0) score = std::tanh(score / s.softcap) * s.softcap;
        scores[j - first] = score;
        max = std::max(max, score);
      }
      float total = 0;
      for (float& e : scores) total += e = std::exp(e - max);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = first; j <= pos; ++j) {
        const uint16_t* v = KvAt(kv, r, j, true) + kvh * d;
        const float p = scores[j - first] / total;
        for (int64_t i = 0; i < d; ++i) acc[i] += p * Bf16ToFloat(v[i]);
      }
      for (int64_t i = 0; i < d; ++i) out[(r * s.heads + h) * d + i] = FloatToBf16(acc[i]);
    }
  }
  return absl::OkStatus();
}

absl::Status ReferenceForwardOps::GatedActivation(const uint16_t* gate, const uint16_t* up,
                                                  int64_t n, Activation activation, uint16_t* y,
                                                  Stream) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = Bf16ToFloat(gate[i]);
    float a;
    if (activation == Activation::kGeluTanh) {
      constexpr float kBeta = static_cast<float>(M_SQRT2 * M_2_SQRTPI * 0.5);
      a = 0.5f * g * (1.0f + std::tanh(kBeta * (g + 0.044715f * g * g * g)));
    } else {
      a = g / (1.0f + std::exp(-g));
    }
    y[i] = FloatToBf16(a * Bf16ToFloat(up[i]));
  }
  return absl::OkStatus();
}

absl::Status ReferenceForwardOps::Add(float* x, const float* y, int64_t n, Stream) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
  return absl::OkStatus();
}

absl::Status ReferenceForwardOps::Widen(const uint16_t* in, int64_t n, float scale, float* out,
                                        Stream) {
  for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToFloat(in[i]) * scale;
  return absl::OkStatus();
}

absl::Status ReferenceForwardOps::SoftCap(float* x, int64_t n, float cap, Stream) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i] / cap) * cap;
  return absl::OkStatus();
}

absl::Status ReferenceForwardOps::GatherRows(const char* base, const uint64_t* offsets, int64_t n,
                                             int64_t row_bytes, void* out, Stream) {
  DF11_RETURN_IF_ERROR(CheckRowBytes(row_bytes));
  for (int64_t r = 0; r < n; ++r) {
    std::memcpy(static_cast<char*>(out) + r * row_bytes, base + offsets[r], row_bytes);
  }
  return absl::OkStatus();
}

absl::Status ReferenceForwardOps::SplitColumns(const uint16_t* in, int64_t rows, int64_t in_width,
                                               std::span<const ColumnRange> pieces, Stream stream) {
  for (const ColumnRange& p : pieces) {
    DF11_RETURN_IF_ERROR(CheckColumns(p.first, p.width, in_width));
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(p.out + r * p.width, in + r * in_width + p.first, p.width * sizeof(uint16_t));
    }
  }
  return absl::OkStatus();
}

absl::Status ReferenceForwardOps::TiledLinear(const uint16_t* x, int64_t rows,
                                              std::span<const TiledProduct> products, bool y_fp32,
                                              Stream stream) {
  if (rows > kMaxTiledRows) {
    return absl::InvalidArgumentError(
        absl::StrCat("TiledLinear: ", rows, " rows; at most ", kMaxTiledRows));
  }
  std::vector<uint16_t> w;
  for (const TiledProduct& p : products) {
    w.resize(uint64_t{p.w.rows} * p.w.cols);
    if (!codec::DecodeTiledView(p.w, w.data(), p.w.cols)) tiled_error_ = true;
    DF11_RETURN_IF_ERROR(
        Linear(x, w.data(), p.bias, rows, p.w.cols, p.w.rows, p.y, y_fp32, stream));
  }
  return absl::OkStatus();
}

absl::Status ReferenceForwardOps::LaneLinear(const uint16_t* x, int64_t rows,
                                             std::span<const codec::gpu::LaneProduct> products,
                                             bool y_fp32, void* workspace,
                                             uint64_t workspace_bytes, Stream stream) {
  if (workspace_bytes < codec::gpu::kLanePiecesOffset) {
    return absl::InvalidArgumentError("LaneLinear: no room for its error flag");
  }
  DF11_ASSIGN_OR_RETURN(const bool consistent, codec::MultiplyLaneProducts(
                                                   products, x, static_cast<int>(rows), y_fp32));
  if (!consistent) *static_cast<uint32_t*>(workspace) = 1;
  return absl::OkStatus();
}

absl::Status ReferenceForwardOps::CheckTiled(Stream stream) {
  if (tiled_error_.exchange(false)) {
    return absl::DataLossError(
        "tiled product: a lane's codes did not end where its stream does (corrupt tiled matrix)");
  }
  return absl::OkStatus();
}

}  // namespace df11::runtime
