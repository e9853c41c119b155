#include "daemon/runtime/text/chat/limits.h"

#include "daemon/runtime/text/chat/str_cat.h"

namespace df11::runtime::chat {

absl::Status Budget::Step(int64_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps) {
    return absl::ResourceExhaustedError(
        Cat("rendering takes more than ", limits_.max_steps, " steps"));
  }
  return absl::OkStatus();
}

absl::Status Budget::Built(size_t bytes) {
  if (absl::Status s = CheckStringSize(bytes); !s.ok()) return s;
  built_bytes_ += static_cast<int64_t>(bytes);
  if (built_bytes_ > limits_.max_built_bytes) {
    return absl::ResourceExhaustedError(
        Cat("rendering builds more than ", limits_.max_built_bytes, " bytes of strings"));
  }
  return Step(1 + static_cast<int64_t>(bytes / 64));
}

absl::Status Budget::CheckStringSize(size_t bytes) const {
  if (bytes > limits_.max_output_bytes) {
    return absl::ResourceExhaustedError(
        Cat("a string of ", bytes, " bytes exceeds the limit of ", limits_.max_output_bytes));
  }
  return absl::OkStatus();
}

absl::Status Budget::CheckListSize(size_t items) const {
  if (items > limits_.max_list_items) {
    return absl::ResourceExhaustedError(
        Cat("a list of ", items, " items exceeds the limit of ", limits_.max_list_items));
  }
  return absl::OkStatus();
}

}  // namespace df11::runtime::chat
