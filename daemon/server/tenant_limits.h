// Each tenant's requests in flight and its request rate, against the quotas of the tokens file
// (max_running_requests, requests_per_minute). The rate is a token bucket per tenant: it holds up
// to requests_per_minute requests, starts full and refills at requests_per_minute / 60 a second,
// so a tenant may burst up to its minute's worth and then goes on at the steady rate.
//
//   DF11_ASSIGN_OR_RETURN(TenantLimits::Slot slot, limits.Admit("team-a", quota));
//   ... serve the request; the slot ends with it ...
#ifndef DF11_DAEMON_SERVER_TENANT_LIMITS_H_
#define DF11_DAEMON_SERVER_TENANT_LIMITS_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/config/tokens.h"

namespace df11::server {

class TenantLimits {
 public:
  // One admitted request of a tenant, counted as running until destroyed. Movable.
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& other) noexcept { *this = std::move(other); }
    Slot& operator=(Slot&& other) noexcept;
    ~Slot() { Release(); }

   private:
    friend class TenantLimits;
    Slot(TenantLimits* limits, std::string tenant) : limits_(limits), tenant_(std::move(tenant)) {}
    void Release();
    TenantLimits* limits_ = nullptr;
    std::string tenant_;
  };

  // Admits one request of `tenant` at `now` (a monotonic clock, MonotonicNow()):
  // kResourceExhausted marked by config::QuotaExceededError, naming the quota, the use and the
  // request, when the tenant already has max_running_requests in flight or its bucket is empty
  // (with when the next one is allowed).
  absl::StatusOr<Slot> Admit(const std::string& tenant, const config::TenantQuota& quota,
                             absl::Time now = MonotonicNow());
  // The steady clock as an absl::Time: wall-clock steps do not refill buckets.
  static absl::Time MonotonicNow();

  // The tenant's requests in flight.
  int64_t running(const std::string& tenant) const;

 private:
  struct State {
    int64_t running = 0;
    double bucket = -1;  // requests the bucket holds; -1 until the first request
    absl::Time refilled;
  };
  void End(const std::string& tenant);

  mutable absl::Mutex mu_;
  std::map<std::string, State> tenants_ ABSL_GUARDED_BY(mu_);
};

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_TENANT_LIMITS_H_
