// Random bits for identifiers (temporary file names, trace ids, completion ids): one engine seeded
// from std::random_device, shared by every thread under a lock. Not thread_local: a 5 KB engine in
// static TLS is carved out of every thread's stack, and some threads (the metrics server's) have
// little. Not for cryptography.
//
//   const uint64_t id = base::RandomBits();
#ifndef DF11_CODEC_BASE_RANDOM_BITS_H_
#define DF11_CODEC_BASE_RANDOM_BITS_H_

#include <cstdint>

namespace df11::base {

// 64 uniformly random bits; safe to call from any thread.
uint64_t RandomBits();

}  // namespace df11::base

#endif  // DF11_CODEC_BASE_RANDOM_BITS_H_
