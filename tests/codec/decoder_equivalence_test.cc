// Every built DF11 decoder on one corpus, compared bit for bit with the input and with the CPU
// reference (codec/decoder.h). The codec is lossless, so the tolerance is zero.
//
// For each case: EncodeUnit -> Unit::Validate -> DecodeReference, which must reproduce the input
// exactly -> every decoder in Decoders(), which must reproduce the reference output exactly.
//
// The GPU kernel is one of the decoders in CUDA builds; ctest runs this program a second time as
// decoder_equivalence_gpu_test (label gpu), where a missing device is a skip.
//
// To add a decoder: append an entry to Decoders() below (a name and a function that decodes a
// validated Unit into a span of BF16 bit patterns). Guard it with its build option (e.g. #if
// DF11_HAVE_CUDA) and let the function return absl::UnavailableError when its device is absent;
// the test then passes over that decoder instead of failing.
//
// To add a case: append a Case to Cases(): a name (letters, digits and '_': it becomes the test
// name), a generator of the unit's parts from a seed, and optionally a check on the encoding that
// proves the case exercises what its name says (code lengths, LUT rows, stream size, limiter).
// Generators take their seed from the test; the seed is derived from DF11_TEST_SEED (default
// kDefaultTestSeed) and the case name, and a failure prints it for replay.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "codec/decoder.h"
#include "codec/encoder.h"
#include "codec/format.h"
#include "codec/synthetic.h"
#include "codec/thread_pool.h"
#include "codec/unit.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/codec/gpu_emulation.h"
#ifdef DF11_HAVE_CUDA
#include "codec/cuda/device_unit.h"
#include "codec/cuda/devices.h"
#endif
#include "tests/codec/test_data.h"
#include "tests/testing/status_matchers.h"

namespace df11::codec {
namespace {

using ::df11::testing::Bf16WithExponentCounts;
using ::df11::testing::DeriveSeed;
using ::df11::testing::FibonacciCounts;
using ::df11::testing::HeavyPlusSingletonsCounts;
using ::df11::testing::LimiterCounts;
using ::df11::testing::PrefixWithStreamBytes;
using ::df11::testing::SeedTrace;
using ::df11::testing::StatusIs;
using ::df11::testing::TestSeed;
using ::df11::testing::UniformCodableBf16;
using ::testing::HasSubstr;

using Parts = std::vector<std::vector<uint16_t>>;

// ---------------------------------------------------------------------------------------------
// Decoders under test.

struct DecoderUnderTest {
  std::string name;
  std::function<absl::Status(const Unit&, std::span<uint16_t>)> decode;
};

const std::vector<DecoderUnderTest>& Decoders() {
  static ThreadPool* const pool = new ThreadPool(3);
  static const std::vector<DecoderUnderTest>* const decoders = new std::vector<DecoderUnderTest>{
      {"DecodeParallel(no pool)",
       [](const Unit& u, std::span<uint16_t> out) { return DecodeParallel(u, out, nullptr); }},
      {"DecodeParallel(ThreadPool(3))",
       [](const Unit& u, std::span<uint16_t> out) { return DecodeParallel(u, out, pool); }},
      {"GPU decoder steps, emulated on the CPU",
       [](const Unit& u, std::span<uint16_t> out) {
         return ::df11::testing::DecodeWithGpuStepsOnCpu(u, out);
       }},
      {"GPU layout pass and decoder steps, emulated on the CPU",
       [](const Unit& u, std::span<uint16_t> out) {
         return ::df11::testing::DecodeWithGpuStepsOnCpu(u, out, /*offsets_from_layout_pass=*/true);
       }},
#ifdef DF11_HAVE_CUDA
      {"GPU decoder (kernel)",
       [](const Unit& u, std::span<uint16_t> out) -> absl::Status {
         static const bool has_device = [] {
           absl::StatusOr<std::vector<cuda::DeviceInfo>> d = cuda::ListDevices();
           return d.ok() && !d->empty();
         }();
         if (!has_device) return absl::UnavailableError("no CUDA device");
         return gpu::DecodeOnDevice(u, out);
       }},
#endif
  };
  return *decoders;
}

// ---------------------------------------------------------------------------------------------
// The corpus.

struct Case {
  std::string name;
  std::function<Parts(uint64_t seed)> make;
  std::function<void(const EncodedUnit&)> check;  // may be empty
};

Parts One(std::vector<uint16_t> v) {
  Parts p;
  p.push_back(std::move(v));
  return p;
}

Histogram Counts(std::initializer_list<std::pair<int, uint64_t>> counts) {
  Histogram h{};
  for (const auto& [e, c] : counts) h[e] = c;
  return h;
}

// A prefix of N(0, 0.02^2) values whose stream holds exactly `bytes` bytes.
std::vector<uint16_t> NormalWithStreamBytes(uint64_t seed, size_t bytes) {
  // About 2.6 bits per code: twice that many values is plenty.
  std::vector<uint16_t> v = NormalBf16(seed, 0.02f, bytes * 8 / 2 * 2 + 256);
  absl::StatusOr<size_t> n = PrefixWithStreamBytes(v, bytes);
  if (!n.ok()) {
    ADD_FAILURE() << n.status();
    return v;
  }
  v.resize(*n);
  return v;
}

std::function<void(const EncodedUnit&)> ExpectStreamBytes(size_t bytes) {
  return [bytes](const EncodedUnit& u) {
    EXPECT_EQ(u.encoded_exponent.size(), bytes);
    EXPECT_EQ(u.gaps.size(), format::NumBlocks(bytes) * format::kGapBytesPerBlock);
    EXPECT_EQ(u.output_positions.size(), 4 * (format::NumBlocks(bytes) + 1));
  };
}

// Fibonacci histograms: codes of exactly `symbols` bits through all four lookups.
Case FibonacciCase(int symbols) {
  return {absl::StrCat("Fibonacci", symbols, "BitCodes"),
          [symbols](uint64_t seed) {
            return One(Bf16WithExponentCounts(seed, FibonacciCounts(symbols)));
          },
          [symbols](const EncodedUnit& u) {
            EXPECT_EQ(u.max_code_length, symbols);
            EXPECT_FALSE(u.limited);
            EXPECT_GE(u.lut_rows, 5);  // root, three pointer rows, lengths: codes need 4 lookups
          }};
}

// A single exponent: 1-bit codes, so n elements take exactly ceil(n / 8) bytes and a full block
// holds the maximum of 32768 elements.
Case SingleExponentCase(size_t n) {
  return {absl::StrCat("SingleExponent", n),
          [n](uint64_t seed) {
            return One(Bf16WithExponentCounts(seed, Counts({{120, n}})));
          },
          [n](const EncodedUnit& u) {
            EXPECT_EQ(u.max_code_length, 1);
            EXPECT_EQ(u.lut_rows, 2);
            EXPECT_EQ(u.encoded_exponent.size(), (n + 7) / 8);
          }};
}

std::vector<Case> Cases() {
  std::vector<Case> cases = {
      // Tiny units.
      {"OneElement", [](uint64_t seed) { return One(NormalBf16(seed, 0.02f, 1)); }, nullptr},
      {"TwoElements", [](uint64_t seed) { return One(NormalBf16(seed, 0.02f, 2)); }, nullptr},
      {"SevenElements", [](uint64_t seed) { return One(NormalBf16(seed, 0.02f, 7)); }, nullptr},
      {"EightElements", [](uint64_t seed) { return One(NormalBf16(seed, 0.02f, 8)); }, nullptr},
      {"NineElements", [](uint64_t seed) { return One(NormalBf16(seed, 0.02f, 9)); }, nullptr},
      {"OneElementPositiveZero", [](uint64_t) { return One({0x0000}); }, nullptr},
      {"OneElementLargestCodable",  // exponent 239, |x| just below 2^113
       [](uint64_t) { return One({0xF7FF}); }, nullptr},
      // Stream sizes around 4096-byte block boundaries.
      {"StreamOneByteBelowOneBlock",
       [](uint64_t seed) { return One(NormalWithStreamBytes(seed, 4095)); },
       ExpectStreamBytes(4095)},
      {"StreamExactlyOneBlock",
       [](uint64_t seed) { return One(NormalWithStreamBytes(seed, 4096)); },
       ExpectStreamBytes(4096)},
      {"StreamOneByteAboveOneBlock",
       [](uint64_t seed) { return One(NormalWithStreamBytes(seed, 4097)); },
       ExpectStreamBytes(4097)},
      {"StreamOneByteBelowTwoBlocks",
       [](uint64_t seed) { return One(NormalWithStreamBytes(seed, 8191)); },
       ExpectStreamBytes(8191)},
      {"StreamExactlyTwoBlocks",
       [](uint64_t seed) { return One(NormalWithStreamBytes(seed, 8192)); },
       ExpectStreamBytes(8192)},
      {"StreamOneByteAboveTwoBlocks",
       [](uint64_t seed) { return One(NormalWithStreamBytes(seed, 8193)); },
       ExpectStreamBytes(8193)},
      {"StreamExactlyThreeBlocks",
       [](uint64_t seed) { return One(NormalWithStreamBytes(seed, 12288)); },
       ExpectStreamBytes(12288)},
      // One repeated exponent, including full 32768-element blocks.
      SingleExponentCase(1),
      SingleExponentCase(5),
      SingleExponentCase(32767),
      SingleExponentCase(32768),
      SingleExponentCase(32769),
      SingleExponentCase(3 * 32768 + 5),
      // Two distinct exponents.
      {"TwoExponentsSkewed",
       [](uint64_t seed) {
         return One(Bf16WithExponentCounts(seed, Counts({{119, 3000}, {121, 7001}})));
       },
       [](const EncodedUnit& u) { EXPECT_EQ(u.max_code_length, 2); }},
      {"TwoExponentsEqualCounts",
       [](uint64_t seed) {
         return One(Bf16WithExponentCounts(seed, Counts({{0, 20000}, {239, 20000}})));
       },
       [](const EncodedUnit& u) { EXPECT_EQ(u.max_code_length, 2); }},
      // Long codes: 25..32 bits, four lookups, five LUT rows.
      FibonacciCase(25),
      FibonacciCase(28),
      FibonacciCase(32),
      {"LimiterShortensCodesTo32Bits",
       [](uint64_t seed) { return One(Bf16WithExponentCounts(seed, LimiterCounts())); },
       [](const EncodedUnit& u) {
         EXPECT_TRUE(u.limited);
         EXPECT_LE(u.max_code_length, format::kMaxCodeLength);
         EXPECT_GE(u.max_code_length, 25);
         EXPECT_GE(u.lut_rows, 5);
       }},
      // Many LUT rows: 9-bit codes under many 8-bit prefixes.
      {"TenLutRows",
       [](uint64_t seed) {
         return One(Bf16WithExponentCounts(seed, HeavyPlusSingletonsCounts(136)));
       },
       [](const EncodedUnit& u) {
         EXPECT_EQ(u.lut_rows, 11);
         EXPECT_EQ(u.max_code_length, 9);
       }},
      {"MaximumLutRows",
       [](uint64_t seed) {
         return One(Bf16WithExponentCounts(seed, HeavyPlusSingletonsCounts(143)));
       },
       [](const EncodedUnit& u) { EXPECT_EQ(u.lut_rows, format::kMaxLutRows); }},
      // LLM-like weights, several seeds, and random bits.
      {"NormalSigma0p02SeedA", [](uint64_t seed) { return One(NormalBf16(seed, 0.02f, 100000)); },
       nullptr},
      {"NormalSigma0p02SeedB", [](uint64_t seed) { return One(NormalBf16(seed, 0.02f, 100000)); },
       nullptr},
      {"NormalSigma0p02SeedC", [](uint64_t seed) { return One(NormalBf16(seed, 0.02f, 37777)); },
       nullptr},
      {"NormalSigma1em3SeedA", [](uint64_t seed) { return One(NormalBf16(seed, 1e-3f, 70000)); },
       nullptr},
      {"NormalSigma1em3SeedB", [](uint64_t seed) { return One(NormalBf16(seed, 1e-3f, 20011)); },
       nullptr},
      {"UniformCodableBitsSeedA",
       [](uint64_t seed) { return One(UniformCodableBf16(seed, 50000)); }, nullptr},
      {"UniformCodableBitsSeedB", [](uint64_t seed) { return One(UniformCodableBf16(seed, 4099)); },
       nullptr},
      {"MostlySignedZeros",
       [](uint64_t seed) {
         std::vector<uint16_t> v = NormalBf16(seed, 0.02f, 60000);
         for (size_t i = 0; i < v.size(); ++i) {
           if (i % 10 != 0) v[i] = (i % 3 == 0) ? 0x8000 : 0x0000;
         }
         return One(std::move(v));
       },
       nullptr},
      // A container unit: three weights concatenated, split at their boundaries.
      {"ContainerOfThreeParts",
       [](uint64_t seed) {
         Parts p;
         p.push_back(NormalBf16(DeriveSeed(seed, 1), 0.02f, 30000));
         p.push_back(NormalBf16(DeriveSeed(seed, 2), 0.05f, 17));
         p.push_back(NormalBf16(DeriveSeed(seed, 3), 1e-3f, 20000));
         return p;
       },
       [](const EncodedUnit& u) {
         EXPECT_EQ(u.split_positions, (std::vector<int64_t>{30000, 30017}));
       }},
  };
  return cases;
}

// ---------------------------------------------------------------------------------------------
// Helpers.

uint64_t NameHash(const std::string& name) {  // FNV-1a: stable seeds per case name
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::vector<uint16_t> Concat(const Parts& parts) {
  std::vector<uint16_t> all;
  for (const auto& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}

std::vector<int64_t> SplitPositionsOf(const Parts& parts) {
  std::vector<int64_t> splits;
  int64_t n = 0;
  for (size_t i = 0; i + 1 < parts.size(); ++i) splits.push_back(n += parts[i].size());
  return splits;
}

// "first difference at i: 0x3c12 vs 0x3c13", or "" when equal.
std::string FirstDifference(std::span<const uint16_t> a, std::span<const uint16_t> b) {
  if (a.size() != b.size()) return absl::StrCat("sizes ", a.size(), " vs ", b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) {
      return absl::StrCat("first difference at element ", i, ": ", absl::Hex(a[i]), " vs ",
                          absl::Hex(b[i]));
    }
  }
  return "";
}

absl::StatusOr<EncodedUnit> Encode(const Parts& parts) {
  std::vector<std::span<const uint16_t>> spans(parts.begin(), parts.end());
  return EncodeUnit(spans);
}

// Decodes `unit` with the reference and every decoder; all must reproduce `input` exactly.
void ExpectEveryDecoderReproduces(const Unit& unit, const std::vector<uint16_t>& input) {
  // Sentinel-filled outputs, so an element that a decoder never writes shows up.
  std::vector<uint16_t> reference(input.size(), 0xFFFF);
  ASSERT_THAT(DecodeReference(unit, reference), ::df11::testing::IsOk());
  ASSERT_EQ(reference, input) << FirstDifference(reference, input);
  for (const DecoderUnderTest& d : Decoders()) {
    SCOPED_TRACE(d.name);
    std::vector<uint16_t> out(input.size(), 0xFFFF);
    const absl::Status s = d.decode(unit, out);
    if (s.code() == absl::StatusCode::kUnavailable) {
      // No device for this decoder: the ordinary run passes over it; the program built for GPU
      // hosts (label gpu, which runs only where there is a device) must not.
#if defined(DF11_TEST_ON_GPU)
      ADD_FAILURE() << d.name << ": " << s;
#endif
      continue;
    }
    ASSERT_THAT(s, ::df11::testing::IsOk());
    EXPECT_EQ(out, reference) << FirstDifference(out, reference);
  }
}

// ---------------------------------------------------------------------------------------------
// The equivalence test.

class DecoderEquivalenceTest : public ::testing::TestWithParam<Case> {};

// DecodeElements and DecodeExponentsInPieces over ranges that start and end on, just before and
// just after block boundaries, single elements at both ends, the whole unit, and random ranges.
void ExpectRangesDecode(const Unit& unit, const std::vector<uint16_t>& input, uint64_t seed) {
  const size_t n = input.size();
  std::vector<std::pair<size_t, size_t>> ranges = {{0, n}, {0, 1}, {n - 1, 1}, {0, 0}, {n, 0}};
  const std::span<const uint32_t> p = unit.positions();
  for (size_t b = 1; b < p.size() - 1 && b < 6; ++b) {
    for (size_t first : {size_t{p[b]} - 1, size_t{p[b]}, size_t{p[b]} + 1}) {
      if (first < n) ranges.emplace_back(first, std::min<size_t>(n - first, p[b + 1] - p[b] + 1));
    }
  }
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 8; ++i) {
    const size_t first = rng() % n;
    ranges.emplace_back(first, rng() % (n - first + 1));
  }
  for (const auto& [first, count] : ranges) {
    SCOPED_TRACE(absl::StrCat("DecodeElements [", first, ", ", first + count, ")"));
    std::vector<uint16_t> out(count, 0xFFFF);
    DF11_ASSERT_OK(DecodeElements(unit, first, out));
    EXPECT_TRUE(std::equal(out.begin(), out.end(), input.begin() + first));
    // The byte planes, piece by piece, join to the same values in element order.
    std::vector<uint16_t> joined;
    DF11_ASSERT_OK(UnitDecoder(unit).DecodeExponentsInPieces(
        first, first + count,
        [&](std::span<const uint8_t> exponents, std::span<const uint8_t> sign_mantissa) {
          ASSERT_EQ(exponents.size(), sign_mantissa.size());
          ASSERT_FALSE(exponents.empty());
          for (size_t i = 0; i < exponents.size(); ++i) {
            joined.push_back(format::JoinBf16(exponents[i], sign_mantissa[i]));
          }
        }));
    ASSERT_EQ(joined.size(), count);
    EXPECT_TRUE(std::equal(joined.begin(), joined.end(), input.begin() + first));
  }
}

// Units above this size skip the variant encodings (they cost time and add no new paths).
constexpr size_t kMaxElementsForVariants = 1 << 20;

TEST_P(DecoderEquivalenceTest, EveryDecoderReproducesTheInput) {
  const Case& c = GetParam();
  const uint64_t base_seed = TestSeed();
  SCOPED_TRACE(SeedTrace(base_seed));
  const Parts parts = c.make(DeriveSeed(base_seed, NameHash(c.name)));
  const std::vector<uint16_t> input = Concat(parts);
  ASSERT_FALSE(input.empty());

  DF11_ASSERT_OK_AND_ASSIGN(const EncodedUnit encoded, Encode(parts));
  EXPECT_EQ(encoded.split_positions, SplitPositionsOf(parts));
  EXPECT_EQ(encoded.sign_mantissa.size(), input.size());
  EXPECT_LE(encoded.max_code_length, format::kMaxCodeLength);
  if (c.check) c.check(encoded);

  DF11_ASSERT_OK_AND_ASSIGN(const Unit unit, Unit::Validate(encoded.tensors(), c.name));
  EXPECT_EQ(unit.num_elements(), input.size());
  EXPECT_EQ(unit.num_blocks(), format::NumBlocks(encoded.encoded_exponent.size()));
  EXPECT_EQ(std::vector<int64_t>(unit.split_positions().begin(), unit.split_positions().end()),
            SplitPositionsOf(parts));
  ExpectEveryDecoderReproduces(unit, input);
  if (HasFatalFailure()) return;
  ExpectRangesDecode(unit, input, DeriveSeed(base_seed, 7));

  // The official writer's short output_positions (n_blocks entries when the stream ends
  // byte-aligned after a code that crossed into a new block; the missing last entry is
  // n_elements): readers accept it for any unit, and it must decode to the same values.
  if (input.size() > kMaxElementsForVariants) return;
  EncodedUnit short_positions = encoded;
  short_positions.output_positions.resize(short_positions.output_positions.size() - 4);
  DF11_ASSERT_OK_AND_ASSIGN(const Unit short_unit,
                            Unit::Validate(short_positions.tensors(), c.name));
  ASSERT_EQ(short_unit.positions().size(), short_unit.num_blocks() + 1);
  EXPECT_EQ(short_unit.positions().back(), input.size());
  SCOPED_TRACE("output_positions without its last entry");
  ExpectEveryDecoderReproduces(short_unit, input);
}

INSTANTIATE_TEST_SUITE_P(Corpus, DecoderEquivalenceTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

// ---------------------------------------------------------------------------------------------
// Inputs the encoder must refuse, and output spans the decoders must refuse.

TEST(EncodeUnitTest, ExponentsFrom240AreFailedPreconditionNamingTheExponent) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  for (int e = format::kFirstPointerValue; e < 256; ++e) {
    SCOPED_TRACE(absl::StrCat("exponent ", e));
    std::vector<uint16_t> v = NormalBf16(seed, 0.02f, 1000);
    v[500] = format::JoinBf16(static_cast<uint8_t>(e), 0x15);
    const std::span<const uint16_t> parts[] = {v};
    EXPECT_THAT(EncodeUnit(parts), StatusIs(absl::StatusCode::kFailedPrecondition,
                                            HasSubstr(absl::StrCat("exponent ", e, " "))));
  }
}

TEST(EncodeUnitTest, InfNanAndHugeValuesAreFailedPrecondition) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  const struct {
    const char* what;
    uint16_t bf16;
    int exponent;
  } kValues[] = {
      {"+Inf", 0x7F80, 255},
      {"-Inf", 0xFF80, 255},
      {"quiet NaN", 0x7FC0, 255},
      {"negative NaN", 0xFFC1, 255},
      {"2^120", FloatToBf16(0x1p120f), 247},
      {"-2^113", FloatToBf16(-0x1p113f), 240},
  };
  for (const auto& value : kValues) {
    SCOPED_TRACE(value.what);
    std::vector<uint16_t> v = NormalBf16(seed, 0.02f, 100);
    v.back() = value.bf16;
    // The uncodable value as the second part of a container unit.
    const std::vector<uint16_t> first = NormalBf16(DeriveSeed(seed, 1), 0.02f, 50);
    const std::span<const uint16_t> parts[] = {first, v};
    EXPECT_THAT(EncodeUnit(parts),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         HasSubstr(absl::StrCat("exponent ", value.exponent, " "))));
  }
}

TEST(EncodeUnitTest, MoreThan16PointerRowsIsFailedPrecondition) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  const std::vector<uint16_t> v = Bf16WithExponentCounts(seed, HeavyPlusSingletonsCounts(144));
  const std::span<const uint16_t> parts[] = {v};
  EXPECT_THAT(EncodeUnit(parts),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("17 pointer rows")));
}

TEST(EncodeUnitTest, NoElementsIsInvalidArgument) {
  EXPECT_THAT(EncodeUnit({}), StatusIs(absl::StatusCode::kInvalidArgument));
  const std::vector<uint16_t> empty;
  const std::span<const uint16_t> parts[] = {empty, empty, empty};
  EXPECT_THAT(EncodeUnit(parts),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at least one element")));
}

TEST(DecoderTest, OutputOfWrongSizeIsInvalidArgument) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  const std::vector<uint16_t> v = NormalBf16(seed, 0.02f, 5000);
  const std::span<const uint16_t> parts[] = {v};
  DF11_ASSERT_OK_AND_ASSIGN(const EncodedUnit encoded, EncodeUnit(parts));
  DF11_ASSERT_OK_AND_ASSIGN(const Unit unit, Unit::Validate(encoded.tensors(), "wrong.size"));
  ThreadPool pool(3);
  for (const size_t size : {size_t{0}, v.size() - 1, v.size() + 1}) {
    SCOPED_TRACE(absl::StrCat("output of ", size));
    std::vector<uint16_t> out(size);
    const auto matcher = StatusIs(absl::StatusCode::kInvalidArgument,
                                  HasSubstr(absl::StrCat("output holds ", size)));
    EXPECT_THAT(DecodeReference(unit, out), matcher);
    EXPECT_THAT(DecodeParallel(unit, out, nullptr), matcher);
    EXPECT_THAT(DecodeParallel(unit, out, &pool), matcher);
    for (const DecoderUnderTest& d : Decoders()) {
      SCOPED_TRACE(d.name);
      const absl::Status s = d.decode(unit, out);
      if (s.code() != absl::StatusCode::kUnavailable) {
        EXPECT_THAT(s, matcher);
      }
    }
  }
}

TEST(DecoderTest, DecodeElementsOutsideTheUnitIsInvalidArgument) {
  const std::vector<uint16_t> v = NormalBf16(TestSeed(), 0.02f, 5000);
  const std::span<const uint16_t> parts[] = {v};
  DF11_ASSERT_OK_AND_ASSIGN(const EncodedUnit encoded, EncodeUnit(parts));
  DF11_ASSERT_OK_AND_ASSIGN(const Unit unit, Unit::Validate(encoded.tensors(), "range"));
  std::vector<uint16_t> out(2);
  EXPECT_THAT(DecodeElements(unit, 4999, out),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("elements [4999, 5001) of unit range, which has 5000")));
  EXPECT_THAT(DecodeElements(unit, 5001, std::span<uint16_t>()),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// Decoding is deterministic and leaves the unit unchanged: a second decode of the same Unit (and
// one from a second thread pool) gives the same values.
TEST(DecoderTest, RepeatedDecodesOfOneUnitAgree) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  const std::vector<uint16_t> v = NormalBf16(seed, 0.02f, 70000);
  const std::span<const uint16_t> parts[] = {v};
  DF11_ASSERT_OK_AND_ASSIGN(const EncodedUnit encoded, EncodeUnit(parts));
  DF11_ASSERT_OK_AND_ASSIGN(const Unit unit, Unit::Validate(encoded.tensors(), "repeat"));
  for (int threads : {1, 2, 5}) {
    SCOPED_TRACE(absl::StrCat(threads, " threads"));
    ThreadPool pool(threads);
    for (int round = 0; round < 2; ++round) {
      std::vector<uint16_t> out(v.size(), 0xFFFF);
      DF11_ASSERT_OK(DecodeParallel(unit, out, &pool));
      EXPECT_EQ(out, v) << FirstDifference(out, v);
    }
  }
}

}  // namespace
}  // namespace df11::codec
