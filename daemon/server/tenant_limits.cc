#include "daemon/server/tenant_limits.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace df11::server {

TenantLimits::Slot& TenantLimits::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    Release();
    limits_ = std::exchange(other.limits_, nullptr);
    tenant_ = std::move(other.tenant_);
  }
  return *this;
}

void TenantLimits::Slot::Release() {
  if (limits_ != nullptr) std::exchange(limits_, nullptr)->End(tenant_);
}

absl::StatusOr<TenantLimits::Slot> TenantLimits::Admit(const std::string& tenant,
                                                       const config::TenantQuota& quota,
                                                       absl::Time now) {
  absl::MutexLock lock(&mu_);
  State& state = tenants_[tenant];
  if (quota.max_running_requests && state.running >= *quota.max_running_requests) {
    return config::QuotaExceededError(absl::StrCat(
        "tenant ", tenant, ": max_running_requests is ", *quota.max_running_requests, "; ",
        state.running, " of its requests are queued or running, and this one would be one more"));
  }
  if (quota.requests_per_minute) {
    const double capacity = static_cast<double>(*quota.requests_per_minute);
    const double per_second = capacity / 60;
    if (state.bucket < 0) {
      state.bucket = capacity;
    } else {
      const double elapsed = std::max(0.0, absl::ToDoubleSeconds(now - state.refilled));
      state.bucket = std::min(capacity, state.bucket + elapsed * per_second);
    }
    state.refilled = now;
    if (state.bucket < 1) {
      return config::QuotaExceededError(absl::StrFormat(
          "tenant %s: requests_per_minute is %d (a burst of %d, then one each %.2f s) and is used "
          "up; this request would be one more; the next is allowed in %.1f s",
          tenant, *quota.requests_per_minute, *quota.requests_per_minute, 1 / per_second,
          (1 - state.bucket) / per_second));
    }
    state.bucket -= 1;
  }
  ++state.running;
  return Slot(this, tenant);
}

absl::Time TenantLimits::MonotonicNow() {
  return absl::FromUnixNanos(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count());
}

int64_t TenantLimits::running(const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? 0 : it->second.running;
}

void TenantLimits::End(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  --tenants_[tenant].running;
}

}  // namespace df11::server
