#include "codec/interleaved.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "codec/encoder.h"
#include "codec/unit.h"
#include "tests/codec/test_data.h"
#include "tests/testing/status_matchers.h"

namespace df11::codec {
namespace {

using ::df11::testing::IsOk;
using ::df11::testing::StatusIs;
using Region = InterleavedUnit::Region;

// A DF11 unit of `values`, owned with its decoder.
struct Df11Unit {
  explicit Df11Unit(const std::vector<uint16_t>& values) {
    const std::span<const uint16_t> parts[] = {values};
    auto encoded_or = EncodeUnit(parts);
    EXPECT_THAT(encoded_or.status(), IsOk());
    encoded = std::move(*encoded_or);
    auto unit_or = Unit::Validate(encoded.tensors(), "test");
    EXPECT_THAT(unit_or.status(), IsOk());
    unit = std::make_unique<Unit>(std::move(*unit_or));
    decoder = std::make_unique<UnitDecoder>(*unit);
  }
  EncodedUnit encoded;
  std::unique_ptr<Unit> unit;
  std::unique_ptr<UnitDecoder> decoder;
};

// Tensors of assorted row lengths: multiples of 16 and not, rows longer than a segment, a vector.
std::vector<Region> MixedRegions() {
  const std::pair<int64_t, int64_t> shapes[] = {{40, 1024}, {7, 3072}, {3, 48},
                                                {5, 100},   {1, 77},   {2, 40000}};
  std::vector<Region> regions;
  size_t at = 0;
  for (auto [rows, length] : shapes) {
    regions.push_back({.first = at, .rows = rows, .row_length = length});
    at += rows * length;
  }
  return regions;
}

size_t Elements(const std::vector<Region>& regions) {
  return regions.back().first + regions.back().rows * regions.back().row_length;
}

// Every decoder of the layout gives `values` back.
void ExpectDecodes(const std::vector<uint16_t>& values, const std::vector<Region>& regions) {
  Df11Unit df11(values);
  ThreadPool pool(2);
  auto built = InterleavedUnit::Build(*df11.decoder, regions, &pool);
  ASSERT_THAT(built.status(), IsOk());
  const InterleavedUnit& u = *built;
  ASSERT_EQ(u.num_elements(), values.size());

  std::vector<uint16_t> out(values.size(), 0xFFFF);
  u.DecodeSegmentsPortable(0, u.num_segments(), out.data());
  EXPECT_TRUE(out == values) << "portable decoder";

  if (InterleavedUnit::Supported()) {
    std::fill(out.begin(), out.end(), 0xFFFF);
    u.DecodeSegments(0, u.num_segments(), out.data());
    EXPECT_TRUE(out == values) << "AVX-512 decoder";
  }

  std::fill(out.begin(), out.end(), 0xFFFF);
  ASSERT_THAT(u.Decode(out, &pool), IsOk());
  EXPECT_TRUE(out == values) << "Decode on a pool";

  // Ranges that start and end inside segments, span several, or hold one element.
  const size_t n = values.size();
  const std::pair<size_t, size_t> ranges[] = {
      {0, 1}, {n - 1, 1}, {12345, 70000}, {40 * 1024 - 3, 9}, {0, n}};
  for (auto [first, count] : ranges) {
    if (first + count > n) continue;
    std::vector<uint16_t> piece(count);
    ASSERT_THAT(u.DecodeElements(first, piece), IsOk());
    EXPECT_TRUE(std::equal(piece.begin(), piece.end(), values.begin() + first))
        << "elements from " << first;
  }
}

TEST(InterleavedUnitTest, DecodesLlmLikeWeights) {
  const std::vector<Region> regions = MixedRegions();
  ExpectDecodes(::df11::testing::NormalBf16(::df11::testing::TestSeed(), 0.02f, Elements(regions)),
                regions);
}

TEST(InterleavedUnitTest, EscapesRareExponents) {
  // Every codable bit pattern: far more than 31 exponents, so most are escaped.
  const std::vector<Region> regions = MixedRegions();
  ExpectDecodes(::df11::testing::UniformCodableBf16(::df11::testing::TestSeed(), Elements(regions)),
                regions);
}

TEST(InterleavedUnitTest, DecodesOneExponent) {
  std::vector<Region> regions = {{.first = 0, .rows = 3, .row_length = 1000}};
  std::vector<uint16_t> values(3000, 0x3F80);  // 1.0
  values[5] = 0xBF81;                          // same exponent, other sign and mantissa
  ExpectDecodes(values, regions);
}

TEST(InterleavedUnitTest, DecodesUnitsShorterThanOneStep) {
  const std::vector<Region> regions = {{.first = 0, .rows = 1, .row_length = 5}};
  Df11Unit df11(::df11::testing::NormalBf16(7, 0.02f, 5));
  auto u = InterleavedUnit::Build(*df11.decoder, regions, nullptr);
  ASSERT_THAT(u.status(), IsOk());
  std::vector<uint16_t> out(5);
  ASSERT_THAT(u->Decode(out, nullptr), IsOk());
  std::vector<uint16_t> expected(5);
  ASSERT_THAT(df11.decoder->Decode(expected, nullptr), IsOk());
  EXPECT_EQ(out, expected);
}

TEST(InterleavedUnitTest, StoresLlmWeightsInFewerBitsThanDf11) {
  const std::vector<Region> regions = {{.first = 0, .rows = 1024, .row_length = 1024}};
  Df11Unit df11(::df11::testing::NormalBf16(::df11::testing::TestSeed(), 0.02f, 1 << 20));
  auto u = InterleavedUnit::Build(*df11.decoder, regions, nullptr);
  ASSERT_THAT(u.status(), IsOk());
  const UnitTensors& t = df11.unit->tensors();
  const double df11_bits =
      8.0 *
      (t.encoded_exponent.size() + t.gaps.size() + t.output_positions.size() + t.luts.size()) /
      df11.unit->num_elements();
  EXPECT_LT(u->bits_per_exponent(), df11_bits);
  EXPECT_LT(u->bits_per_exponent(), 2.75);
}

TEST(InterleavedUnitTest, RejectsRegionsThatDoNotTileTheUnit) {
  Df11Unit df11(::df11::testing::NormalBf16(1, 0.02f, 100));
  EXPECT_THAT(
      InterleavedUnit::Build(*df11.decoder, {{.first = 0, .rows = 9, .row_length = 10}}, nullptr)
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(InterleavedUnit::Build(*df11.decoder,
                                     {{.first = 0, .rows = 5, .row_length = 10},
                                      {.first = 60, .rows = 4, .row_length = 10}},
                                     nullptr)
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(
      InterleavedUnit::Build(*df11.decoder, {{.first = 0, .rows = 11, .row_length = 10}}, nullptr)
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(InterleavedUnitTest, DecodeElementsRejectsRangesOutsideTheUnit) {
  Df11Unit df11(::df11::testing::NormalBf16(1, 0.02f, 100));
  auto u =
      InterleavedUnit::Build(*df11.decoder, {{.first = 0, .rows = 10, .row_length = 10}}, nullptr);
  ASSERT_THAT(u.status(), IsOk());
  std::vector<uint16_t> out(10);
  EXPECT_THAT(u->DecodeElements(95, out), StatusIs(absl::StatusCode::kInvalidArgument));
  std::vector<uint16_t> wrong(99);
  EXPECT_THAT(u->Decode(wrong, nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace df11::codec
