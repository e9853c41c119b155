// Per-tenant admission: running requests counted by slots, and the rate as a token bucket that
// starts full, refills at requests_per_minute / 60 a second and never holds more than a minute's.
#include "daemon/server/tenant_limits.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace df11::server {
namespace {

using ::df11::testing::StatusIs;
using ::testing::HasSubstr;

TEST(TenantLimitsTest, SlotsCountRunningRequestsUntilTheyEnd) {
  TenantLimits limits;
  config::TenantQuota quota;
  quota.max_running_requests = 2;
  absl::StatusOr<TenantLimits::Slot> first = limits.Admit("a", quota);
  absl::StatusOr<TenantLimits::Slot> second = limits.Admit("a", quota);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(limits.running("a"), 2);
  absl::StatusOr<TenantLimits::Slot> third = limits.Admit("a", quota);
  EXPECT_THAT(third.status(),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("tenant a: max_running_requests is 2; 2 of its requests are "
                                 "queued or running, and this one would be one more")));
  EXPECT_TRUE(config::IsQuotaExceeded(third.status()));
  EXPECT_TRUE(limits.Admit("b", quota).ok());  // another tenant's count
  {
    TenantLimits::Slot moved = *std::move(first);
    EXPECT_EQ(limits.running("a"), 2);  // a move is still one request
  }
  EXPECT_EQ(limits.running("a"), 1);
  EXPECT_TRUE(limits.Admit("a", quota).ok());  // ended at once: the slot was a temporary
  EXPECT_EQ(limits.running("a"), 1);
  // No quota: no limit.
  std::vector<TenantLimits::Slot> many;
  for (int i = 0; i < 100; ++i) many.push_back(*limits.Admit("c", {}));
  EXPECT_EQ(limits.running("c"), 100);
}

TEST(TenantLimitsTest, TheRateIsATokenBucket) {
  TenantLimits limits;
  config::TenantQuota quota;
  quota.requests_per_minute = 60;  // one a second
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  for (int i = 0; i < 60; ++i) ASSERT_TRUE(limits.Admit("a", quota, t0).ok()) << i;  // the burst
  absl::Status refused = limits.Admit("a", quota, t0).status();
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted,
                                HasSubstr("tenant a: requests_per_minute is 60 (a burst of 60, "
                                          "then one each 1.00 s) and is used up; this request "
                                          "would be one more; the next is allowed in 1.0 s")));
  EXPECT_FALSE(limits.Admit("a", quota, t0 + absl::Milliseconds(500)).ok());
  EXPECT_TRUE(limits.Admit("a", quota, t0 + absl::Milliseconds(1000)).ok());
  EXPECT_FALSE(limits.Admit("a", quota, t0 + absl::Milliseconds(1100)).ok());
  // A long pause refills at most a minute's worth.
  const absl::Time later = t0 + absl::Hours(1);
  for (int i = 0; i < 60; ++i) ASSERT_TRUE(limits.Admit("a", quota, later).ok()) << i;
  EXPECT_FALSE(limits.Admit("a", quota, later).ok());
  // A refusal for running requests takes nothing from the bucket.
  config::TenantQuota both;
  both.max_running_requests = 1;
  both.requests_per_minute = 2;
  absl::StatusOr<TenantLimits::Slot> held = limits.Admit("b", both, t0);
  ASSERT_TRUE(held.ok());
  EXPECT_FALSE(limits.Admit("b", both, t0).ok());
  *held = TenantLimits::Slot();
  EXPECT_TRUE(limits.Admit("b", both, t0).ok());
  EXPECT_FALSE(limits.Admit("b", both, t0).ok());
}

}  // namespace
}  // namespace df11::server
