#include "codec/lane_unit.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "codec/base/status_macros.h"
#include "codec/format.h"
#include "codec/huffman.h"

namespace df11::codec {
namespace {

using gpu::kLaneGroup;
using gpu::kLaneSegment;
using gpu::kLaneSteps;
using gpu::kLaneWarp;
using gpu::kLaneWeights;

using format::Exponent;
using format::SignMantissa;

// The element that lane `lane` codes at step `step` of segment `segment`.
constexpr uint64_t ElementOf(uint64_t segment, int lane, int step) {
  return segment * kLaneSegment + uint64_t(step / kLaneWeights) * kLaneGroup +
         uint64_t(lane) * kLaneWeights + step % kLaneWeights;
}

// MSB-first bits into 32-bit words.
class BitWriter {
 public:
  explicit BitWriter(std::vector<uint32_t>& words) : words_(words) { words_.clear(); }
  void Put(uint32_t value, int length) {
    acc_ = acc_ << length | value;
    held_ += length;
    if (held_ >= 32) {
      held_ -= 32;
      words_.push_back(static_cast<uint32_t>(acc_ >> held_));
      acc_ &= (uint64_t{1} << held_) - 1;
    }
  }
  void Flush() {
    if (held_ > 0) words_.push_back(static_cast<uint32_t>(acc_ << (32 - held_)));
    held_ = 0;
    acc_ = 0;
  }

 private:
  std::vector<uint32_t>& words_;
  uint64_t acc_ = 0;
  int held_ = 0;
};

// Runs body(begin, end) over [0, n) on `pool`, or on this thread without one.
template <typename Body>
void ForRange(ThreadPool* pool, size_t n, size_t grain, Body body) {
  if (pool == nullptr) {
    if (n > 0) body(size_t{0}, n);
    return;
  }
  pool->ParallelFor(n, grain, body);
}

}  // namespace

absl::StatusOr<LaneUnit> LaneUnit::Build(std::span<const uint16_t> values, ThreadPool* pool) {
  const uint64_t n = values.size();
  if (n == 0 || n > (uint64_t{1} << 40)) {
    return absl::InvalidArgumentError(absl::StrCat("a lane-stream unit of ", n, " weights"));
  }
  LaneUnit u;
  u.n_ = n;
  // The exponents' histogram, then the code.
  SharedHistogram histogram;
  ForRange(pool, n, 1 << 20, [&](size_t begin, size_t end) {
    Histogram local{};
    CountExponents(values.subspan(begin, end - begin), local);
    histogram.Add(local);
  });
  u.code_ = ExponentCode::Choose(histogram.Total(), gpu::kLaneCodeBits, gpu::kLaneTableEntries - 1);
  const ExponentCode& code = u.code_;
  for (int s = 0; s <= code.m; ++s) {
    const int length = code.lengths[s];
    const uint32_t entry = s < code.m ? gpu::LaneEntry(length, code.exponents[s])
                                      : uint32_t(length) << 16 | gpu::kLaneEscape;
    const uint32_t first = code.values[s] << (gpu::kLaneCodeBits - length);
    const uint32_t last = (code.values[s] + 1) << (gpu::kLaneCodeBits - length);
    for (uint32_t p = first; p < last; ++p) u.table_[p] = entry;
  }

  const uint64_t segments = (n + kLaneSegment - 1) / kLaneSegment;
  u.sign_mantissa_.assign(segments * kLaneSegment + kSignMantissaTail, 0);
  ForRange(pool, n, 1 << 20, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) u.sign_mantissa_[i] = SignMantissa(values[i]);
  });
  // Each segment's rows: its lanes' streams, padded to the longest. Past the last weight, the
  // most frequent exponent (the shortest code) fills the last segment.
  const uint8_t filler = code.exponents.front();
  std::vector<std::vector<uint32_t>> rows(segments);
  ForRange(pool, segments, 16, [&](size_t begin, size_t end) {
    std::vector<uint32_t> lane_words[kLaneWarp];
    for (size_t g = begin; g < end; ++g) {
      size_t longest = 0;
      for (int l = 0; l < kLaneWarp; ++l) {
        BitWriter w(lane_words[l]);
        for (int s = 0; s < kLaneSteps; ++s) {
          const uint64_t i = ElementOf(g, l, s);
          const uint8_t e = i < n ? Exponent(values[i]) : filler;
          w.Put(code.value_of[e], code.length_of[e]);
          if (code.escaped(e)) w.Put(e, 8);
        }
        w.Flush();
        longest = std::max(longest, lane_words[l].size());
      }
      rows[g].assign(longest * kLaneWarp, 0);
      for (int l = 0; l < kLaneWarp; ++l) {
        for (size_t k = 0; k < lane_words[l].size(); ++k) rows[g][k * kLaneWarp + l] = lane_words[l][k];
      }
    }
  });
  u.segment_words_.resize(segments + 1);
  uint64_t total = 0;
  for (uint64_t g = 0; g < segments; ++g) {
    u.segment_words_[g] = static_cast<uint32_t>(total);
    total += rows[g].size();
  }
  if (total > UINT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("a lane-stream unit of ", total, " words"));
  }
  u.segment_words_[segments] = static_cast<uint32_t>(total);
  u.words_.resize(total);
  ForRange(pool, segments, 16, [&](size_t begin, size_t end) {
    for (size_t g = begin; g < end; ++g) {
      std::copy(rows[g].begin(), rows[g].end(), u.words_.begin() + u.segment_words_[g]);
    }
  });
  return u;
}

absl::StatusOr<LaneUnit> LaneUnit::FromDf11(const UnitDecoder& decoder, ThreadPool* pool) {
  std::vector<uint16_t> values(decoder.unit().num_elements());
  DF11_RETURN_IF_ERROR(decoder.Decode(values, pool));
  return Build(values, pool);
}

uint64_t LaneUnit::stored_bytes() const {
  return words_.size() * sizeof(uint32_t) + segment_words_.size() * sizeof(uint32_t) +
         table_.size() * sizeof(uint32_t) + n_;
}

absl::Status LaneUnit::Decode(std::span<uint16_t> out) const {
  if (out.size() != n_) {
    return absl::InvalidArgumentError(
        absl::StrCat("LaneUnit::Decode: ", out.size(), " outputs for ", n_, " weights"));
  }
  // The code by (length, value): an independent reading of the layout, not the kernel's table.
  std::array<std::array<int, 256>, gpu::kLaneCodeBits + 1> symbol_of;
  for (auto& row : symbol_of) row.fill(-1);
  for (int s = 0; s <= code_.m; ++s) symbol_of[code_.lengths[s]][code_.values[s]] = s;
  for (uint32_t g = 0; g < num_segments(); ++g) {
    if (!gpu::LaneSegmentSound(segment_words_[g], segment_words_[g + 1])) {
      return absl::DataLossError(absl::StrCat("lane-stream segment ", g, ": words [",
                                              segment_words_[g], ", ", segment_words_[g + 1],
                                              ") are not its rows"));
    }
    const uint32_t* base = words_.data() + segment_words_[g];
    const uint32_t rows = (segment_words_[g + 1] - segment_words_[g]) / kLaneWarp;
    uint64_t longest = 0;
    for (int l = 0; l < kLaneWarp; ++l) {
      uint64_t bit = 0;  // of the lane's stream
      auto read = [&](int length) -> absl::StatusOr<uint32_t> {
        uint32_t v = 0;
        for (int i = 0; i < length; ++i, ++bit) {
          if (bit >= uint64_t{rows} * 32) {
            return absl::DataLossError(absl::StrCat("lane-stream segment ", g, ", lane ", l,
                                                    ": codes past its ", rows, " rows"));
          }
          const uint32_t word = base[(bit / 32) * kLaneWarp + l];
          v = v << 1 | ((word >> (31 - bit % 32)) & 1);
        }
        return v;
      };
      for (int s = 0; s < kLaneSteps; ++s) {
        int symbol = -1;
        uint32_t value = 0;
        for (int length = 1; length <= gpu::kLaneCodeBits && symbol < 0; ++length) {
          DF11_ASSIGN_OR_RETURN(const uint32_t b, read(1));
          value = value << 1 | b;
          symbol = symbol_of[length][value];
        }
        if (symbol < 0) {
          return absl::DataLossError(
              absl::StrCat("lane-stream segment ", g, ", lane ", l, ": no code"));
        }
        uint32_t exponent = 0;
        if (symbol == code_.m) {
          DF11_ASSIGN_OR_RETURN(exponent, read(8));
        } else {
          exponent = code_.exponents[symbol];
        }
        const uint64_t i = ElementOf(g, l, s);
        if (i >= n_) continue;
        const uint8_t sm = sign_mantissa_[i];
        out[i] = format::JoinBf16(static_cast<uint8_t>(exponent), sm);
      }
      longest = std::max(longest, bit);
    }
    if (!gpu::LaneRowsTight(static_cast<uint32_t>(longest), rows)) {
      return absl::DataLossError(absl::StrCat("lane-stream segment ", g, ": ", rows,
                                              " rows for a longest lane of ", longest, " bits"));
    }
  }
  return absl::OkStatus();
}

gpu::LaneView LaneUnit::view(uint16_t* out) const {
  return gpu::LaneView{.words = words_.data(),
                       .segment_words = segment_words_.data(),
                       .sign_mantissa = sign_mantissa_.data(),
                       .table = table_.data(),
                       .out = out,
                       .n_elements = n_,
                       .first_segment = 0,
                       .n_segments = num_segments()};
}

bool DecodeLaneView(const gpu::LaneView& view) {
  bool ok = true;
  for (uint32_t k = 0; k < view.n_segments; ++k) {
    const uint32_t g = view.first_segment + k;
    if (!gpu::LaneSegmentSound(view.segment_words[g], view.segment_words[g + 1])) {
      ok = false;
      continue;
    }
    const uint32_t* segment = view.words + view.segment_words[g];
    const uint32_t rows = (view.segment_words[g + 1] - view.segment_words[g]) / kLaneWarp;
    uint32_t longest = 0;
    for (int lane = 0; lane < kLaneWarp; ++lane) {
      gpu::LaneState s;
      gpu::LaneStart(s, segment, rows, lane);
      const uint8_t* sm = view.sign_mantissa + uint64_t{g} * kLaneSegment + lane * kLaneWeights;
      for (int j = 0; j < gpu::kLaneGroups; ++j) {
        uint32_t sm_words[2];  // the kernel's 8-byte load
        std::memcpy(sm_words, sm + uint64_t(j) * kLaneGroup, 8);
        uint32_t pairs[4];
        gpu::LaneGroup(s, view.table, segment, rows, lane, sm_words[0], sm_words[1], pairs);
        if (view.out == nullptr) continue;
        const uint64_t first = uint64_t{g} * kLaneSegment + uint64_t(j) * kLaneGroup +
                               uint64_t(lane) * kLaneWeights;
        uint16_t* to = view.out + (first - uint64_t{view.first_segment} * kLaneSegment);
        for (int i = 0; i < kLaneWeights; ++i) {
          if (first + i < view.n_elements) {
            to[i] = static_cast<uint16_t>(pairs[i / 2] >> (16 * (i % 2)));
          }
        }
      }
      ok &= gpu::LaneFits(s, rows);
      longest = std::max(longest, s.consumed);
    }
    ok &= gpu::LaneRowsTight(longest, rows);
  }
  return ok;
}

bool LaneProductSupported(uint64_t first_element, uint64_t rows, uint64_t cols) {
  return rows > 0 && cols > 0 && cols % kLaneGroup == 0 && first_element % kLaneGroup == 0 &&
         rows <= UINT32_MAX && cols <= UINT32_MAX;
}

absl::Status CheckLaneDecodeLaunch(std::span<const gpu::LaneView> views, uint64_t workspace_bytes) {
  if (views.empty() || views.size() > gpu::kMaxLaneViews) {
    return absl::InvalidArgumentError(absl::StrCat("a lane decode launch of ", views.size(),
                                                   " views; 1 to ", gpu::kMaxLaneViews));
  }
  if (workspace_bytes < gpu::LaneWorkspaceBytes()) {
    return absl::InvalidArgumentError(absl::StrCat("a lane decode launch with a workspace of ",
                                                   workspace_bytes, " bytes; ",
                                                   gpu::LaneWorkspaceBytes(), " needed"));
  }
  uint64_t total = 0;
  for (size_t i = 0; i < views.size(); ++i) {
    const gpu::LaneView& v = views[i];
    if (reinterpret_cast<uintptr_t>(v.out) % 16 != 0 ||
        reinterpret_cast<uintptr_t>(v.sign_mantissa) % 8 != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("lane decode view ", i,
                       ": outputs must be 16-byte aligned and sign/mantissa bytes 8-byte aligned"));
    }
    // The unit's segments: those that hold one of its n_elements weights.
    const uint64_t unit_segments = (v.n_elements + kLaneSegment - 1) / kLaneSegment;
    if (uint64_t{v.first_segment} + v.n_segments > unit_segments) {
      return absl::InvalidArgumentError(
          absl::StrCat("lane decode view ", i, ": segments [", v.first_segment, ", ",
                       uint64_t{v.first_segment} + v.n_segments, ") of a unit of ", unit_segments));
    }
    total += v.n_segments;
  }
  if (total >= (uint64_t{1} << 31)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a lane decode launch of ", total, " segments; under 2^31"));
  }
  return absl::OkStatus();
}

absl::Status CheckLaneProducts(std::span<const gpu::LaneProduct> products, int columns) {
  if (products.empty() || products.size() > gpu::kMaxLaneProducts) {
    return absl::InvalidArgumentError(absl::StrCat("a lane product launch of ", products.size(),
                                                   " products; 1 to ", gpu::kMaxLaneProducts));
  }
  if (columns < 1 || columns > gpu::kLaneMaxColumns) {
    return absl::InvalidArgumentError(absl::StrCat("a lane product launch of ", columns,
                                                   " columns; 1 to ", gpu::kLaneMaxColumns));
  }
  uint64_t segments = 0;
  for (size_t i = 0; i < products.size(); ++i) {
    const gpu::LaneProduct& p = products[i];
    const uint64_t n = p.unit.n_elements;
    if (!LaneProductSupported(p.first_element, p.rows, p.cols) || p.cols != products[0].cols ||
        p.first_element > n || uint64_t{p.rows} * p.cols > n - p.first_element) {
      return absl::InvalidArgumentError(
          absl::StrCat("lane product ", i, ": ", p.rows, " x ", p.cols, " weights from ",
                       p.first_element, " of a unit of ", n, " is not one the kernel takes"));
    }
    segments += gpu::LaneProductSegments(p);
  }
  if (segments >= (uint64_t{1} << 31)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a lane product launch of ", segments, " segments; under 2^31"));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> MultiplyLaneProducts(std::span<const gpu::LaneProduct> products,
                                          const uint16_t* x, int columns, bool y_fp32) {
  if (products.empty()) return true;
  DF11_RETURN_IF_ERROR(CheckLaneProducts(products, columns));
  bool ok = true;
  for (const gpu::LaneProduct& p : products) {
    const uint32_t per_row = gpu::LanePiecesPerRow(p.cols);
    std::vector<float> pieces(uint64_t{p.rows} * per_row * columns, 0.0f);
    const uint64_t end = p.first_element + uint64_t{p.rows} * p.cols;
    const uint64_t first = gpu::LaneProductFirstSegment(p);
    for (uint64_t g = first; g < first + gpu::LaneProductSegments(p); ++g) {
      const gpu::LaneView& v = p.unit;
      if (!gpu::LaneSegmentSound(v.segment_words[g], v.segment_words[g + 1])) {
        ok = false;
        continue;
      }
      const uint32_t* segment = v.words + v.segment_words[g];
      const uint32_t rows = (v.segment_words[g + 1] - v.segment_words[g]) / kLaneWarp;
      // Every lane's state and accumulators side by side, as the warp holds them; the warp's
      // groups in order, all lanes through one group before the next (the row runs are the
      // warp's).
      gpu::LaneState state[kLaneWarp];
      float acc[kLaneWarp][gpu::kLaneMaxColumns] = {};
      for (int l = 0; l < kLaneWarp; ++l) gpu::LaneStart(state[l], segment, rows, l);
      int64_t row = -1;  // of the run being summed
      auto flush = [&] {
        if (row < 0) return;
        for (int c = 0; c < columns; ++c) {
          // The kernel's butterfly (shuffles by 16, 8, 4, 2, 1); every lane ends with lane 0's.
          float lane_sum[kLaneWarp];
          for (int l = 0; l < kLaneWarp; ++l) lane_sum[l] = acc[l][c];
          for (int o = kLaneWarp / 2; o > 0; o /= 2) {
            float next[kLaneWarp];
            for (int l = 0; l < kLaneWarp; ++l) next[l] = lane_sum[l] + lane_sum[l ^ o];
            std::copy(next, next + kLaneWarp, lane_sum);
          }
          const uint64_t k = g - gpu::LaneFirstSegmentOfRow(p.first_element, p.cols, row);
          pieces[(uint64_t(row) * per_row + k) * columns + c] = lane_sum[0];
          for (int l = 0; l < kLaneWarp; ++l) acc[l][c] = 0;
        }
        row = -1;
      };
      for (int j = 0; j < gpu::kLaneGroups; ++j) {
        const uint64_t e0 = g * kLaneSegment + uint64_t(j) * kLaneGroup;
        const bool inside = e0 >= p.first_element && e0 < end;
        const int64_t group_row = inside ? int64_t((e0 - p.first_element) / p.cols) : -1;
        if (group_row != row) flush();
        for (int l = 0; l < kLaneWarp; ++l) {
          uint32_t sm[2];
          std::memcpy(sm, v.sign_mantissa + e0 + uint64_t(l) * kLaneWeights, 8);
          uint32_t pairs[4];
          gpu::LaneGroup(state[l], v.table, segment, rows, l, sm[0], sm[1], pairs);
          if (!inside) continue;
          const uint32_t col = static_cast<uint32_t>((e0 - p.first_element) % p.cols) +
                               uint32_t(l) * kLaneWeights;
          gpu::LaneMultiply(pairs, x, p.cols, col, columns, acc[l]);
        }
        if (inside) row = group_row;
      }
      flush();
      uint32_t longest = 0;
      for (int l = 0; l < kLaneWarp; ++l) {
        ok &= gpu::LaneFits(state[l], rows);
        longest = std::max(longest, state[l].consumed);
      }
      ok &= gpu::LaneRowsTight(longest, rows);
    }
    // The second launch: each row's pieces in segment order, plus the bias.
    for (uint32_t t = 0; t < p.rows; ++t) {
      const uint64_t s0 = gpu::LaneFirstSegmentOfRow(p.first_element, p.cols, t);
      const uint64_t s1 = gpu::LaneLastSegmentOfRow(p.first_element, p.cols, t);
      for (int c = 0; c < columns; ++c) {
        const float bias = p.bias != nullptr ? format::Bf16ToFloat(p.bias[t]) : 0.0f;
        const float y = gpu::LaneSumPieces(&pieces[(uint64_t{t} * per_row) * columns + c],
                                           static_cast<uint32_t>(s1 - s0 + 1), columns, bias);
        const uint64_t at = uint64_t(c) * p.rows + t;
        if (y_fp32) {
          static_cast<float*>(p.y)[at] = y;
        } else {
          static_cast<uint16_t*>(p.y)[at] = format::FloatToBf16(y);
        }
      }
    }
  }
  return ok;
}

}  // namespace df11::codec
