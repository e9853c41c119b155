// The GPU arena's sub-allocator: best fit, merging on free, the errors' numbers, and compaction
// that moves live bytes without a chunk ever overlapping itself (checked on a host buffer that
// stands in for device memory, under thousands of seeded random allocations and frees).
#include "daemon/runtime/backends/cuda/arena_allocator.h"

#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/codec/test_data.h"
#include "tests/testing/status_matchers.h"

namespace df11::runtime {
namespace {

using ::df11::testing::StatusIs;
using ::testing::HasSubstr;

constexpr uint64_t kGranule = 4096;

TEST(ArenaAllocatorTest, BestFitRoundsToTheGranuleAndMergesOnFree) {
  ArenaAllocator arena(10 * kGranule + 100, kGranule);
  EXPECT_EQ(arena.capacity(), 10 * kGranule);
  DF11_ASSERT_OK_AND_ASSIGN(ArenaAllocator::Id a, arena.Allocate(1));
  DF11_ASSERT_OK_AND_ASSIGN(ArenaAllocator::Id b, arena.Allocate(3 * kGranule));
  DF11_ASSERT_OK_AND_ASSIGN(ArenaAllocator::Id c, arena.Allocate(kGranule + 1));
  DF11_ASSERT_OK_AND_ASSIGN(ArenaAllocator::Id d, arena.Allocate(kGranule));
  EXPECT_EQ(arena.offset(a), 0);
  EXPECT_EQ(arena.size(a), kGranule);
  EXPECT_EQ(arena.offset(b), kGranule);
  EXPECT_EQ(arena.offset(c), 4 * kGranule);
  EXPECT_EQ(arena.size(c), 2 * kGranule);
  EXPECT_EQ(arena.offset(d), 6 * kGranule);
  EXPECT_EQ(arena.allocated_bytes(), 7 * kGranule);
  EXPECT_EQ(arena.free_bytes(), 3 * kGranule);
  // Holes of 3 granules (b) and 3 at the end: a 2-granule request takes the lowest best fit.
  arena.Free(b);
  EXPECT_EQ(arena.free_ranges(), 2);
  DF11_ASSERT_OK_AND_ASSIGN(ArenaAllocator::Id e, arena.Allocate(2 * kGranule));
  EXPECT_EQ(arena.offset(e), kGranule);
  // Freeing a, e and c merges [0, 6 granules) into one range.
  arena.Free(a);
  arena.Free(e);
  arena.Free(c);
  EXPECT_EQ(arena.free_ranges(), 2);
  EXPECT_EQ(arena.largest_free_range(), 6 * kGranule);
  arena.Free(d);
  EXPECT_EQ(arena.free_ranges(), 1);
  EXPECT_EQ(arena.largest_free_range(), 10 * kGranule);
  EXPECT_EQ(arena.allocations(), 0);
}

TEST(ArenaAllocatorTest, ErrorsCarryTheNumbers) {
  ArenaAllocator arena(4 * kGranule, kGranule);
  EXPECT_THAT(arena.Allocate(0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(arena.Allocate(5 * kGranule),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("16384 of 16384 bytes are free in 1 ranges")));
  DF11_ASSERT_OK_AND_ASSIGN(ArenaAllocator::Id a, arena.Allocate(kGranule));
  DF11_ASSERT_OK_AND_ASSIGN(ArenaAllocator::Id b, arena.Allocate(kGranule));
  DF11_ASSERT_OK(arena.Allocate(kGranule).status());
  arena.Free(a);
  // Two free granules, apart: two do not fit in one range, but compaction would make room.
  EXPECT_THAT(arena.Allocate(2 * kGranule),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("the largest 4096 (compaction would make room)")));
  (void)b;
}

TEST(ArenaAllocatorTest, CompactionSlidesAllocationsDownInOrder) {
  ArenaAllocator arena(8 * kGranule, kGranule);
  std::vector<ArenaAllocator::Id> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(arena.Allocate(2 * kGranule).value());
  arena.Free(ids[0]);
  arena.Free(ids[2]);
  const std::vector<ArenaAllocator::Move> moves = arena.Compact();
  ASSERT_EQ(moves.size(), 2);
  EXPECT_EQ(moves[0].id, ids[1]);
  EXPECT_EQ(moves[0].from, 2 * kGranule);
  EXPECT_EQ(moves[0].to, 0);
  EXPECT_EQ(moves[1].id, ids[3]);
  EXPECT_EQ(moves[1].from, 6 * kGranule);
  EXPECT_EQ(moves[1].to, 2 * kGranule);
  EXPECT_EQ(arena.offset(ids[1]), 0);
  EXPECT_EQ(arena.offset(ids[3]), 2 * kGranule);
  EXPECT_EQ(arena.free_ranges(), 1);
  EXPECT_EQ(arena.largest_free_range(), 4 * kGranule);
  EXPECT_TRUE(arena.Compact().empty());  // nothing out of place
}

TEST(ArenaAllocatorTest, ChunksOfAMoveNeverOverlap) {
  // A 10-granule allocation moved down by one granule: ten chunks of one granule.
  const ArenaAllocator::Move move{.id = 1, .from = kGranule, .to = 0, .bytes = 10 * kGranule};
  std::vector<std::pair<uint64_t, uint64_t>> chunks;
  ArenaAllocator::ForEachChunk(move, [&](uint64_t to, uint64_t from, uint64_t bytes) {
    EXPECT_LE(to + bytes, from);
    chunks.emplace_back(to, bytes);
  });
  ASSERT_EQ(chunks.size(), 10);
  EXPECT_EQ(chunks.back().first, 9 * kGranule);
}

// Random allocations and frees on a host buffer: each live allocation holds a pattern of its id;
// when a request fails with enough free bytes, the arena compacts, the moves are copied chunk by
// chunk, and every pattern must survive. The bookkeeping's invariants hold after every step.
TEST(ArenaAllocatorTest, RandomAllocationsSurviveCompaction) {
  const uint64_t seed = ::df11::testing::TestSeed();
  SCOPED_TRACE(::df11::testing::SeedTrace(seed));
  std::mt19937_64 rng(seed);
  constexpr uint64_t kSize = 256 * kGranule;
  ArenaAllocator arena(kSize, kGranule);
  std::vector<uint8_t> memory(kSize, 0);
  std::map<ArenaAllocator::Id, uint8_t> live;  // id -> its fill byte
  auto fill = [&](ArenaAllocator::Id id, uint8_t v) {
    std::memset(memory.data() + arena.offset(id), v, arena.size(id));
  };
  auto intact = [&](ArenaAllocator::Id id, uint8_t v) {
    const uint8_t* p = memory.data() + arena.offset(id);
    for (uint64_t i = 0; i < arena.size(id); ++i) {
      if (p[i] != v) return false;
    }
    return true;
  };
  int compactions = 0;
  for (int step = 0; step < 5000; ++step) {
    if (!live.empty() && rng() % 3 == 0) {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      arena.Free(it->first);
      live.erase(it);
    } else {
      const uint64_t bytes = 1 + rng() % (24 * kGranule);
      absl::StatusOr<ArenaAllocator::Id> id = arena.Allocate(bytes);
      if (!id.ok() && arena.free_bytes() >= arena.RoundUp(bytes)) {
        for (const ArenaAllocator::Move& m : arena.Compact()) {
          ArenaAllocator::ForEachChunk(m, [&](uint64_t to, uint64_t from, uint64_t n) {
            ASSERT_LE(to + n, from);
            std::memcpy(memory.data() + to, memory.data() + from, n);
          });
        }
        ++compactions;
        for (const auto& [live_id, v] : live) ASSERT_TRUE(intact(live_id, v)) << "step " << step;
        id = arena.Allocate(bytes);
        ASSERT_TRUE(id.ok()) << id.status();
      }
      if (id.ok()) {
        const uint8_t v = static_cast<uint8_t>(1 + *id % 255);
        live[*id] = v;
        fill(*id, v);
      }
    }
    uint64_t sum = 0;
    for (const auto& [id, v] : live) sum += arena.size(id);
    ASSERT_EQ(arena.allocated_bytes(), sum);
    ASSERT_EQ(arena.allocations(), live.size());
  }
  for (const auto& [id, v] : live) EXPECT_TRUE(intact(id, v));
  EXPECT_GT(compactions, 0);
}

}  // namespace
}  // namespace df11::runtime
