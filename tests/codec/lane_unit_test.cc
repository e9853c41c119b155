// The lane-stream layout (codec/lane_unit.h): built from BF16 values and from DF11 units, its
// reference decoder and the GPU kernel's steps run lane by lane (DecodeLaneView) both give the
// values back bit for bit, on LLM-like weights, escape-heavy ones, a single exponent, every codable
// pattern, sizes that end inside a group and a segment, and segment ranges; corrupt words are
// caught by both without reading outside the unit; the layout's size against DF11's.
#include "codec/lane_unit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "codec/encoder.h"
#include "codec/format.h"
#include "codec/unit.h"
#include "tests/codec/test_data.h"
#include "tests/testing/status_matchers.h"

namespace df11::codec {
namespace {

using ::df11::testing::IsOk;
using ::df11::testing::StatusIs;

// Both decoders of `u` reproduce `values`; outputs start poisoned so an unwritten one shows.
void ExpectDecodes(const LaneUnit& u, const std::vector<uint16_t>& values) {
  std::vector<uint16_t> reference(values.size(), 0xFFFF), emulated(values.size(), 0xFFFF);
  ASSERT_THAT(u.Decode(reference), IsOk());
  EXPECT_EQ(reference, values);
  EXPECT_TRUE(DecodeLaneView(u.view(emulated.data())));
  EXPECT_EQ(emulated, values);
}

TEST(LaneUnitTest, DecodesLlmLikeWeightsOfManySizes) {
  const uint64_t seed = ::df11::testing::TestSeed();
  SCOPED_TRACE(::df11::testing::SeedTrace(seed));
  ThreadPool pool(2);
  // Whole segments, a partial last group, a partial last segment, a single weight.
  for (size_t n : {size_t{3} * gpu::kLaneSegment, size_t{8192 + 5}, size_t{40000}, size_t{1},
                   size_t{257}}) {
    SCOPED_TRACE(::testing::Message() << n << " weights");
    const std::vector<uint16_t> values = ::df11::testing::NormalBf16(seed + n, 0.02f, n);
    absl::StatusOr<LaneUnit> u = LaneUnit::Build(values, &pool);
    ASSERT_THAT(u.status(), IsOk());
    EXPECT_EQ(u->num_segments(), (n + gpu::kLaneSegment - 1) / gpu::kLaneSegment);
    ExpectDecodes(*u, values);
  }
}

TEST(LaneUnitTest, DecodesEscapesSingleExponentsAndEveryCodablePattern) {
  const uint64_t seed = ::df11::testing::TestSeed();
  SCOPED_TRACE(::df11::testing::SeedTrace(seed));
  // 143 rare exponents: most are escaped.
  const std::vector<uint16_t> rare = ::df11::testing::Bf16WithExponentCounts(
      seed, ::df11::testing::HeavyPlusSingletonsCounts(143, 100000));
  // One exponent only: codes of one bit.
  std::vector<uint16_t> ones(20000);  // exponent 0x78
  for (size_t i = 0; i < ones.size(); ++i) ones[i] = static_cast<uint16_t>(0x3C00 | (i & 0x807F));
  const std::vector<uint16_t>& one = ones;
  const std::vector<uint16_t> uniform = ::df11::testing::UniformCodableBf16(seed, 50000);
  for (const std::vector<uint16_t>* values : {&rare, &one, &uniform}) {
    absl::StatusOr<LaneUnit> u = LaneUnit::Build(*values, nullptr);
    ASSERT_THAT(u.status(), IsOk());
    ExpectDecodes(*u, *values);
  }
  absl::StatusOr<LaneUnit> escaped = LaneUnit::Build(rare, nullptr);
  ASSERT_THAT(escaped.status(), IsOk());
  EXPECT_LT(escaped->code().m, 143);  // some exponents escaped
}

TEST(LaneUnitTest, BuildsFromADf11UnitAndIsNoLargerThanDf11) {
  const uint64_t seed = ::df11::testing::TestSeed();
  const std::vector<uint16_t> values = ::df11::testing::NormalBf16(seed, 0.02f, 1 << 20);
  const std::span<const uint16_t> parts[] = {values};
  absl::StatusOr<EncodedUnit> encoded = EncodeUnit(parts);
  ASSERT_THAT(encoded.status(), IsOk());
  absl::StatusOr<Unit> unit = Unit::Validate(encoded->tensors(), "test");
  ASSERT_THAT(unit.status(), IsOk());
  ThreadPool pool(2);
  absl::StatusOr<LaneUnit> u = LaneUnit::FromDf11(UnitDecoder(*unit), &pool);
  ASSERT_THAT(u.status(), IsOk());
  ExpectDecodes(*u, values);
  // Codes, row padding, index and table against DF11's stream, gaps, positions and LUTs, both
  // with one sign/mantissa byte per weight (about 10.8 bits per weight for each).
  const UnitTensors& t = unit->tensors();
  const double df11_bits = 8.0 *
                           (t.luts.size() + t.encoded_exponent.size() + t.sign_mantissa.size() +
                            t.output_positions.size() + t.gaps.size()) /
                           values.size();
  EXPECT_LT(u->bits_per_weight(), 10.95);
  EXPECT_LT(u->bits_per_weight(), df11_bits + 0.15);
  RecordProperty("lane_bits_per_weight", std::to_string(u->bits_per_weight()));
  RecordProperty("df11_bits_per_weight", std::to_string(df11_bits));
}

TEST(LaneUnitTest, SegmentRangesDecodeIntoTheirOwnOutput) {
  const std::vector<uint16_t> values =
      ::df11::testing::NormalBf16(::df11::testing::TestSeed(), 0.02f, 5 * gpu::kLaneSegment + 77);
  absl::StatusOr<LaneUnit> u = LaneUnit::Build(values, nullptr);
  ASSERT_THAT(u.status(), IsOk());
  // Segments 2..5 (the partial last one included) into an output that holds only them.
  std::vector<uint16_t> out(values.size() - 2 * gpu::kLaneSegment, 0xFFFF);
  gpu::LaneView view = u->view(out.data());
  view.first_segment = 2;
  view.n_segments = u->num_segments() - 2;
  EXPECT_TRUE(DecodeLaneView(view));
  EXPECT_TRUE(std::equal(out.begin(), out.end(), values.begin() + 2 * gpu::kLaneSegment));
}

TEST(LaneUnitTest, CorruptWordsAreCaughtWithoutReadingOutside) {
  const std::vector<uint16_t> values =
      ::df11::testing::NormalBf16(::df11::testing::TestSeed(), 0.02f, 2 * gpu::kLaneSegment);
  absl::StatusOr<LaneUnit> good = LaneUnit::Build(values, nullptr);
  ASSERT_THAT(good.status(), IsOk());
  int caught = 0;
  for (uint32_t flip : {0x0u, 0xFFFFFFFFu, 0x80000000u}) {
    // Segment 0's words replaced: all-zero words make every code the shortest, all-one words the
    // longest; a single flipped bit shifts one lane's codes.
    LaneUnit u = *good;
    auto& words = const_cast<std::vector<uint32_t>&>(u.words());
    const uint32_t end = u.segment_words()[1];
    if (flip == 0x80000000u) {
      words[5] ^= flip;
    } else {
      std::fill(words.begin(), words.begin() + end, flip);
    }
    std::vector<uint16_t> out(values.size());
    const bool emulated_ok = DecodeLaneView(u.view(out.data()));
    const absl::Status reference = u.Decode(out);
    // Both decoders agree on whether the segment is consistent.
    EXPECT_EQ(emulated_ok, reference.ok()) << std::hex << flip;
    if (!reference.ok()) {
      EXPECT_THAT(reference, StatusIs(absl::StatusCode::kDataLoss));
      ++caught;
    }
  }
  EXPECT_GE(caught, 2);  // zeros and ones at least
}

// A unit of several matrices, as a decoder layer's: y = x · Wᵀ + b for each, on its steps, against
// float64 sums; a column's result does not depend on the other columns.
TEST(LaneUnitTest, FusedProductsMatchFloat64AndColumnsAreIndependent) {
  const uint64_t seed = ::df11::testing::TestSeed();
  // (rows, cols): rows inside a segment, a row of exactly one segment, rows across segments.
  const std::pair<uint32_t, uint32_t> shapes[] = {{96, 512}, {3, 8192}, {5, 12288}, {40, 256}};
  std::vector<uint16_t> values;
  std::vector<uint64_t> firsts;
  for (auto [rows, cols] : shapes) {
    firsts.push_back(values.size());
    const std::vector<uint16_t> w =
        ::df11::testing::NormalBf16(seed + values.size(), 0.05f, uint64_t{rows} * cols);
    values.insert(values.end(), w.begin(), w.end());
  }
  ThreadPool pool(2);
  const LaneUnit u = LaneUnit::Build(values, &pool).value();
  for (size_t m = 0; m < std::size(shapes); ++m) {
    const auto [rows, cols] = shapes[m];
    SCOPED_TRACE(::testing::Message() << rows << " x " << cols);
    const std::vector<uint16_t> x = ::df11::testing::NormalBf16(seed + 99 + m, 1.0f, 8 * cols);
    const std::vector<uint16_t> bias = ::df11::testing::NormalBf16(seed + 7 + m, 0.5f, rows);
    std::vector<float> y8(8 * rows), y1(rows);
    gpu::LaneProduct p{.unit = u.view(nullptr),
                       .first_element = firsts[m],
                       .rows = rows,
                       .cols = cols,
                       .bias = bias.data(),
                       .y = y8.data()};
    ASSERT_EQ(MultiplyLaneProducts(std::span(&p, 1), x.data(), 8, true).value_or(false), true);
    for (uint32_t c = 0; c < 8; ++c) {
      for (uint32_t t = 0; t < rows; ++t) {
        double sum = format::Bf16ToFloat(bias[t]);
        for (uint32_t i = 0; i < cols; ++i) {
          sum += double(format::Bf16ToFloat(values[firsts[m] + uint64_t{t} * cols + i])) *
                 format::Bf16ToFloat(x[uint64_t{c} * cols + i]);
        }
        ASSERT_NEAR(y8[uint64_t{c} * rows + t], sum, 1e-4 * (1 + std::abs(sum)))
            << "row " << t << ", column " << c;
      }
    }
    // Column 5 alone gives column 5 of the batch, bit for bit.
    p.y = y1.data();
    ASSERT_EQ(MultiplyLaneProducts(std::span(&p, 1), x.data() + 5 * cols, 1, true).value_or(false),
              true);
    EXPECT_TRUE(std::equal(y1.begin(), y1.end(), y8.begin() + 5 * rows));
    // BF16 outputs: the fp32 sums rounded once.
    std::vector<uint16_t> y16(8 * rows);
    p.y = y16.data();
    ASSERT_EQ(MultiplyLaneProducts(std::span(&p, 1), x.data(), 8, false).value_or(false), true);
    for (size_t i = 0; i < y16.size(); ++i) ASSERT_EQ(y16[i], format::FloatToBf16(y8[i]));
  }
  // A matrix the product does not take: cols not a multiple of 256.
  gpu::LaneProduct bad{.unit = u.view(nullptr), .first_element = 0, .rows = 4, .cols = 100};
  std::vector<uint16_t> x(100);
  EXPECT_THAT(MultiplyLaneProducts(std::span(&bad, 1), x.data(), 1, true).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// Launches that would read past their unit are refused before they run, on every device.
TEST(LaneUnitTest, RefusesLaunchesPastTheirUnit) {
  const std::vector<uint16_t> values =
      ::df11::testing::NormalBf16(::df11::testing::TestSeed(), 0.02f, 3 * 8192 + 100);
  const LaneUnit u = LaneUnit::Build(values, nullptr).value();
  ASSERT_EQ(u.num_segments(), 4u);
  alignas(16) static uint16_t out[4 * 8192];
  gpu::LaneView view = u.view(out);
  DF11_EXPECT_OK(CheckLaneDecodeLaunch(std::span(&view, 1), gpu::LaneWorkspaceBytes()));
  view.first_segment = 2;
  view.n_segments = 2;  // segments 2 and 3: the last ones
  DF11_EXPECT_OK(CheckLaneDecodeLaunch(std::span(&view, 1), gpu::LaneWorkspaceBytes()));
  view.n_segments = 3;  // one past the unit
  EXPECT_THAT(CheckLaneDecodeLaunch(std::span(&view, 1), gpu::LaneWorkspaceBytes()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  view.n_segments = 1;
  EXPECT_THAT(CheckLaneDecodeLaunch(std::span(&view, 1), gpu::LaneWorkspaceBytes() - 1),
              StatusIs(absl::StatusCode::kInvalidArgument));

  // 96 rows of 256 from element 0 end at 24576, inside; from 512, at 25088, past the 24676.
  std::vector<uint16_t> x(256);
  std::vector<float> y(96);
  gpu::LaneProduct p{
      .unit = u.view(nullptr), .first_element = 0, .rows = 96, .cols = 256, .y = y.data()};
  EXPECT_TRUE(MultiplyLaneProducts(std::span(&p, 1), x.data(), 1, true).value_or(false));
  p.first_element = 512;
  EXPECT_THAT(MultiplyLaneProducts(std::span(&p, 1), x.data(), 1, true).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  p.first_element = uint64_t{1} << 40;  // past the unit's end: no wrap-around
  EXPECT_THAT(CheckLaneProducts(std::span(&p, 1), 1),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(LaneUnitTest, RefusesAnEmptyUnit) {
  EXPECT_THAT(LaneUnit::Build(std::span<const uint16_t>(), nullptr).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace df11::codec
