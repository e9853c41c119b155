// codec::ExponentCode: length-limited prefix codes for exponents, with an escape.
#include "codec/exponent_code.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <queue>
#include <random>
#include <vector>

namespace df11::codec {
namespace {

// Sum of 2^-length over the code's symbols (coded exponents and the escape): 1 for a complete
// prefix code.
double Kraft(const ExponentCode& code) {
  double sum = 0;
  for (int length : code.lengths) sum += std::ldexp(1.0, -length);
  return sum;
}

// The bits plain Huffman takes on `freqs` (no length limit), computed independently: the sum of
// the merged weights.
uint64_t HuffmanBits(const std::vector<uint64_t>& freqs) {
  std::priority_queue<uint64_t, std::vector<uint64_t>, std::greater<>> q(freqs.begin(),
                                                                         freqs.end());
  uint64_t bits = 0;
  while (q.size() > 1) {
    const uint64_t a = q.top();
    q.pop();
    const uint64_t b = q.top();
    q.pop();
    bits += a + b;
    q.push(a + b);
  }
  return bits;
}

std::array<uint64_t, 256> RandomHistogram(uint64_t seed, int distinct) {
  std::mt19937_64 rng(seed);
  std::array<uint64_t, 256> h{};
  for (int i = 0; i < distinct; ++i)
    h[(i * 37 + 100) % 256] = 1 + rng() % (uint64_t{1} << (i % 20));
  return h;
}

TEST(ExponentCodeTest, CodesAreCompletePrefixCodesWithinTheLimit) {
  for (uint64_t seed = 0; seed < 40; ++seed) {
    for (int max_length : {4, 6, 7}) {
      const std::array<uint64_t, 256> h = RandomHistogram(seed, 2 + seed % 60);
      const ExponentCode code = ExponentCode::Choose(h, max_length, (1 << max_length) - 1, 128);
      SCOPED_TRACE(::testing::Message() << "seed " << seed << ", max length " << max_length);
      EXPECT_GE(code.m, 1);
      EXPECT_LE(code.m, (1 << max_length) - 1);
      EXPECT_DOUBLE_EQ(Kraft(code), 1.0);
      EXPECT_LE(*std::max_element(code.lengths.begin(), code.lengths.end()), max_length);
      // Canonical values: no code is a prefix of another.
      for (int a = 0; a <= code.m; ++a) {
        for (int b = 0; b <= code.m; ++b) {
          if (a == b || code.lengths[a] > code.lengths[b]) continue;
          EXPECT_NE(code.values[b] >> (code.lengths[b] - code.lengths[a]), code.values[a])
              << a << " is a prefix of " << b;
        }
      }
      // Every exponent maps to its symbol's code; escaped ones to the escape's.
      for (int e = 0; e < 256; ++e) {
        EXPECT_EQ(code.length_of[e], code.lengths[code.symbol[e]]);
        EXPECT_EQ(code.escaped(static_cast<uint8_t>(e)), code.symbol[e] == code.m);
      }
    }
  }
}

TEST(ExponentCodeTest, WithoutALimitThatBindsTheCodeIsHuffmans) {
  // Eight exponents with frequencies whose Huffman code is at most 5 bits long: with a 15-bit
  // limit and every exponent coded, the code costs what plain Huffman's does.
  std::array<uint64_t, 256> h{};
  const uint64_t freqs[] = {400, 300, 120, 80, 50, 30, 15, 5};
  std::vector<uint64_t> with_escape;
  for (int i = 0; i < 8; ++i) {
    h[120 + i] = freqs[i];
    with_escape.push_back(freqs[i]);
  }
  const ExponentCode code = ExponentCode::Choose(h, 15, 8);
  EXPECT_EQ(code.m, 8);
  with_escape.push_back(0);  // the escape, never used
  EXPECT_EQ(code.Bits(h), HuffmanBits(with_escape));
}

TEST(ExponentCodeTest, AnEscapeCostCodesMoreExponents) {
  // A long tail: each extra coded exponent costs code space, each escape 8 bits plus the cost.
  std::array<uint64_t, 256> h{};
  for (int i = 0; i < 30; ++i) h[100 + i] = uint64_t{1} << std::max(0, 24 - i);
  const ExponentCode cheap = ExponentCode::Choose(h, 6, 63, 0);
  const ExponentCode costly = ExponentCode::Choose(h, 6, 63, 128);
  EXPECT_GT(costly.m, cheap.m);
  EXPECT_GE(costly.Bits(h), cheap.Bits(h));  // cheap is the smallest
  uint64_t escaped_cheap = 0, escaped_costly = 0;
  for (int e = 0; e < 256; ++e) {
    if (cheap.escaped(static_cast<uint8_t>(e))) escaped_cheap += h[e];
    if (costly.escaped(static_cast<uint8_t>(e))) escaped_costly += h[e];
  }
  EXPECT_LT(escaped_costly, escaped_cheap);
}

TEST(ExponentCodeTest, OneExponentGetsOneBit) {
  std::array<uint64_t, 256> h{};
  h[127] = 1000;
  const ExponentCode code = ExponentCode::Choose(h, 6, 63);
  EXPECT_EQ(code.m, 1);
  EXPECT_EQ(code.length_of[127], 1);
  EXPECT_FALSE(code.escaped(127));
  EXPECT_TRUE(code.escaped(128));
}

}  // namespace
}  // namespace df11::codec
