// The front door of a running df11d under load that serves nobody: many idle gRPC watch streams,
// a chunked HTTP body far past limits.max_request_bytes, and hundreds of clients trickling their
// headers (slowloris). Each scenario measures what the attack costs the daemon (threads, memory)
// and what it costs the clients that are served meanwhile. Scenarios of `df11 daemon-bench`.
#ifndef DF11_TOOLS_DF11_FRONT_DOOR_BENCH_H_
#define DF11_TOOLS_DF11_FRONT_DOOR_BENCH_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace df11::tool {

// A request served while an attack runs: true when it succeeded.
using ServedRequest = std::function<bool()>;

// `streams` WatchNodeStatus streams over `connections` gRPC connections to `address`, driven by
// one completion queue (so that 10,000 need no thread each here either), held for `hold` seconds:
// a quarter with nothing else, to measure what the streams alone cost, then with `served` called
// every 50 ms. Every stream must open and end only by this side's cancellation.
absl::StatusOr<nlohmann::json> BenchIdleStreams(const std::string& address, int streams,
                                                int connections, double hold,
                                                const ServedRequest& served, int daemon_pid);

// POST /v1/completions with a `body_bytes` chunked body to `http` (HOST:PORT), `rounds` times:
// the time from the body's first byte to the daemon's answer (413 expected) and to its close, the
// bytes sent before the answer, and the daemon's memory before and after.
absl::StatusOr<nlohmann::json> BenchChunkedBody(const std::string& http, int64_t body_bytes,
                                                int rounds, int daemon_pid);

// `served` back to back for a quarter of `seconds` alone, then for `seconds` while
// `slow_connections` connections to `http` trickle one header byte each per `trickle` seconds
// (those the daemon closes are opened again, so that they stay held). On a loopback `http`, the
// slow connections come from addresses of 127.1.0.0/16, as many clients would, so that the
// per-client connection limit does not stop them.
absl::StatusOr<nlohmann::json> BenchSlowClients(const std::string& http, int slow_connections,
                                                double trickle, double seconds,
                                                const ServedRequest& served, int daemon_pid);

}  // namespace df11::tool

#endif  // DF11_TOOLS_DF11_FRONT_DOOR_BENCH_H_
