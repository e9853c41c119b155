// Internal to df11_tokenizer: the tokenizer.json "decoder", which turns token strings into text
// (tokenizers' decoders/: byte_level.rs, byte_fallback.rs, fuse.rs, strip.rs, sequence.rs,
// normalizers/replace.rs and pre_tokenizers/metaspace.rs as decoders). Not a public API;
// tokenizer.h is.
//
// tokenizers applies each decoder of a Sequence to the whole list of token strings and joins the
// result. Every supported step is causal, so DecoderStream runs the chain one token at a time
// and its output, concatenated, is that join: Tokenizer::Decode and IncrementalDecoder share it.
#ifndef DF11_DAEMON_RUNTIME_TEXT_TOKENIZER_DECODER_H_
#define DF11_DAEMON_RUNTIME_TEXT_TOKENIZER_DECODER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace df11::runtime::tokenizer_internal {

class Decoder {
 public:
  // The supported subset, as listed in kFailedPrecondition messages.
  static constexpr char kSupported[] =
      "ByteLevel, Metaspace, or a Sequence of Replace (String pattern), ByteFallback, Metaspace, "
      "Strip (stop 0), ByteLevel and Fuse, with only Strip and Fuse after Fuse or ByteLevel";

  // Parses the "decoder" value. kInvalidArgument for malformed fields (named as "decoder..."),
  // kFailedPrecondition for null or anything outside kSupported.
  static absl::StatusOr<Decoder> FromJson(const nlohmann::json* decoder);

  // Appends the bytes that `token` stands for on its own: each step's per-token mapping
  // (Replace; Metaspace's replacement -> ' '; a ByteFallback "<0xNN>" token -> byte NN; ByteLevel
  // characters -> bytes), without what depends on neighbours or on the start of the text (runs
  // of byte tokens, Metaspace's first-token rule, Strip after Fuse). May be invalid UTF-8.
  void AppendTokenBytes(std::string_view token, std::string* out) const;

 private:
  friend class DecoderStream;
  enum class Kind { kReplace, kByteFallback, kMetaspace, kStrip, kFuse, kByteLevel };
  struct Step {
    Kind kind;
    bool fused = false;      // after Fuse or ByteLevel: the input is the one fused token, in chunks
    std::string pattern;     // kReplace: the String pattern; kMetaspace, kStrip: the character
    std::string content;     // kReplace: the replacement
    size_t strip_start = 0;  // kStrip: at most this many leading characters are removed
    bool drop_in_first = false;  // kMetaspace: prepend_scheme other than "never"
  };
  absl::Status AddStep(const nlohmann::json& v, const std::string& path, bool nested);

  std::vector<Step> steps_;
};

// The decoder chain run over one token stream. Feed and Finish append text to `out`; the text of
// every Feed and the Finish together is what tokenizers' decode gives for the tokens fed. Output
// is held back only where later tokens can change it: an incomplete UTF-8 sequence after
// ByteLevel (at most 3 bytes), and a run of ByteFallback byte tokens that is valid UTF-8 so far
// (tokenizers turns a whole run into U+FFFDs if any byte of it is invalid). The decoder must
// outlive the stream. Not thread-safe.
class DecoderStream {
 public:
  explicit DecoderStream(const Decoder& decoder);

  // Runs `token` (a token's string) through the chain.
  void Feed(std::string_view token, std::string* out);

  // Flushes what is held back and resets the stream for a new sequence.
  void Finish(std::string* out);

 private:
  struct State {
    int64_t tokens_seen = 0;   // kMetaspace
    std::string run;           // kByteFallback: the bytes of the current run of byte tokens
    size_t run_valid = 0;      // kByteFallback: length of the run's complete, valid prefix
    bool run_invalid = false;  // kByteFallback: the current run already went out as U+FFFDs
    size_t strip_left = 0;     // kStrip after Fuse: leading characters that may still go
    std::string pending;       // kByteLevel: bytes of an incomplete UTF-8 sequence
  };
  // Runs `token` (or, for a fused step, a chunk of the fused token) through steps [k, end).
  void Push(size_t k, std::string_view token, std::string* out);
  // Ends the run of byte tokens held by ByteFallback step k, pushing it on to step k + 1.
  void FlushRun(size_t k, std::string* out);
  void Reset();

  const Decoder* decoder_;
  std::vector<State> states_;
};

}  // namespace df11::runtime::tokenizer_internal

#endif  // DF11_DAEMON_RUNTIME_TEXT_TOKENIZER_DECODER_H_
