// The decode-step matrix-vector kernels: the AVX2 kernels give the portable kernels' bits, the
// DF11 byte-plane kernel gives the BF16 kernel's bits, any split of W rows gives the same bits,
// and the portable kernel's arithmetic is the documented fixed order (checked against a double
// sum within fp32 rounding).
#include "daemon/runtime/backends/cpu/matvec.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codec/encoder.h"
#include "codec/format.h"
#include "codec/interleaved.h"
#include "gtest/gtest.h"

namespace df11::runtime {
namespace {

struct Problem {
  int64_t out, in, rows;
  std::vector<uint16_t> w;  // out x in BF16
  std::vector<float> x;     // rows x in
  std::vector<uint8_t> exponents, sign_mantissa;
};

uint16_t RandomBf16(std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 0.05f);
  float f = normal(rng);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>(bits >> 16);
}

Problem MakeProblem(int64_t out, int64_t in, int64_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  Problem p{out, in, rows, {}, {}, {}, {}};
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t i = 0; i < out * in; ++i) {
    p.w.push_back(RandomBf16(rng));
    p.exponents.push_back(format::Exponent(p.w.back()));
    p.sign_mantissa.push_back(format::SignMantissa(p.w.back()));
  }
  for (int64_t i = 0; i < rows * in; ++i) p.x.push_back(normal(rng));
  return p;
}

std::vector<uint32_t> Bits(const std::vector<float>& v) {
  std::vector<uint32_t> bits(v.size());
  std::memcpy(bits.data(), v.data(), v.size() * 4);
  return bits;
}

using format::Bf16ToFloat;

// Lengths around the kernels' runs of 32 and 16, and the model sizes.
constexpr int64_t kInputLengths[] = {1, 7, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 100, 1024, 1040};

TEST(MatVecTest, AllKernelsGiveTheSameBits) {
  for (int64_t in : kInputLengths) {
    for (int64_t rows : {1, 2, 3, 5}) {
      SCOPED_TRACE(absl::StrCat("in ", in, ", rows ", rows));
      const Problem p = MakeProblem(/*out=*/9, in, rows, static_cast<uint32_t>(in * 10 + rows));
      MatVecInput input;
      input.Set(p.x.data(), rows, in);
      std::vector<float> portable(rows * p.out), bf16(rows * p.out), df11(rows * p.out),
          df11_portable(rows * p.out);
      MatVecBf16Portable(p.w.data(), p.out, input, portable.data(), p.out);
      MatVecBf16(p.w.data(), p.out, input, bf16.data(), p.out);
      MatVecDf11(p.exponents.data(), p.sign_mantissa.data(), p.out, input, df11.data(), p.out);
      MatVecDf11Portable(p.exponents.data(), p.sign_mantissa.data(), p.out, input,
                         df11_portable.data(), p.out);
      EXPECT_EQ(Bits(bf16), Bits(portable));
      EXPECT_EQ(Bits(df11), Bits(portable));
      EXPECT_EQ(Bits(df11_portable), Bits(portable));
    }
  }
}

TEST(MatVecTest, SplittingWRowsChangesNoBit) {
  const Problem p = MakeProblem(/*out=*/13, /*in=*/80, /*rows=*/3, 7);
  MatVecInput input;
  input.Set(p.x.data(), p.rows, p.in);
  std::vector<float> whole(p.rows * p.out), split(p.rows * p.out);
  MatVecDf11(p.exponents.data(), p.sign_mantissa.data(), p.out, input, whole.data(), p.out);
  for (int64_t o = 0; o < p.out; o += 4) {
    const size_t n = static_cast<size_t>(std::min<int64_t>(4, p.out - o));
    MatVecDf11(p.exponents.data() + o * p.in, p.sign_mantissa.data() + o * p.in, n, input,
               split.data() + o, p.out);
  }
  EXPECT_EQ(Bits(split), Bits(whole));
}

TEST(MatVecTest, ProductsMatchADoubleSum) {
  for (int64_t in : kInputLengths) {
    SCOPED_TRACE(absl::StrCat("in ", in));
    const Problem p = MakeProblem(/*out=*/5, in, /*rows=*/2, static_cast<uint32_t>(in));
    MatVecInput input;
    input.Set(p.x.data(), p.rows, in);
    std::vector<float> y(p.rows * p.out);
    MatVecBf16(p.w.data(), p.out, input, y.data(), p.out);
    for (int64_t r = 0; r < p.rows; ++r) {
      for (int64_t o = 0; o < p.out; ++o) {
        double sum = 0, magnitude = 0;
        for (int64_t i = 0; i < in; ++i) {
          const double term = double(Bf16ToFloat(p.w[o * in + i])) * p.x[r * in + i];
          sum += term;
          magnitude += std::abs(term);
        }
        EXPECT_NEAR(y[r * p.out + o], sum, 1e-6 * magnitude + 1e-30)
            << "row " << r << ", W row " << o;
      }
    }
  }
}

// codec::InterleavedUnit::MatVecSegments decodes and multiplies in one pass; it must give the BF16
// kernel's bits, for rows a multiple of 64 long and for other multiples of 16, over any split of
// the segments.
TEST(InterleavedMatVecTest, MatchesTheBf16Kernel) {
  if (!codec::InterleavedUnit::Supported()) GTEST_SKIP() << "no AVX-512 VBMI2";
  const std::pair<int64_t, int64_t> shapes[] = {{40, 1024}, {33, 48}, {9, 3072}, {500, 80}};
  std::mt19937 rng(7);
  std::vector<uint16_t> w;
  std::vector<codec::InterleavedUnit::Region> regions;
  for (auto [rows, length] : shapes) {
    regions.push_back({.first = w.size(), .rows = rows, .row_length = length});
    for (int64_t i = 0; i < rows * length; ++i) w.push_back(RandomBf16(rng));
  }
  const std::span<const uint16_t> parts[] = {w};
  auto encoded = codec::EncodeUnit(parts);
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  auto unit = codec::Unit::Validate(encoded->tensors(), "test");
  ASSERT_TRUE(unit.ok()) << unit.status();
  const codec::UnitDecoder decoder(*unit);
  auto u = codec::InterleavedUnit::Build(decoder, regions, nullptr);
  ASSERT_TRUE(u.ok()) << u.status();
  for (size_t r = 0; r < regions.size(); ++r) {
    const auto [first, rows, length] = regions[r];
    SCOPED_TRACE(absl::StrCat(rows, " rows of ", length));
    ASSERT_TRUE(u->FusedMatVecSupported(r));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(length);
    for (float& v : x) v = normal(rng);
    MatVecInput input;
    input.Set(x.data(), 1, length);
    std::vector<float> expected(rows);
    MatVecBf16(w.data() + first, rows, input, expected.data(), rows);
    const size_t begin = u->first_segment(r), end = u->first_segment(r + 1);
    std::vector<float> whole(rows), split(rows);
    u->MatVecSegments(begin, end, x.data(), whole.data());
    EXPECT_EQ(whole, expected);
    for (size_t s = begin; s < end; ++s) {
      const size_t row = (u->segment_first(s) - first) / length;
      u->MatVecSegments(s, s + 1, x.data(), split.data() + row);
    }
    EXPECT_EQ(split, expected);
  }
}

}  // namespace
}  // namespace df11::runtime
