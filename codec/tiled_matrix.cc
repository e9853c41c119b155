#include "codec/tiled_matrix.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>

#include "absl/strings/str_cat.h"
#include "codec/base/align.h"
#include "codec/exponent_code.h"
#include "codec/format.h"
#include "codec/huffman.h"

namespace df11::codec {
namespace {

using gpu::kTileCols;
using gpu::kTiledLanes;
using gpu::kTiledSlots;
using gpu::kTileRows;
using gpu::kTilesPerSegment;
constexpr int kMaxLength = gpu::kTiledMaxCodeLength;
// With codes of at most 6 bits, up to 63 exponents and the escape can have codes.
constexpr int kMaxCoded = gpu::kTiledCodes - 1;
// What an escaped weight costs beyond its 8 raw bits, for choosing how many exponents get codes:
// an escape sends its whole tile (all 32 lanes) down the code-by-code path, about 2.5 times the
// work of the pair lookups. At 128 bits, N(0, 0.02^2) weights code 15 exponents and escape 0.016 %
// of weights (4 % of tiles), and the matrix stays smaller than DF11 (10.77 against 10.80 bits).
constexpr double kEscapeCostBits = 128;

uint8_t ExponentOf(uint16_t bf16) { return static_cast<uint8_t>((bf16 >> 7) & 0xFF); }
uint8_t SignMantissaOf(uint16_t bf16) {
  return static_cast<uint8_t>(((bf16 >> 8) & 0x80) | (bf16 & 0x7F));
}

// fn(begin, end) over [0, n), on `pool`'s threads or this one.
void ForRanges(ThreadPool* pool, size_t n, size_t grain,
               const std::function<void(size_t, size_t)>& fn) {
  if (pool == nullptr) {
    fn(0, n);
  } else {
    pool->ParallelFor(n, grain, fn);
  }
}

// Where segment `s` lies: its band and its tiles [first_tile, end_tile) of the band.
struct SegmentPlace {
  uint64_t band;
  uint32_t first_tile, end_tile;
};
SegmentPlace PlaceOf(uint64_t s, uint32_t tiles_per_band) {
  const uint32_t per_band = gpu::SegmentsPerBand(tiles_per_band);
  const uint32_t k = static_cast<uint32_t>(s % per_band);
  return {s / per_band, k * kTilesPerSegment,
          std::min<uint32_t>(tiles_per_band, (k + 1) * kTilesPerSegment)};
}

// Calls fn(element index) for the weights of lane `lane` of a segment, in stream order: tile by
// tile, slots 0..7.
template <typename Fn>
void ForLaneElements(const SegmentPlace& p, uint64_t cols, int lane, Fn fn) {
  for (uint32_t t = p.first_tile; t < p.end_tile; ++t) {
    for (int slot = 0; slot < kTiledSlots; ++slot) {
      const uint64_t row = p.band * kTileRows + gpu::SlotRow(lane, slot);
      const uint64_t col = uint64_t(t) * kTileCols + gpu::SlotCol(lane, slot);
      fn(row * cols + col, t, slot);
    }
  }
}

// Where slot s of lane l is in a tile held row by row: kSlotIndex[l][s] = row * 16 + column.
const std::array<std::array<uint8_t, kTiledSlots>, kTiledLanes> kSlotIndex = [] {
  std::array<std::array<uint8_t, kTiledSlots>, kTiledLanes> index{};
  for (int lane = 0; lane < kTiledLanes; ++lane) {
    for (int slot = 0; slot < kTiledSlots; ++slot) {
      index[lane][slot] =
          static_cast<uint8_t>(gpu::SlotRow(lane, slot) * kTileCols + gpu::SlotCol(lane, slot));
    }
  }
  return index;
}();

// One segment's 32 lane streams, one after the other (MSB-first, the last word padded with
// zeros), and each lane's length.
struct SegmentStreams {
  std::vector<uint32_t> words;
  std::array<uint16_t, kTiledLanes> lane_bits{};
};

// Codes segment `p` of the rows-major `weights` into `out`, and writes its sign/mantissa bytes.
// Each tile is read once, row by row; each lane's codes gather in a 64-bit accumulator.
void EncodeSegment(const ExponentCode& code, const uint16_t* weights, uint64_t cols,
                   const SegmentPlace& p, uint32_t tiles_per_band, uint8_t* sign_mantissa,
                   SegmentStreams& out) {
  // At most 32 tiles x 8 codes x 14 bits per lane.
  constexpr int kLaneWords = kTilesPerSegment * kTiledSlots * 14 / 32 + 1;
  std::array<std::array<uint32_t, kLaneWords>, kTiledLanes> lane_words;
  // Each exponent's whole code: an escaped one's escape code and byte.
  std::array<uint8_t, 256> lengths;
  std::array<uint32_t, 256> values;
  for (int e = 0; e < 256; ++e) {
    const bool escaped = code.escaped(static_cast<uint8_t>(e));
    lengths[e] = static_cast<uint8_t>(code.length_of[e] + (escaped ? 8 : 0));
    values[e] = escaped ? code.value_of[e] << 8 | e : code.value_of[e];
  }
  std::array<uint64_t, kTiledLanes> acc{};
  std::array<int, kTiledLanes> acc_bits{}, n_words{};
  uint8_t exponents[kTileRows * kTileCols], bytes[kTileRows * kTileCols];
  for (uint32_t t = p.first_tile; t < p.end_tile; ++t) {
    const uint16_t* tile = weights + p.band * kTileRows * cols + uint64_t(t) * kTileCols;
    for (int r = 0; r < kTileRows; ++r) {
      for (int c = 0; c < kTileCols; ++c) {
        const uint16_t w = tile[r * cols + c];
        exponents[r * kTileCols + c] = ExponentOf(w);
        bytes[r * kTileCols + c] = SignMantissaOf(w);
      }
    }
    uint8_t* sm = sign_mantissa + gpu::SignMantissaOffset(p.band, tiles_per_band, t, 0);
    for (int lane = 0; lane < kTiledLanes; ++lane) {
      for (int slot = 0; slot < kTiledSlots; ++slot) {
        const int i = kSlotIndex[lane][slot];
        const uint8_t e = exponents[i];
        sm[lane * 16 + gpu::SlotByte(slot)] = bytes[i];
        const int length = lengths[e];
        acc[lane] = acc[lane] << length | values[e];
        acc_bits[lane] += length;
        out.lane_bits[lane] = static_cast<uint16_t>(out.lane_bits[lane] + length);
        if (acc_bits[lane] >= 32) {
          acc_bits[lane] -= 32;
          lane_words[lane][n_words[lane]++] = static_cast<uint32_t>(acc[lane] >> acc_bits[lane]);
        }
      }
    }
  }
  // The lanes' streams one after the other.
  uint64_t total = 0;
  for (int lane = 0; lane < kTiledLanes; ++lane) total += out.lane_bits[lane];
  out.words.assign((total + 31) / 32 + 1, 0);
  uint64_t bit = 0;
  auto put = [&](uint32_t value, int n) {  // 1 <= n <= 32
    const uint64_t w = bit >> 5;
    const int offset = static_cast<int>(bit & 31);
    const uint64_t v = (uint64_t{value} << (64 - n)) >> offset;
    out.words[w] |= static_cast<uint32_t>(v >> 32);
    out.words[w + 1] |= static_cast<uint32_t>(v);
    bit += n;
  };
  for (int lane = 0; lane < kTiledLanes; ++lane) {
    for (int k = 0; k < n_words[lane]; ++k) put(lane_words[lane][k], 32);
    if (acc_bits[lane] > 0) {
      put(static_cast<uint32_t>(acc[lane]) & ((1u << acc_bits[lane]) - 1), acc_bits[lane]);
    }
  }
  out.words.resize((total + 31) / 32);
}

}  // namespace

bool TiledMatrix::Supports(int64_t rows, int64_t cols) {
  return rows > 0 && cols > 0 && rows % kTileRows == 0 && cols % (2 * kTileCols) == 0 &&
         cols / kTileCols <= (int64_t{1} << 31);
}

absl::StatusOr<TiledMatrix> TiledMatrix::Build(std::span<const uint16_t> weights, int64_t rows,
                                               int64_t cols, ThreadPool* pool) {
  if (!Supports(rows, cols)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TiledMatrix: a ", rows, " x ", cols,
        " matrix cannot be tiled (rows must be a positive multiple of 16, columns of 32)"));
  }
  if (weights.size() != uint64_t(rows) * uint64_t(cols)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TiledMatrix: ", weights.size(), " weights for a ", rows, " x ", cols, " matrix"));
  }
  TiledMatrix m;
  m.rows_ = rows;
  m.cols_ = cols;
  const uint32_t tiles_per_band = static_cast<uint32_t>(cols / kTileCols);
  const uint64_t bands = uint64_t(rows) / kTileRows;
  const uint64_t n_segments = bands * gpu::SegmentsPerBand(tiles_per_band);

  // The code, from the exponents' histogram.
  SharedHistogram histogram;
  ForRanges(pool, weights.size(), 1 << 20, [&](size_t begin, size_t end) {
    Histogram h{};
    for (size_t j = begin; j < end; ++j) ++h[ExponentOf(weights[j])];
    histogram.Add(h);
  });
  const Histogram total = histogram.Total();
  const ExponentCode code = ExponentCode::Choose(total, kMaxLength, kMaxCoded, kEscapeCostBits);
  m.codes_.assign(gpu::kTiledCodes, 0);
  for (int s = 0; s <= code.m; ++s) {
    const int shift = kMaxLength - code.lengths[s];
    const uint16_t entry = static_cast<uint16_t>((s < code.m ? code.exponents[s] : 0) |
                                                 code.lengths[s] << 8 | (s == code.m ? 0x1000 : 0));
    for (uint32_t p = code.values[s] << shift; p < (code.values[s] + 1) << shift; ++p) {
      m.codes_[p] = entry;
    }
  }
  for (int e = 0; e < 256; ++e) {
    if (code.escaped(static_cast<uint8_t>(e))) m.escaped_ += total[e];
  }

  // Each segment's streams on their own (in parallel), then the segments side by side: each starts
  // on a 32-bit word, so placing them is a copy.
  std::vector<SegmentStreams> streams(n_segments);
  m.lane_bits_.resize(n_segments * kTiledLanes);
  m.sign_mantissa_.resize(weights.size());
  ForRanges(pool, n_segments, 16, [&](size_t begin, size_t end) {
    for (size_t s = begin; s < end; ++s) {
      EncodeSegment(code, weights.data(), uint64_t(cols), PlaceOf(s, tiles_per_band),
                    tiles_per_band, m.sign_mantissa_.data(), streams[s]);
      std::copy(streams[s].lane_bits.begin(), streams[s].lane_bits.end(),
                m.lane_bits_.begin() + s * kTiledLanes);
    }
  });
  m.segment_bits_.resize(n_segments + 1);
  uint64_t bit = 0;
  for (uint64_t s = 0; s < n_segments; ++s) {
    m.segment_bits_[s] = bit;
    bit += uint64_t{streams[s].words.size()} * 32;
  }
  m.segment_bits_[n_segments] = bit;
  m.words_.assign(bit / 32 + gpu::kTiledWordsRoom, 0);
  ForRanges(pool, n_segments, 64, [&](size_t begin, size_t end) {
    for (size_t s = begin; s < end; ++s) {
      std::copy(streams[s].words.begin(), streams[s].words.end(),
                m.words_.begin() + m.segment_bits_[s] / 32);
    }
  });
  return m;
}

absl::Status TiledMatrix::Decode(std::span<uint16_t> out) const {
  if (out.size() != num_elements()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TiledMatrix::Decode: room for ", out.size(), " of ", num_elements()));
  }
  const uint32_t tiles_per_band = static_cast<uint32_t>(cols_ / kTileCols);
  for (uint64_t s = 0; s < num_segments(); ++s) {
    const SegmentPlace place = PlaceOf(s, tiles_per_band);
    uint64_t bit = segment_bits_[s];
    for (int lane = 0; lane < kTiledLanes; ++lane) {
      const uint64_t end = bit + lane_bits_[s * kTiledLanes + lane];
      bool ok = end <= segment_bits_[s + 1];
      ForLaneElements(place, cols_, lane, [&](uint64_t j, uint32_t tile, int slot) {
        if (!ok) return;
        const uint32_t front = gpu::ReadWindow(words_.data(), bit).hi;
        const uint16_t code = codes_[front >> (32 - kMaxLength)];
        const uint32_t length = gpu::CodeLength(code);
        uint32_t exponent = gpu::CodeExponent(code);
        if (gpu::CodeEscapes(code)) exponent = (front << length) >> 24;
        bit += length + (gpu::CodeEscapes(code) ? 8 : 0);
        ok = length > 0 && bit <= end;
        const uint8_t sm =
            sign_mantissa_[gpu::SignMantissaOffset(place.band, tiles_per_band, tile, lane) +
                           gpu::SlotByte(slot)];
        out[j] = format::JoinBf16(static_cast<uint8_t>(exponent), sm);
      });
      if (!ok || bit != end) {
        return absl::DataLossError(absl::StrCat("TiledMatrix: segment ", s, " lane ", lane,
                                                "'s codes do not end where its stream does"));
      }
    }
  }
  return absl::OkStatus();
}

uint64_t TiledMatrix::stored_bytes() const {
  return words_.size() * sizeof(uint32_t) + sign_mantissa_.size() +
         segment_bits_.size() * sizeof(uint64_t) + lane_bits_.size() * sizeof(uint16_t) +
         codes_.size() * sizeof(uint16_t);
}

TiledImage TiledMatrix::image() const {
  TiledImage image;
  uint64_t at = 0;
  auto place = [&at](uint64_t bytes) {
    const uint64_t here = at;
    at += base::AlignUp(bytes, 256);
    return here;
  };
  image.words = place(words_.size() * sizeof(uint32_t));
  image.sign_mantissa = place(sign_mantissa_.size());
  image.segment_bits = place(segment_bits_.size() * sizeof(uint64_t));
  image.lane_bits = place(lane_bits_.size() * sizeof(uint16_t));
  image.codes = place(codes_.size() * sizeof(uint16_t));
  image.bytes = at;
  image.rows = static_cast<uint32_t>(rows_);
  image.cols = static_cast<uint32_t>(cols_);
  return image;
}

void TiledMatrix::CopyImage(char* dst) const {
  const TiledImage image = this->image();
  std::memset(dst, 0, image.bytes);
  std::memcpy(dst + image.words, words_.data(), words_.size() * sizeof(uint32_t));
  std::memcpy(dst + image.sign_mantissa, sign_mantissa_.data(), sign_mantissa_.size());
  std::memcpy(dst + image.segment_bits, segment_bits_.data(),
              segment_bits_.size() * sizeof(uint64_t));
  std::memcpy(dst + image.lane_bits, lane_bits_.data(), lane_bits_.size() * sizeof(uint16_t));
  std::memcpy(dst + image.codes, codes_.data(), codes_.size() * sizeof(uint16_t));
}

gpu::TiledView TiledImage::View(const char* base) const { return RowsView(base, 0, rows); }

gpu::TiledView TiledImage::RowsView(const char* base, uint32_t first_row, uint32_t n_rows) const {
  const uint64_t band = first_row / kTileRows;
  const uint32_t tiles_per_band = cols / kTileCols;
  const uint64_t per_band = gpu::SegmentsPerBand(tiles_per_band);
  return {.words = reinterpret_cast<const uint32_t*>(base + words),
          .sign_mantissa = reinterpret_cast<const uint8_t*>(base + sign_mantissa) +
                           band * tiles_per_band * gpu::kTileBytes,
          .segment_bits = reinterpret_cast<const uint64_t*>(base + segment_bits) + band * per_band,
          .lane_bits =
              reinterpret_cast<const uint16_t*>(base + lane_bits) + band * per_band * kTiledLanes,
          .codes = reinterpret_cast<const uint16_t*>(base + codes),
          .rows = n_rows,
          .cols = cols};
}

bool DecodeTiledView(const gpu::TiledView& v, uint16_t* out, uint64_t ld) {
  using namespace gpu;  // NOLINT: the kernel's steps
  std::vector<uint32_t> table(kTiledTableEntries);
  for (uint32_t i = 0; i < kTiledTableEntries; ++i) table[i] = PairEntry(v.codes, i);
  const uint32_t tiles_per_band = TilesPerBand(v);
  bool ok = true;
  for (uint64_t band = 0; band < Bands(v); ++band) {
    for (uint32_t s = 0; s < SegmentsPerBand(v); ++s) {
      const uint64_t seg = band * SegmentsPerBand(v) + s;
      uint64_t bit[kTiledLanes], end[kTiledLanes];
      uint64_t start = v.segment_bits[seg];
      bool inside = v.segment_bits[seg + 1] >= v.segment_bits[seg];
      for (int lane = 0; lane < kTiledLanes; ++lane) {
        bit[lane] = start;
        start += v.lane_bits[seg * kTiledLanes + lane];
        end[lane] = start;
        inside &= end[lane] <= v.segment_bits[seg + 1];
      }
      if (!inside) {
        ok = false;
        continue;
      }
      // The segment's words as the kernels stage them (with kTiledWordsRoom words after), and
      // bits counted from its start.
      const uint64_t first_word = v.segment_bits[seg] >> 5;
      const std::vector<uint32_t> stage(
          v.words + first_word, v.words + (v.segment_bits[seg + 1] >> 5) + gpu::kTiledWordsRoom);
      for (int lane = 0; lane < kTiledLanes; ++lane) {
        bit[lane] -= first_word * 32;
        end[lane] -= first_word * 32;
      }
      const uint32_t end_tile = std::min(tiles_per_band, (s + 1) * kTilesPerSegment);
      for (uint32_t tile = s * kTilesPerSegment; tile < end_tile; ++tile) {
        uint32_t pairs[kTiledLanes][4], used[kTiledLanes];
        bool any_escape = false;
        for (int lane = 0; lane < kTiledLanes; ++lane) {
          uint32_t escapes;
          used[lane] =
              DecodePairs(table.data(), ReadWindow(stage.data(), bit[lane]), pairs[lane], escapes);
          any_escape |= escapes != 0;
        }
        for (int lane = 0; lane < kTiledLanes; ++lane) {
          if (any_escape) {
            used[lane] = DecodeCodesOneByOne(table.data(), stage.data(), bit[lane], pairs[lane]);
          }
          bit[lane] += used[lane];
          if (bit[lane] > end[lane]) {
            ok = false;
            bit[lane] = end[lane];
          }
          uint32_t u[2];
          std::memcpy(u, v.sign_mantissa + SignMantissaOffset(band, tiles_per_band, tile, lane), 8);
          uint32_t a[4];
          JoinTile(u[0], u[1], pairs[lane], a);
          for (int p = 0; p < 4; ++p) {
            const uint64_t row = band * kTileRows + SlotRow(lane, 2 * p);
            const uint64_t col = uint64_t(tile) * kTileCols + SlotCol(lane, 2 * p);
            out[row * ld + col] = static_cast<uint16_t>(a[p]);
            out[row * ld + col + 1] = static_cast<uint16_t>(a[p] >> 16);
          }
        }
      }
      for (int lane = 0; lane < kTiledLanes; ++lane) ok &= bit[lane] == end[lane];
    }
  }
  return ok;
}

gpu::TiledView TiledMatrix::host_view() const {
  return {.words = words_.data(),
          .sign_mantissa = sign_mantissa_.data(),
          .segment_bits = segment_bits_.data(),
          .lane_bits = lane_bits_.data(),
          .codes = codes_.data(),
          .rows = static_cast<uint32_t>(rows_),
          .cols = static_cast<uint32_t>(cols_)};
}

}  // namespace df11::codec
