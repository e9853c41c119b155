// codec::TiledMatrix on the CPU: its own decoder, and the GPU kernels' per-lane steps
// (codec/cuda/tiled_steps.h) run lane by lane as a warp runs them, with the tensor-core product's
// fragments laid out as the PTX ISA documents them. The kernels themselves run in
// gpu_tiled_test (label gpu).
#include "codec/tiled_matrix.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "codec/decoder.h"
#include "codec/encoder.h"
#include "codec/format.h"
#include "codec/unit.h"
#include "tests/codec/test_data.h"
#include "tests/testing/status_matchers.h"

namespace df11::codec {
namespace {

using ::df11::testing::IsOk;
using ::df11::testing::StatusIs;
using namespace gpu;  // NOLINT: the steps under test

// The fragments of mma.m16n8k16 with BF16 operands, from the PTX ISA's figures, spelled out
// independently of tiled_steps.h: register p of a lane (g = lane / 4, q = lane % 4) holds A
// elements a(2p), a(2p+1) at row g + kARow[p], columns 2q + {0, 1} + kACol[p]; B register r holds
// rows (k) 2q + {0, 1} + 8r of column g; accumulator r holds row g + kCRow[r], column 2q + r % 2.
constexpr int kARow[4] = {0, 8, 0, 8};
constexpr int kACol[4] = {0, 0, 8, 8};
constexpr int kCRow[4] = {0, 0, 8, 8};

double Bf16Value(uint16_t bits) {
  const uint32_t u = uint32_t{bits} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(TiledStepsTest, SlotsAndAccumulatorsAreTheFragmentsOfThePtxIsa) {
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, q = lane % 4;
    for (int slot = 0; slot < 8; ++slot) {
      EXPECT_EQ(SlotRow(lane, slot), g + kARow[slot / 2]) << lane << " " << slot;
      EXPECT_EQ(SlotCol(lane, slot), 2 * q + slot % 2 + kACol[slot / 2]) << lane << " " << slot;
    }
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(AccRow(lane, r), g + kCRow[r]);
      EXPECT_EQ(AccCol(lane, r), 2 * q + r % 2);
    }
  }
}

// X for the product, given as BF16 (bf16 non-empty) or fp32 values, n_cols rows of `cols`.
struct X {
  std::vector<uint16_t> bf16;
  std::vector<float> f32;
  int n_cols = 0;
  double at(int n, uint64_t c, uint64_t cols) const {
    return bf16.empty() ? double(f32[n * cols + c]) : Bf16Value(bf16[n * cols + c]);
  }
};

// What the emulated kernel produced for the whole matrix: W from the A fragments (rows x cols),
// Y (n_cols x rows, in double: the products of the reconstructed fragments), and whether every
// segment's lanes ended where their streams do.
struct Emulated {
  std::vector<uint16_t> w;
  std::vector<double> y;
  bool ok = true;
};

// Runs every band of `v` as the kernel's warps do, segment by segment, tile by tile, all 32 lanes
// through each step; `lane_bits` may differ from the view's (a corrupt index).
Emulated EmulateKernel(const TiledView& v, const uint16_t* lane_bits, const X& x) {
  const uint64_t rows = v.rows, cols = v.cols;
  Emulated e;
  e.w.assign(rows * cols, 0xFFFF);
  e.y.assign(uint64_t(x.n_cols) * rows, 0.0);
  const uint32_t tiles_per_band = TilesPerBand(v);
  std::vector<uint32_t> table(kTiledTableEntries);
  for (uint32_t i = 0; i < kTiledTableEntries; ++i) table[i] = PairEntry(v.codes, i);
  for (uint64_t band = 0; band < Bands(v); ++band) {
    for (uint32_t s = 0; s < SegmentsPerBand(v); ++s) {
      const uint64_t seg = band * SegmentsPerBand(v) + s;
      uint64_t bit[32], end[32];
      uint64_t start = v.segment_bits[seg];
      bool inside = true;
      for (int lane = 0; lane < 32; ++lane) {
        bit[lane] = start;
        start += lane_bits[seg * 32 + lane];
        end[lane] = start;
        inside &= end[lane] <= v.segment_bits[seg + 1];
      }
      if (!inside) {
        e.ok = false;
        continue;
      }
      const uint32_t first_tile = s * kTilesPerSegment;
      const uint32_t end_tile = std::min(tiles_per_band, first_tile + kTilesPerSegment);
      for (uint32_t tile = first_tile; tile < end_tile; ++tile) {
        uint32_t pairs[32][4], used[32];
        bool any_escape = false;
        for (int lane = 0; lane < 32; ++lane) {
          uint32_t escapes;
          used[lane] =
              DecodePairs(table.data(), ReadWindow(v.words, bit[lane]), pairs[lane], escapes);
          any_escape |= escapes != 0;
        }
        double a[16][16], b[16][8] = {};
        for (int lane = 0; lane < 32; ++lane) {
          if (any_escape)
            used[lane] = DecodeCodesOneByOne(table.data(), v.words, bit[lane], pairs[lane]);
          bit[lane] += used[lane];
          if (bit[lane] > end[lane]) {
            e.ok = false;
            bit[lane] = end[lane];
          }
          uint32_t u[2];
          std::memcpy(u, v.sign_mantissa + SignMantissaOffset(band, tiles_per_band, tile, lane), 8);
          uint32_t regs[4];
          JoinTile(u[0], u[1], pairs[lane], regs);
          const int g = lane / 4, q = lane % 4;
          for (int p = 0; p < 4; ++p) {
            for (int h = 0; h < 2; ++h) {
              const uint16_t value = static_cast<uint16_t>(regs[p] >> (16 * h));
              const int r = g + kARow[p], c = 2 * q + h + kACol[p];
              e.w[(band * 16 + r) * cols + tile * 16 + c] = value;
              a[r][c] = Bf16Value(value);
            }
          }
          // B fragments: column g of X, rows (k) 2q + h + 8r.
          uint32_t parts[3][2] = {};
          int n_parts = 1;
          if (!x.bf16.empty()) {
            LoadXBf16(x.bf16.data(), cols, x.n_cols, tile, lane, parts[0]);
          } else {
            LoadXF32(x.f32.data(), cols, x.n_cols, tile, lane, parts);
            n_parts = 3;
          }
          for (int part = 0; part < n_parts; ++part) {
            for (int r = 0; r < 2; ++r) {
              for (int h = 0; h < 2; ++h) {
                b[2 * q + h + 8 * r][g] +=
                    Bf16Value(static_cast<uint16_t>(parts[part][r] >> (16 * h)));
              }
            }
          }
        }
        for (int k = 0; k < 16; ++k) {
          for (int n = 0; n < 8; ++n) {
            const double want = n < x.n_cols ? x.at(n, tile * 16 + k, cols) : 0.0;
            EXPECT_EQ(b[k][n], want) << "B fragment, tile " << tile << " k " << k << " n " << n;
          }
        }
        for (int n = 0; n < x.n_cols; ++n) {
          for (int r = 0; r < 16; ++r) {
            double sum = 0;
            for (int k = 0; k < 16; ++k) sum += a[r][k] * b[k][n];
            e.y[n * rows + band * 16 + r] += sum;
          }
        }
      }
      for (int lane = 0; lane < 32; ++lane) e.ok &= bit[lane] == end[lane];
    }
  }
  return e;
}

X RandomX(uint64_t seed, int n_cols, uint64_t cols, bool f32) {
  X x;
  x.n_cols = n_cols;
  const std::vector<uint16_t> values =
      ::df11::testing::NormalBf16(seed, 1.0f, uint64_t(n_cols) * cols);
  if (!f32) {
    x.bf16 = values;
    return x;
  }
  // fp32 values with all 24 bits of significand in use.
  x.f32.resize(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    x.f32[i] = static_cast<float>(Bf16Value(values[i]) * (1.0 + 0.3 * double(i % 977) / 977.0));
  }
  return x;
}

// Every decoder of the layout gives `weights` back, and the emulated product equals the float64
// one.
void ExpectRoundTrip(const std::vector<uint16_t>& weights, int64_t rows, int64_t cols) {
  ThreadPool pool(2);
  auto m = TiledMatrix::Build(weights, rows, cols, &pool);
  ASSERT_THAT(m.status(), IsOk());
  std::vector<uint16_t> out(weights.size(), 0xFFFF);
  ASSERT_THAT(m->Decode(out), IsOk());
  EXPECT_TRUE(out == weights) << "the layout's own decoder";

  for (const auto& [n_cols, f32] : {std::pair{1, false}, {3, true}, {8, false}}) {
    SCOPED_TRACE(::testing::Message() << n_cols << " columns, fp32 X " << f32);
    const X x = RandomX(::df11::testing::TestSeed() + n_cols, n_cols, cols, f32);
    const Emulated e = EmulateKernel(m->host_view(), m->lane_bits().data(), x);
    EXPECT_TRUE(e.ok);
    EXPECT_TRUE(e.w == weights) << "the kernels' steps";
    for (int n = 0; n < n_cols; ++n) {
      for (int64_t r = 0; r < rows; ++r) {
        double want = 0, magnitude = 0;
        for (int64_t c = 0; c < cols; ++c) {
          want += Bf16Value(weights[r * cols + c]) * x.at(n, c, cols);
          magnitude += std::abs(Bf16Value(weights[r * cols + c]) * x.at(n, c, cols));
        }
        ASSERT_NEAR(e.y[n * rows + r], want, 1e-12 * magnitude) << "row " << r << " column " << n;
      }
    }
  }
}

TEST(TiledMatrixTest, DecodesLlmLikeWeights) {
  // 1056 columns: 66 tiles per band, so each band's last segment holds 2 tiles.
  ExpectRoundTrip(::df11::testing::NormalBf16(::df11::testing::TestSeed(), 0.02f, 48 * 1056), 48,
                  1056);
}

TEST(TiledMatrixTest, DecodesEscapesInEveryTile) {
  // Every codable bit pattern: far more exponents than codes, so most are escaped.
  ExpectRoundTrip(::df11::testing::UniformCodableBf16(::df11::testing::TestSeed(), 32 * 512), 32,
                  512);
}

TEST(TiledMatrixTest, DecodesOneExponentAndZeros) {
  std::vector<uint16_t> w(16 * 64, 0x3F80);  // 1.0
  w[5] = 0xBF81;
  ExpectRoundTrip(w, 16, 64);
  ExpectRoundTrip(std::vector<uint16_t>(16 * 32, 0), 16, 32);
}

TEST(TiledMatrixTest, StoresLlmWeightsInFewerBitsThanDf11) {
  const int64_t rows = 1024, cols = 1024;
  const std::vector<uint16_t> w =
      ::df11::testing::NormalBf16(::df11::testing::TestSeed(), 0.02f, rows * cols);
  const std::span<const uint16_t> parts[] = {w};
  auto encoded = EncodeUnit(parts);
  ASSERT_THAT(encoded.status(), IsOk());
  auto unit = Unit::Validate(encoded->tensors(), "test");
  ASSERT_THAT(unit.status(), IsOk());
  const UnitTensors& t = unit->tensors();
  const double df11_bits = 8.0 *
                           (t.encoded_exponent.size() + t.gaps.size() + t.output_positions.size() +
                            t.luts.size() + t.sign_mantissa.size()) /
                           (rows * cols);
  std::vector<uint16_t> decoded(w.size());
  ASSERT_THAT(UnitDecoder(*unit).Decode(decoded, nullptr), IsOk());
  auto m = TiledMatrix::Build(decoded, rows, cols, nullptr);
  ASSERT_THAT(m.status(), IsOk());
  EXPECT_LT(m->bits_per_weight(), df11_bits);
  std::vector<uint16_t> out(w.size());
  ASSERT_THAT(m->Decode(out), IsOk());
  EXPECT_TRUE(out == w);
}

TEST(TiledMatrixTest, ImagesAndRowRangesDecodeAsTheMatrix) {
  const int64_t rows = 64, cols = 1056;
  const std::vector<uint16_t> w =
      ::df11::testing::NormalBf16(::df11::testing::TestSeed(), 0.02f, rows * cols);
  auto m = TiledMatrix::Build(w, rows, cols, nullptr);
  ASSERT_THAT(m.status(), IsOk());
  const TiledImage image = m->image();
  EXPECT_GE(image.bytes, m->stored_bytes());
  std::vector<char> bytes(image.bytes + 256);
  char* base = bytes.data() + (256 - reinterpret_cast<uintptr_t>(bytes.data()) % 256) % 256;
  m->CopyImage(base);
  std::vector<uint16_t> out(rows * cols, 0xFFFF);
  EXPECT_TRUE(DecodeTiledView(image.View(base), out.data(), cols));
  EXPECT_TRUE(out == w);
  // Rows 16..47, into a wider output (ld > cols).
  const uint64_t ld = cols + 32;
  std::vector<uint16_t> part(32 * ld, 0xFFFF);
  EXPECT_TRUE(DecodeTiledView(image.RowsView(base, 16, 32), part.data(), ld));
  for (int64_t r = 0; r < 32; ++r) {
    EXPECT_TRUE(
        std::equal(w.begin() + (16 + r) * cols, w.begin() + (17 + r) * cols, part.begin() + r * ld))
        << "row " << 16 + r;
  }
}

TEST(TiledMatrixTest, RefusesShapesThatDoNotTile) {
  const std::vector<uint16_t> w(15 * 64);
  EXPECT_THAT(TiledMatrix::Build(w, 15, 64, nullptr).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(TiledMatrix::Build(w, 20, 48, nullptr).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(TiledMatrix::Build(w, 16, 64, nullptr).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));  // 960 weights for 1024
  EXPECT_FALSE(TiledMatrix::Supports(0, 32));
  EXPECT_TRUE(TiledMatrix::Supports(151936, 4096));
}

TEST(TiledMatrixTest, KernelStepsFlagLanesWhoseCodesDoNotEndWhereTheirStreamsDo) {
  const int64_t rows = 32, cols = 512;
  const std::vector<uint16_t> w =
      ::df11::testing::NormalBf16(::df11::testing::TestSeed(), 0.02f, rows * cols);
  auto m = TiledMatrix::Build(w, rows, cols, nullptr);
  ASSERT_THAT(m.status(), IsOk());
  const X x = RandomX(1, 1, cols, false);
  std::vector<uint16_t> lane_bits(m->lane_bits().begin(), m->lane_bits().end());
  EXPECT_TRUE(EmulateKernel(m->host_view(), lane_bits.data(), x).ok);
  // Lane 3 of segment 1 one bit longer, lane 4 one bit shorter: the segment's total holds.
  lane_bits[32 + 3] += 1;
  lane_bits[32 + 4] -= 1;
  EXPECT_FALSE(EmulateKernel(m->host_view(), lane_bits.data(), x).ok);
  // A lane longer than the whole segment.
  lane_bits.assign(m->lane_bits().begin(), m->lane_bits().end());
  lane_bits[31] = 60000;
  EXPECT_FALSE(EmulateKernel(m->host_view(), lane_bits.data(), x).ok);
}

}  // namespace
}  // namespace df11::codec
