// The read-rate kernel's per-thread step and its check, run on the CPU thread by thread in a
// small grid: the threads' sums add up to the whole buffer's, which SumOfIndices gives for a
// buffer whose word i holds i, and a grid that skips a quad does not.
#include "tools/df11/device_rates.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace df11::tool {
namespace {

std::vector<Quad> IndexBuffer(uint64_t quads) {
  std::vector<Quad> q(quads);
  for (uint64_t i = 0; i < quads; ++i) {
    const auto w = static_cast<uint32_t>(4 * i);
    q[i] = Quad{w, w + 1, w + 2, w + 3};
  }
  return q;
}

uint32_t GridSum(const std::vector<Quad>& q, uint64_t threads, uint64_t covered) {
  uint32_t sum = 0;
  for (uint64_t t = 0; t < threads; ++t) sum += SumOfQuads(q.data(), covered, t, threads);
  return sum;
}

TEST(DeviceRatesTest, SumOfIndicesIsTheSumOfEveryIndexModulo2To32) {
  uint32_t sum = 0;
  for (uint64_t n = 0; n < 1000; ++n) {
    EXPECT_EQ(SumOfIndices(n), sum) << n;
    sum += static_cast<uint32_t>(n);
  }
  // A 1 GiB buffer's 2^28 words (and one more): the sum wraps.
  const uint64_t n = uint64_t{1} << 28;
  for (uint64_t i = 1000; i < n; ++i) sum += static_cast<uint32_t>(i);
  EXPECT_EQ(SumOfIndices(n), sum);
  EXPECT_EQ(SumOfIndices(n + 1), static_cast<uint32_t>(sum + n));
}

TEST(DeviceRatesTest, TheThreadsSumsAddUpToTheBuffersSum) {
  for (uint64_t quads : {1, 7, 64, 1000, 4099}) {
    const std::vector<Quad> q = IndexBuffer(quads);
    for (uint64_t threads : {1, 3, 32, 512, 5000}) {
      EXPECT_EQ(GridSum(q, threads, quads), SumOfIndices(4 * quads)) << quads << " " << threads;
    }
  }
}

TEST(DeviceRatesTest, AQuadLeftOutChangesTheResult) {
  const std::vector<Quad> q = IndexBuffer(4099);
  EXPECT_NE(GridSum(q, 64, 4098), SumOfIndices(4 * 4099));
}

}  // namespace
}  // namespace df11::tool
