// Internal to df11_tokenizer: a compiled PCRE2 pattern (UTF | UCP, JIT when available) that
// splits text like tokenizers' Split pre-tokenizer, and the delimiter behaviors that Split and
// Metaspace share (tokenizers' tokenizer/normalizer.rs `NormalizedString::split`). Not a public
// API; tokenizer.h is.
#ifndef DF11_DAEMON_RUNTIME_TEXT_TOKENIZER_REGEX_SPLIT_H_
#define DF11_DAEMON_RUNTIME_TEXT_TOKENIZER_REGEX_SPLIT_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace df11::runtime::tokenizer_internal {

// What becomes of the delimiters (the matches) when text is split (SplitDelimiterBehavior).
enum class SplitBehavior {
  kRemoved,             // dropped
  kIsolated,            // pieces of their own
  kMergedWithPrevious,  // appended to the piece before (a run of matches: only the first)
  kMergedWithNext,      // prepended to the piece after (a run of matches: only the last)
  kContiguous,          // adjacent matches form one piece
};

// One entry of a pattern's find_matches: [begin, end) of the text, and whether it is a match.
// The entries cover the text in order; matches may be empty, gaps never are.
struct MatchSpan {
  size_t begin;
  size_t end;
  bool is_match;
};

// Appends to `pieces` the non-empty pieces of `text` that `behavior` makes of `spans` (which cover
// `text`), as NormalizedString::split followed by PreTokenizedString::split's dropping of empty
// pieces. With `invert`, matches and gaps swap roles first (Split's invert). Views point into
// `text`.
void SplitBySpans(std::string_view text, const std::vector<MatchSpan>& spans,
                  SplitBehavior behavior, bool invert, std::vector<std::string_view>* pieces);

class RegexSplitter {
 public:
  // Compiles `pattern` (a regex, or a literal string when `literal`). kInvalidArgument naming
  // `path` and PCRE2's message if it does not compile.
  static absl::StatusOr<RegexSplitter> Compile(const std::string& pattern, bool literal,
                                               SplitBehavior behavior, bool invert,
                                               const std::string& path);

  // Appends to `pieces` the non-empty pieces of `text` (valid UTF-8) that a left-to-right,
  // non-overlapping find-all (utils/onig.rs find_matches) and the behavior and invert given to
  // Compile make. The views point into `text`. kInternal if PCRE2 reports an error (resource
  // limits). Thread-safe: match data is per call.
  absl::Status Split(std::string_view text, std::vector<std::string_view>* pieces) const;

 private:
  struct Code;
  std::shared_ptr<const Code> code_;
  SplitBehavior behavior_ = SplitBehavior::kIsolated;
  bool invert_ = false;
};

}  // namespace df11::runtime::tokenizer_internal

#endif  // DF11_DAEMON_RUNTIME_TEXT_TOKENIZER_REGEX_SPLIT_H_
