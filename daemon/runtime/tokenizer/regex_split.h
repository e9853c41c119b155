// Internal to df11_tokenizer: a compiled PCRE2 pattern (UTF | UCP, JIT when available) that
// splits text like tokenizers' Split pre-tokenizer with behavior Isolated and invert false.
// Not a public API; tokenizer.h is.
#ifndef DF11_DAEMON_RUNTIME_TOKENIZER_REGEX_SPLIT_H_
#define DF11_DAEMON_RUNTIME_TOKENIZER_REGEX_SPLIT_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace df11::runtime::tokenizer_internal {

class RegexSplitter {
 public:
  // Compiles `pattern` (a regex, or a literal string when `literal`). kInvalidArgument naming
  // `path` and PCRE2's message if it does not compile.
  static absl::StatusOr<RegexSplitter> Compile(const std::string& pattern, bool literal,
                                               const std::string& path);

  // Appends to `pieces` the non-empty pieces of `text` (valid UTF-8): every match of a
  // left-to-right, non-overlapping find-all, and every gap between matches, in order
  // (utils/onig.rs find_matches + SplitDelimiterBehavior::Isolated). The views point into
  // `text`. kInternal if PCRE2 reports an error (resource limits). Thread-safe: match data is
  // per call.
  absl::Status Split(std::string_view text, std::vector<std::string_view>* pieces) const;

 private:
  struct Code;
  std::shared_ptr<const Code> code_;
};

}  // namespace df11::runtime::tokenizer_internal

#endif  // DF11_DAEMON_RUNTIME_TOKENIZER_REGEX_SPLIT_H_
