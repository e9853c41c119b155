// The GPU KV pool: pages in bytes shared by models of different shapes, whole page tables taken
// at once, exact errors, and pages returned from many threads.
#include "daemon/runtime/backends/cuda/kv_page_pool.h"

#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace df11::runtime {
namespace {

using ::df11::testing::StatusIs;
using ::testing::HasSubstr;

TEST(KvPagePoolTest, ModelsOfDifferentShapesSharePages) {
  KvPagePool pool(/*bytes=*/10 * 4096 + 1000, /*page_bytes=*/4096);
  EXPECT_EQ(pool.pages(), 10);
  EXPECT_EQ(pool.bytes(), 40960);
  // 1000 bytes a position: 4 positions a page; 10 positions take 3 pages.
  EXPECT_EQ(pool.PositionsPerPage(1000), 4);
  DF11_ASSERT_OK_AND_ASSIGN(KvPageTable a, pool.Reserve(1000, 10));
  EXPECT_EQ(a.pages.size(), 3);
  EXPECT_EQ(a.positions_per_page, 4);
  EXPECT_EQ(a.capacity, 12);
  EXPECT_EQ(a.pages, (std::vector<uint32_t>{0, 1, 2}));
  // 3000 bytes a position: one a page.
  DF11_ASSERT_OK_AND_ASSIGN(KvPageTable b, pool.Reserve(3000, 5));
  EXPECT_EQ(b.pages.size(), 5);
  EXPECT_EQ(pool.free_pages(), 2);
  EXPECT_EQ(pool.used_bytes(), 8 * 4096);
  pool.Release(a);
  EXPECT_TRUE(a.pages.empty());
  EXPECT_EQ(pool.free_pages(), 5);
  pool.Release(b);
  EXPECT_EQ(pool.free_bytes(), pool.bytes());
}

TEST(KvPagePoolTest, ErrorsCarryTheNumbers) {
  KvPagePool pool(4 * 4096, 4096);
  EXPECT_THAT(pool.Reserve(5000, 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("takes 5000 bytes, more than a KV page of 4096 bytes")));
  EXPECT_THAT(pool.Reserve(100, 0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(pool.Reserve(1024, 17),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("17 positions needs 5 pages of 4096 bytes (20480 bytes); the KV "
                                 "pool has 4 of 4 pages free")));
  DF11_ASSERT_OK_AND_ASSIGN(KvPageTable all, pool.Reserve(1024, 16));
  EXPECT_THAT(pool.Reserve(1024, 1), StatusIs(absl::StatusCode::kResourceExhausted));
  pool.Release(all);
  DF11_EXPECT_OK(pool.Reserve(1024, 1).status());
}

TEST(KvPagePoolTest, ThreadsReserveAndReleaseWithoutLosingPages) {
  KvPagePool pool(64 * 1024, 1024);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&pool, t] {
      for (int i = 0; i < 2000; ++i) {
        absl::StatusOr<KvPageTable> table = pool.Reserve(256, 1 + (i * 7 + t) % 40);
        if (table.ok()) pool.Release(*table);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(pool.free_pages(), 64);
}

}  // namespace
}  // namespace df11::runtime
