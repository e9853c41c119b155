// Bounds on the work one render may do. A chat template is untrusted input (it comes with the
// model), so loops, string building and output are all limited; exceeding a limit is
// kResourceExhausted naming the limit and the template line.
#ifndef DF11_DAEMON_RUNTIME_TEXT_CHAT_LIMITS_H_
#define DF11_DAEMON_RUNTIME_TEXT_CHAT_LIMITS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace df11::runtime::chat {

struct RenderLimits {
  // Bytes of rendered text; also the largest string or tojson text a template may build.
  size_t max_output_bytes = size_t{32} << 20;
  // Evaluation steps: statements, expression nodes, loop iterations and items processed by
  // filters (a prompt of a few hundred messages takes well under a million).
  int64_t max_steps = 20'000'000;
  // Bytes of strings built over the whole render (concatenation, filters, methods, tojson).
  int64_t max_built_bytes = int64_t{1} << 30;
  // Items in one list built by the template (`[x] * n`, range() is limited to 100000 anyway).
  size_t max_list_items = size_t{1} << 20;
};

// Running totals of one render, checked against its limits.
class Budget {
 public:
  explicit Budget(const RenderLimits& limits) : limits_(limits) {}

  const RenderLimits& limits() const { return limits_; }

  // Charges `n` steps; kResourceExhausted once max_steps is passed.
  absl::Status Step(int64_t n = 1);
  // Charges a string of `bytes` built by the template (also one step per 64 bytes).
  // kResourceExhausted if it exceeds max_output_bytes or the total exceeds max_built_bytes.
  absl::Status Built(size_t bytes);
  // kResourceExhausted if a string of `bytes` (about to be built) would exceed
  // max_output_bytes; call before allocating.
  absl::Status CheckStringSize(size_t bytes) const;
  absl::Status CheckListSize(size_t items) const;

 private:
  const RenderLimits& limits_;
  int64_t steps_ = 0;
  int64_t built_bytes_ = 0;
};

}  // namespace df11::runtime::chat

#endif  // DF11_DAEMON_RUNTIME_TEXT_CHAT_LIMITS_H_
