// Seeded test corpora for the DF11 codec tests: BF16 vectors with a chosen exponent histogram,
// histograms that force long codes, many LUT rows or the 32-bit limiter, and the test seed.
//
//   const uint64_t seed = df11::testing::TestSeed();
//   SCOPED_TRACE(df11::testing::SeedTrace(seed));
//   std::vector<uint16_t> w = Bf16WithExponentCounts(seed, FibonacciCounts(/*symbols=*/25));
//
// Every generator is deterministic: the same seed gives the same values on every machine (the
// generators use std::mt19937_64 and their own shuffling and bounded draws, never a
// std::*_distribution, except NormalBf16, which is codec::NormalBf16).
#ifndef DF11_TESTS_CODEC_TEST_DATA_H_
#define DF11_TESTS_CODEC_TEST_DATA_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codec/huffman.h"

namespace df11::testing {

// The seed used when DF11_TEST_SEED is not set.
inline constexpr uint64_t kDefaultTestSeed = 0x0DF11DF11ull;

// DF11_TEST_SEED parsed as a decimal (or 0x-prefixed hex) uint64, else kDefaultTestSeed. A value
// that does not parse aborts the test program with a message (a typo must not silently test the
// default).
uint64_t TestSeed();

// "seed 123 (replay: DF11_TEST_SEED=123)", for SCOPED_TRACE.
std::string SeedTrace(uint64_t seed);

// A seed derived from `seed` and `stream`, for several independent generators in one test.
uint64_t DeriveSeed(uint64_t seed, uint64_t stream);

// counts[e] values with exponent e for every e, with random sign and mantissa bits, in a random
// order. The histogram of the result is exactly `counts` (exponents >= 240 included, for tests
// that need uncodable values).
std::vector<uint16_t> Bf16WithExponentCounts(uint64_t seed, const codec::Histogram& counts);

// N(0, stddev^2) values: codec::NormalBf16.
std::vector<uint16_t> NormalBf16(uint64_t seed, float stddev, size_t n);

// Uniformly random BF16 bit patterns whose exponent is below 240 (every codable value, zeros,
// subnormals and both signs included).
std::vector<uint16_t> UniformCodableBf16(uint64_t seed, size_t n);

// Fibonacci counts 1, 1, 2, 3, 5, ... on `symbols` consecutive exponents starting at
// `first_exponent`. With dahuffman's EOF (frequency 1) the Huffman tree is a chain: the longest
// code is `symbols` bits for 2 <= symbols <= 32 and every code longer than 8 bits shares one prefix
// per byte level, so 25..32 symbols give 25..32-bit codes in 5 LUT rows (root, three pointer rows,
// lengths). 33 or more symbols need codes longer than 32 bits and force the limiter. The total is
// F(symbols + 2) - 1: 196 417 for 25 symbols, 5 702 886 for 32, 9 227 464 for 33.
codec::Histogram FibonacciCounts(int symbols, int first_exponent = 100);

// FibonacciCounts(33): the smallest Fibonacci histogram whose unrestricted Huffman code (EOF
// included) is 33 bits deep, so that the official 32-bit limiter must change it.
codec::Histogram LimiterCounts();

// One exponent with `heavy` values plus `singletons` exponents with one value each. For
// heavy >= 1000: every singleton code is 9 bits, and 128 + k singletons need k + 2 LUT rows with
// the length row for k = 1..16 (143 singletons give the maximum of 18 rows); 144 singletons need
// 17 pointer rows, which DF11 cannot address.
codec::Histogram HeavyPlusSingletonsCounts(int singletons, uint64_t heavy = 1000);

// The exponent histogram of `bf16`.
codec::Histogram HistogramOf(std::span<const uint16_t> bf16);

// An n such that EncodeUnit(values[0, n)) has a stream of exactly `stream_bytes` bytes: bisection
// for the smallest n with at least that many bytes, then a scan of the 64 sizes on either side
// (the stream size grows almost, not strictly, monotonically with n). kNotFound if `values` is too
// short or no n nearby hits the size exactly.
absl::StatusOr<size_t> PrefixWithStreamBytes(std::span<const uint16_t> values, size_t stream_bytes);

}  // namespace df11::testing

#endif  // DF11_TESTS_CODEC_TEST_DATA_H_
