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

// The GPU decoder's per-thread steps (codec/cuda/interleaved_steps.h) run thread by thread, warp
// by warp, as the kernel in codec/cuda/interleaved_decode.cu runs them: segment s of `u` into
// out[segment_first(s) ..]. False when the kernel would raise its error flag.
bool EmulateGpuSegment(const InterleavedUnit& u, const std::vector<gpu::InterleavedSegment>& segs,
                       const std::vector<uint16_t>& table, size_t s, uint16_t* out) {
  using namespace gpu;
  const InterleavedSegment seg = segs[s], next = segs[s + 1];
  if (next.first < seg.first || next.word < seg.word + 2 * kInterleavedLanes ||
      next.escape < seg.escape) {
    return false;
  }
  const uint16_t* words = u.words().data();
  const uint8_t* escapes = u.escapes().data();
  const uint8_t* sm = u.sign_mantissa().data() + seg.first;
  const uint64_t count = next.first - seg.first;
  const uint64_t steps = (count + kInterleavedLanes - 1) / kInterleavedLanes;
  LaneBits lanes[32][2];
  for (int t = 0; t < 32; ++t) StartLanes(lanes[t], words, seg.word, t);
  uint64_t word = seg.word + 2 * kInterleavedLanes, escape = seg.escape;
  bool ok = true;
  for (uint64_t step = 0; step < steps; ++step) {
    LaneCodes c[32];
    uint32_t esc[2] = {}, ask[2] = {};  // the four ballots
    for (int t = 0; t < 32; ++t) {
      c[t] = DecodeLanes(lanes[t], table.data());
      for (int k = 0; k < 2; ++k) {
        esc[k] |= uint32_t{c[t].escaped[k]} << t;
        ask[k] |= uint32_t{c[t].asks[k]} << t;
      }
    }
    uint32_t escaped = 0, asked = 0;
    for (int t = 0; t < 32; ++t) {
      const Ranks e = RankLanes(esc[0], esc[1], t), a = RankLanes(ask[0], ask[1], t);
      escaped = e.total;
      asked = a.total;
      for (int k = 0; k < 2; ++k) {
        if (c[t].escaped[k]) {
          const uint64_t at = escape + e.rank[k];
          if (at < next.escape) {
            c[t].exponent[k] = escapes[at];
          } else {
            ok = false;
          }
        }
        if (c[t].asks[k]) ok &= AskWord(lanes[t][k], words, word + a.rank[k], next.word);
        const uint64_t j = step * kInterleavedLanes + 2 * t + k;
        if (j < count) out[j] = static_cast<uint16_t>(JoinExponent(c[t].exponent[k], sm[j]));
      }
    }
    escape += escaped;
    word += asked;
  }
  return ok && word == next.word && escape == next.escape;
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
  const std::vector<gpu::InterleavedSegment> segs = u.GpuSegments();
  const std::vector<uint16_t> table = u.GpuTable();
  for (size_t s = 0; s < u.num_segments(); ++s) {
    ASSERT_TRUE(EmulateGpuSegment(u, segs, table, s, out.data() + u.segment_first(s)))
        << "GPU steps flag segment " << s;
  }
  EXPECT_TRUE(out == values) << "GPU decoder's steps";

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

// Segment starts that do not match the codes: the GPU decoder's steps flag the segment and read
// nothing outside its own words and escape bytes (ASan checks that in its build).
TEST(InterleavedUnitTest, GpuStepsFlagSegmentsWhoseCodesDoNotEndAtTheNextStart) {
  const std::vector<Region> regions = {{.first = 0, .rows = 8, .row_length = 10000}};
  Df11Unit df11(::df11::testing::UniformCodableBf16(::df11::testing::TestSeed(), 80000));
  auto u = InterleavedUnit::Build(*df11.decoder, regions, nullptr);
  ASSERT_THAT(u.status(), IsOk());
  ASSERT_GE(u->num_segments(), 3u);
  const std::vector<uint16_t> table = u->GpuTable();
  std::vector<uint16_t> out(u->num_elements());
  const auto flagged = [&](std::vector<gpu::InterleavedSegment> segs, size_t s) {
    return !EmulateGpuSegment(*u, segs, table, s, out.data() + segs[s].first);
  };
  const std::vector<gpu::InterleavedSegment> sound = u->GpuSegments();
  for (size_t s = 0; s < u->num_segments(); ++s) EXPECT_FALSE(flagged(sound, s)) << s;
  std::vector<gpu::InterleavedSegment> segs = sound;
  segs[1].word -= 1;  // segment 0 has one word fewer, segment 1 one more
  EXPECT_TRUE(flagged(segs, 0));
  EXPECT_TRUE(flagged(segs, 1));
  segs = sound;
  segs[2].escape += 1;  // segment 1 has an escape byte too many
  EXPECT_TRUE(flagged(segs, 1));
  segs = sound;
  segs[1].word = segs[0].word + 100;  // fewer words than the lanes' first two each
  EXPECT_TRUE(flagged(segs, 0));
  segs = sound;
  segs.back().word = segs[segs.size() - 2].word + 2 * gpu::kInterleavedLanes;  // a cut last segment
  EXPECT_TRUE(flagged(segs, u->num_segments() - 1));
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
