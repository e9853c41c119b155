#include "tests/codec/test_data.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "codec/encoder.h"
#include "codec/format.h"
#include "codec/synthetic.h"

namespace df11::testing {
namespace {

// A draw in [0, bound) from the raw engine output: the same on every standard library, unlike
// std::uniform_int_distribution. The bias (bound / 2^64) is irrelevant for tests.
uint64_t Below(std::mt19937_64& rng, uint64_t bound) { return rng() % bound; }

// Fisher-Yates with Below(), for the same reason.
void Shuffle(std::mt19937_64& rng, std::vector<uint16_t>& v) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[Below(rng, i)]);
}

absl::StatusOr<size_t> StreamBytes(std::span<const uint16_t> values, size_t n) {
  const std::span<const uint16_t> parts[] = {values.first(n)};
  absl::StatusOr<codec::EncodedUnit> unit = codec::EncodeUnit(parts);
  if (!unit.ok()) return unit.status();
  return unit->encoded_exponent.size();
}

}  // namespace

uint64_t TestSeed() {
  const char* env = std::getenv("DF11_TEST_SEED");
  if (env == nullptr || *env == '\0') return kDefaultTestSeed;
  const std::string text(env);
  uint64_t seed = 0;
  bool ok = false;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    ok = absl::SimpleHexAtoi(absl::string_view(text).substr(2), &seed);
  } else {
    ok = absl::SimpleAtoi(text, &seed);
  }
  if (!ok) {
    std::fprintf(stderr, "DF11_TEST_SEED=%s is not a uint64\n", env);
    std::abort();
  }
  return seed;
}

std::string SeedTrace(uint64_t seed) {
  return absl::StrCat("seed ", seed, " (replay: DF11_TEST_SEED=", seed, ")");
}

uint64_t DeriveSeed(uint64_t seed, uint64_t stream) {
  // splitmix64 of the pair: nearby seeds and streams give unrelated generators.
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (stream + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::vector<uint16_t> Bf16WithExponentCounts(uint64_t seed, const codec::Histogram& counts) {
  std::mt19937_64 rng(seed);
  uint64_t total = 0;
  for (uint64_t c : counts) total += c;
  std::vector<uint16_t> out;
  out.reserve(total);
  for (int e = 0; e < 256; ++e) {
    for (uint64_t i = 0; i < counts[e]; ++i) {
      out.push_back(format::JoinBf16(static_cast<uint8_t>(e), static_cast<uint8_t>(rng())));
    }
  }
  Shuffle(rng, out);
  return out;
}

std::vector<uint16_t> NormalBf16(uint64_t seed, float stddev, size_t n) {
  return codec::NormalBf16(seed, stddev, n);
}

std::vector<uint16_t> UniformCodableBf16(uint64_t seed, size_t n) {
  std::mt19937_64 rng(seed);
  std::vector<uint16_t> out(n);
  for (uint16_t& v : out) {
    do {
      v = static_cast<uint16_t>(rng());
    } while (format::Exponent(v) >= format::kFirstPointerValue);
  }
  return out;
}

codec::Histogram FibonacciCounts(int symbols, int first_exponent) {
  codec::Histogram h{};
  uint64_t a = 1, b = 1;
  for (int i = 0; i < symbols; ++i) {
    h[first_exponent + i] = a;
    const uint64_t c = a + b;
    a = b;
    b = c;
  }
  return h;
}

codec::Histogram LimiterCounts() { return FibonacciCounts(33); }

codec::Histogram HeavyPlusSingletonsCounts(int singletons, uint64_t heavy) {
  codec::Histogram h{};
  h[0] = heavy;
  for (int i = 1; i <= singletons; ++i) h[i] = 1;
  return h;
}

codec::Histogram HistogramOf(std::span<const uint16_t> bf16) {
  codec::Histogram h{};
  codec::CountExponents(bf16, h);
  return h;
}

absl::StatusOr<size_t> PrefixWithStreamBytes(std::span<const uint16_t> values,
                                             size_t stream_bytes) {
  // Bisection for the smallest n whose stream holds at least `stream_bytes` bytes...
  size_t lo = 1, hi = values.size();
  absl::StatusOr<size_t> top = StreamBytes(values, hi);
  if (!top.ok()) return top.status();
  if (*top < stream_bytes) {
    return absl::NotFoundError(absl::StrCat(values.size(), " values encode to only ", *top,
                                            " bytes; ", stream_bytes, " wanted"));
  }
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    absl::StatusOr<size_t> bytes = StreamBytes(values, mid);
    if (!bytes.ok()) return bytes.status();
    if (*bytes >= stream_bytes) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  // ...then the exact size nearby: the code changes with the histogram, so the size is not
  // strictly monotonic and one code can add more than a byte.
  constexpr size_t kScan = 64;
  for (size_t n = lo > kScan ? lo - kScan : 1; n <= std::min(values.size(), lo + kScan); ++n) {
    absl::StatusOr<size_t> bytes = StreamBytes(values, n);
    if (!bytes.ok()) return bytes.status();
    if (*bytes == stream_bytes) return n;
  }
  return absl::NotFoundError(
      absl::StrCat("no prefix near ", lo, " values encodes to exactly ", stream_bytes, " bytes"));
}

}  // namespace df11::testing
