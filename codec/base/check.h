// Invariant checks for programming errors. Bad input never reaches these: input from files, the
// network or requests returns an absl::Status instead.
//
//   DF11_CHECK(offset <= buffer_size);  // no streaming operator: the condition explains itself
#ifndef DF11_CODEC_BASE_CHECK_H_
#define DF11_CODEC_BASE_CHECK_H_

#include <cstdio>
#include <cstdlib>

namespace df11::base {

[[noreturn]] inline void CheckFailed(const char* file, int line, const char* condition) {
  std::fprintf(stderr, "%s:%d: DF11_CHECK failed: %s\n", file, line, condition);
  std::fflush(stderr);
  std::abort();
}

}  // namespace df11::base

// Aborts with file and line when `condition` is false: our own code is wrong.
#define DF11_CHECK(condition) \
  ((condition) ? (void)0 : ::df11::base::CheckFailed(__FILE__, __LINE__, #condition))

// As DF11_CHECK, compiled out of release (NDEBUG) builds.
#ifdef NDEBUG
#define DF11_DCHECK(condition) ((void)0)
#else
#define DF11_DCHECK(condition) DF11_CHECK(condition)
#endif

#endif  // DF11_CODEC_BASE_CHECK_H_
