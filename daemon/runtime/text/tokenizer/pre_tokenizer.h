// Internal to df11_tokenizer: the tokenizer.json "pre_tokenizer" (tokenizers' pre_tokenizers/:
// split.rs, metaspace.rs, byte_level.rs and sequence.rs). Not a public API; tokenizer.h is.
#ifndef DF11_DAEMON_RUNTIME_TEXT_TOKENIZER_PRE_TOKENIZER_H_
#define DF11_DAEMON_RUNTIME_TEXT_TOKENIZER_PRE_TOKENIZER_H_

#include <forward_list>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/runtime/text/tokenizer/regex_split.h"
#include "nlohmann/json.hpp"

namespace df11::runtime::tokenizer_internal {

// Metaspace's prepend_scheme: where the replacement character is put in front of a pre-token
// that does not start with it (pre-tokenizer), or dropped from the first token (decoder).
enum class PrependScheme { kAlways, kFirst, kNever };

// The fields that the Metaspace pre-tokenizer and decoder share.
struct MetaspaceOptions {
  std::string replacement;  // the UTF-8 of one character
  PrependScheme prepend_scheme = PrependScheme::kAlways;
  bool split = true;
};

// Parses a Metaspace object at `path` as tokenizers deserializes it: `replacement` must be one
// character; `prepend_scheme` is "always" when absent; the legacy `add_prefix_space` false means
// "never" and is kInvalidArgument next to another scheme; `split` is true when absent.
absl::StatusOr<MetaspaceOptions> ParseMetaspace(const nlohmann::json& v, const std::string& path);

class PreTokenizer {
 public:
  // The supported subset, as listed in kFailedPrecondition messages.
  static constexpr char kSupported[] =
      "null, Split (Regex or String pattern; any behavior; invert), Metaspace, and ByteLevel "
      "(add_prefix_space false), alone or as a Sequence in which ByteLevel can only come last";

  // Parses the "pre_tokenizer" value (`pre_tokenizer` null: the text is one pre-token).
  // kInvalidArgument for malformed fields (named as "pre_tokenizer...") and patterns PCRE2
  // cannot compile, kFailedPrecondition for components outside kSupported.
  static absl::StatusOr<PreTokenizer> FromJson(const nlohmann::json* pre_tokenizer);

  // True if the sequence ends with ByteLevel: the pre-tokens are then raw bytes, which the model
  // maps through the ByteLevel alphabet itself.
  bool byte_level() const { return byte_level_; }

  // Appends the non-empty pre-tokens of `text` (valid UTF-8, one piece of normalized text) to
  // `pieces`, each step splitting the pieces of the one before. `at_text_start` says whether
  // `text` begins at offset 0 of the text given to Encode (Metaspace's prepend_scheme "first"
  // adds its replacement only there). The views point into `text` or into strings added to
  // `storage`, whose elements never move. kInternal if PCRE2 fails (resource limits).
  // Thread-safe.
  absl::Status Split(std::string_view text, bool at_text_start,
                     std::forward_list<std::string>* storage,
                     std::vector<std::string_view>* pieces) const;

 private:
  enum class Kind { kSplit, kMetaspace };
  struct Step {
    Kind kind;
    RegexSplitter splitter;      // kSplit
    MetaspaceOptions metaspace;  // kMetaspace
  };
  struct Piece {
    std::string_view text;
    bool at_text_start;
  };
  absl::Status AddStep(const nlohmann::json& v, const std::string& path);
  void Metaspace(const Step& step, Piece piece, std::forward_list<std::string>* storage,
                 std::vector<Piece>* out) const;

  std::vector<Step> steps_;
  bool byte_level_ = false;
};

}  // namespace df11::runtime::tokenizer_internal

#endif  // DF11_DAEMON_RUNTIME_TEXT_TOKENIZER_PRE_TOKENIZER_H_
