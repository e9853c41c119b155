#include "codec/thread_pool.h"

#include <atomic>
#include <mutex>
#include <set>
#include <utility>

#include "gtest/gtest.h"

namespace df11::codec {
namespace {

// Every item is covered exactly once, in ranges of at most `grain`, whatever the pool size.
TEST(ThreadPoolTest, CoversEveryItemOnceInGrainSizedRanges) {
  for (int threads : {1, 2, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (size_t n : {0u, 1u, 7u, 64u, 1000u}) {
      for (size_t grain : {1u, 3u, 64u, 5000u}) {
        SCOPED_TRACE(::testing::Message() << threads << " threads, n " << n << ", grain " << grain);
        std::vector<std::atomic<int>> hits(n);
        std::mutex mu;
        std::set<std::pair<size_t, size_t>> ranges;
        pool.ParallelFor(n, grain, [&](size_t begin, size_t end) {
          EXPECT_LT(begin, end);
          EXPECT_LE(end - begin, grain);
          for (size_t i = begin; i < end; ++i) ++hits[i];
          std::lock_guard<std::mutex> lock(mu);
          ranges.insert({begin, end});
        });
        for (size_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "item " << i;
        EXPECT_EQ(ranges.size(), (n + grain - 1) / grain);
      }
    }
  }
}

TEST(ThreadPoolTest, ZeroMeansOneThreadPerCore) {
  ThreadPool pool(0);
  EXPECT_GE(pool.size(), 1);
}

}  // namespace
}  // namespace df11::codec
