// The callback streams' clock (daemon/server/timer.h) and the HTTP handlers' pool
// (daemon/server/elastic_pool.h). Also run by the ThreadSanitizer configuration (label tsan).
#include "daemon/server/timer.h"

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/server/elastic_pool.h"
#include "gtest/gtest.h"

namespace df11::server {
namespace {

// Polls `done` for up to 10 s.
template <typename F>
bool Eventually(F done) {
  for (const absl::Time until = absl::Now() + absl::Seconds(10); absl::Now() < until;) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return done();
}

TEST(TimerTest, RunsCallbacksInTheOrderOfTheirTimes) {
  Timer timer;
  std::mutex mu;
  std::vector<int> order;
  absl::Notification last;
  auto record = [&](int i) {
    std::lock_guard lock(mu);
    order.push_back(i);
    if (order.size() == 3) last.Notify();
  };
  timer.After(absl::Milliseconds(60), [&] { record(1); });
  timer.After(absl::Milliseconds(20), [&] { record(2); });
  timer.After(absl::Milliseconds(40), [&] { record(3); });
  ASSERT_TRUE(last.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(order, (std::vector<int>{2, 3, 1}));
}

TEST(TimerTest, ACancelledCallbackNeverRuns) {
  Timer timer;
  std::atomic<bool> ran{false};
  const uint64_t id = timer.After(absl::Milliseconds(20), [&] { ran = true; });
  EXPECT_TRUE(timer.Cancel(id));
  EXPECT_FALSE(timer.Cancel(id));  // gone already
  absl::Notification later;
  timer.After(absl::Milliseconds(40), [&] { later.Notify(); });
  ASSERT_TRUE(later.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_FALSE(ran);
}

TEST(TimerTest, RescheduleMovesACallbackNotYetRun) {
  Timer timer;
  absl::Notification ran;
  const uint64_t id = timer.After(absl::Hours(1), [&] { ran.Notify(); });
  EXPECT_TRUE(timer.Reschedule(id, absl::ZeroDuration()));
  ASSERT_TRUE(ran.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_FALSE(timer.Reschedule(id, absl::ZeroDuration()));  // it has run
  EXPECT_FALSE(timer.Cancel(id));
}

TEST(TimerTest, CancellingARunningCallbackWaitsForItToReturn) {
  Timer timer;
  absl::Notification started, release;
  std::atomic<bool> returned{false};
  const uint64_t id = timer.After(absl::ZeroDuration(), [&] {
    started.Notify();
    release.WaitForNotification();
    returned = true;
  });
  started.WaitForNotification();
  std::thread releaser([&] {
    absl::SleepFor(absl::Milliseconds(50));
    release.Notify();
  });
  EXPECT_FALSE(timer.Cancel(id));
  EXPECT_TRUE(returned);  // Cancel came back only after the callback did
  releaser.join();
}

TEST(TimerTest, ACallbackMayCancelItselfAndScheduleAnother) {
  Timer timer;
  absl::Notification second;
  uint64_t id = 0;
  absl::Notification scheduled;
  id = timer.After(absl::Milliseconds(10), [&] {
    scheduled.WaitForNotification();
    EXPECT_FALSE(timer.Cancel(id));  // running: false, and no wait for itself
    timer.After(absl::ZeroDuration(), [&] { second.Notify(); });
  });
  scheduled.Notify();
  EXPECT_TRUE(second.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

TEST(TimerTest, DestroyingTheTimerDropsWhatIsPending) {
  std::atomic<bool> ran{false};
  {
    Timer timer;
    timer.After(absl::Hours(1), [&] { ran = true; });
  }
  EXPECT_FALSE(ran);
}

TEST(ElasticPoolTest, MakesThreadsOnlyForWorkThatOverlaps) {
  ElasticPool pool(8);
  EXPECT_EQ(pool.threads(), 0);
  for (int i = 0; i < 20; ++i) {
    absl::Notification done;
    pool.Post([&] { done.Notify(); });
    done.WaitForNotification();
    // Back to waiting, the thread takes the next task: one thread for work that never overlaps.
    ASSERT_TRUE(Eventually([&] { return pool.idle() == 1; }));
    ASSERT_EQ(pool.threads(), 1);
  }
}

TEST(ElasticPoolTest, RunsAtMostMaxThreadsAndQueuesTheRest) {
  ElasticPool pool(4);
  absl::Notification release;
  std::atomic<int> running{0}, most{0}, finished{0};
  for (int i = 0; i < 10; ++i) {
    pool.Post([&] {
      const int now = ++running;
      int seen = most.load();
      while (now > seen && !most.compare_exchange_weak(seen, now)) {
      }
      release.WaitForNotification();
      --running;
      ++finished;
    });
  }
  ASSERT_TRUE(Eventually([&] { return running.load() == 4; }));
  EXPECT_EQ(pool.threads(), 4);
  release.Notify();
  ASSERT_TRUE(Eventually([&] { return finished.load() == 10; }));
  EXPECT_EQ(most.load(), 4);
}

TEST(ElasticPoolTest, IdleThreadsEnd) {
  ElasticPool pool(4, absl::Milliseconds(20));
  absl::Notification release;
  for (int i = 0; i < 4; ++i) pool.Post([&] { release.WaitForNotification(); });
  ASSERT_TRUE(Eventually([&] { return pool.threads() == 4; }));
  release.Notify();
  EXPECT_TRUE(Eventually([&] { return pool.threads() == 0; }));
  // And it makes them again.
  absl::Notification ran;
  pool.Post([&] { ran.Notify(); });
  EXPECT_TRUE(ran.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

TEST(ElasticPoolTest, JoinRunsEveryTaskPosted) {
  std::atomic<int> ran{0};
  ElasticPool pool(2);
  for (int i = 0; i < 50; ++i) {
    pool.Post([&] {
      absl::SleepFor(absl::Microseconds(200));
      ++ran;
    });
  }
  pool.Join();
  EXPECT_EQ(ran.load(), 50);
  EXPECT_EQ(pool.threads(), 0);
}

TEST(ElasticPoolTest, JoinWaitsForTasksPostedWhileItWaits) {
  std::atomic<bool> later_ran{false};
  ElasticPool pool(1);
  pool.Post([&] {
    absl::SleepFor(absl::Milliseconds(50));  // Join is waiting by now
    pool.Post([&] {
      absl::SleepFor(absl::Milliseconds(50));
      later_ran = true;
    });
  });
  absl::SleepFor(absl::Milliseconds(10));
  pool.Join();
  EXPECT_TRUE(later_ran);
  EXPECT_EQ(pool.threads(), 0);
}

}  // namespace
}  // namespace df11::server
