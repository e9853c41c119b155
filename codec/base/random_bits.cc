#include "codec/base/random_bits.h"

#include <random>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace df11::base {

uint64_t RandomBits() {
  static absl::Mutex mu(absl::kConstInit);
  // Made on first use, never destroyed: callers may run while static objects are torn down.
  static std::mt19937_64* engine ABSL_GUARDED_BY(mu) = nullptr;
  absl::MutexLock lock(&mu);
  if (engine == nullptr) engine = new std::mt19937_64(std::random_device{}());
  return (*engine)();
}

}  // namespace df11::base
