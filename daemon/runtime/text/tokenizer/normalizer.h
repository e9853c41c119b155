// Internal to df11_tokenizer: the tokenizer.json "normalizer" (tokenizers' normalizers/unicode.rs
// NFC, replace.rs, prepend.rs and utils.rs Sequence). Not a public API; tokenizer.h is.
#ifndef DF11_DAEMON_RUNTIME_TEXT_TOKENIZER_NORMALIZER_H_
#define DF11_DAEMON_RUNTIME_TEXT_TOKENIZER_NORMALIZER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace df11::runtime::tokenizer_internal {

class Normalizer {
 public:
  // The supported subset, as listed in kFailedPrecondition messages.
  static constexpr char kSupported[] =
      "null, NFC, Replace (String pattern), Prepend, or a Sequence of these";

  // Parses the "normalizer" value (`normalizer` null: none). kInvalidArgument for malformed
  // fields (named as "normalizer..."), kFailedPrecondition for other types, a Regex pattern in
  // Replace, or an empty pattern.
  static absl::StatusOr<Normalizer> FromJson(const nlohmann::json* normalizer);

  // True when Normalize returns its input unchanged.
  bool identity() const { return steps_.empty(); }

  // `text` (valid UTF-8) after every step in order: NFC; Replace of each leftmost,
  // non-overlapping occurrence of the pattern; Prepend unless the text is empty by then.
  // Thread-safe.
  std::string Normalize(std::string_view text) const;

 private:
  enum class Kind { kNfc, kReplace, kPrepend };
  struct Step {
    Kind kind;
    std::string pattern;  // Replace
    std::string content;  // Replace: the replacement; Prepend: the prefix
  };
  absl::Status AddStep(const nlohmann::json& v, const std::string& path, bool nested);

  std::vector<Step> steps_;
};

}  // namespace df11::runtime::tokenizer_internal

#endif  // DF11_DAEMON_RUNTIME_TEXT_TOKENIZER_NORMALIZER_H_
