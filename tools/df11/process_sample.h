// What /proc says of a process on this host (Linux): its threads, resident bytes and CPU time, for
// benchmarks that watch a daemon from outside.
#ifndef DF11_TOOLS_DF11_PROCESS_SAMPLE_H_
#define DF11_TOOLS_DF11_PROCESS_SAMPLE_H_

#include <cstdint>

#include "nlohmann/json.hpp"

namespace df11::tool {

struct ProcessSample {
  int64_t threads = 0;
  int64_t rss_bytes = 0;
  // Of rss_bytes, the anonymous memory (heap, stacks): what leaks grow, without the file pages
  // of mapped model files that come and go with the page cache.
  int64_t rss_anon_bytes = 0;
  double cpu_seconds = 0;  // user + system so far
};

// The process `pid` now; all zero when `pid` is 0 or its /proc entries cannot be read.
ProcessSample SampleProcess(int pid);

// {"threads": ..., "rss_bytes": ...}
nlohmann::json ToJson(const ProcessSample& s);

}  // namespace df11::tool

#endif  // DF11_TOOLS_DF11_PROCESS_SAMPLE_H_
