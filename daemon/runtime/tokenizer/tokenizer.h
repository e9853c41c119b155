// Byte-level BPE tokenizer read from a Hugging Face `tokenizer.json`, with exact id parity with
// the `tokenizers` library for the subset that Llama-3.x, Qwen2 / 2.5 / 3 and GPT-2 files use
// (reference: huggingface/tokenizers, `tokenizers/src/tokenizer/added_vocabulary.rs`,
// `models/bpe`, `pre_tokenizers`).
//
//   DF11_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::FromFile(dir + "/tokenizer.json"));
//   DF11_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok.Encode(prompt,
//   /*add_special_tokens=*/false)); IncrementalDecoder stream(tok, /*skip_special_tokens=*/true);
//   for (int32_t id : generated) Send(stream.Feed(id));
//   Send(stream.Finish());
//
// Supported tokenizer.json subset (anything else is kFailedPrecondition, naming the field and
// listing what is supported):
//   model           BPE: vocab; merges as "a b" strings or ["a", "b"] pairs; ignore_merges;
//                   unk_token (null or a vocab token; fuse_unk); dropout null; byte_fallback
//                   false; continuing_subword_prefix and end_of_word_suffix null or "".
//   added_tokens    special and non-special, with single_word, lstrip, rstrip and normalized.
//   normalizer      null, NFC, or a Sequence of NFC.
//   pre_tokenizer   Split (Regex or String pattern, behavior Isolated, invert false) and
//                   ByteLevel (add_prefix_space false; use_regex true adds the GPT-2 split),
//                   alone or as a Sequence that ends with exactly one ByteLevel.
//   decoder         ByteLevel.
//   post_processor  null, ByteLevel (offsets only: no effect on ids), TemplateProcessing whose
//                   `single` template is special tokens around one `$A`, or a Sequence of these.
//   `truncation` and `padding` are ignored (df11d never truncates or pads a prompt).
// Regexes run through PCRE2 with UTF | UCP. Oniguruma (the reference engine) and PCRE2 agree on
// every construct these patterns use but \s: PCRE2's also matches U+180E, which Unicode no longer
// counts as White_Space, so \s and \S are rewritten as explicit White_Space sets before compiling.
#ifndef DF11_DAEMON_RUNTIME_TOKENIZER_TOKENIZER_H_
#define DF11_DAEMON_RUNTIME_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace df11::runtime {

// An immutable tokenizer. Copies share the loaded tables (cheap). Thread-safe: every method is
// const and keeps no shared mutable state.
class Tokenizer {
 public:
  // Parses the text of a tokenizer.json. kInvalidArgument if it is not JSON or a field is
  // malformed (the message names the field, e.g. "model.merges[12]"): a merge or the unk token
  // missing from the vocab, a non-integer id, a merge string without exactly one space.
  // kFailedPrecondition for a well-formed component this class does not implement (a model other
  // than BPE, dropout, byte_fallback, a normalizer other than NFC, a Split behavior other than
  // Isolated, ...); the message lists the supported subset. kInvalidArgument as well for a
  // pattern PCRE2 cannot compile.
  static absl::StatusOr<Tokenizer> FromJson(const std::string& tokenizer_json_text);

  // As FromJson, reading `path`. kNotFound if it does not exist, kInternal if it cannot be read.
  // Error messages start with the path.
  static absl::StatusOr<Tokenizer> FromFile(const std::string& path);

  // Token ids of `text`, as `tokenizers`' encode(text, add_special_tokens).ids: added tokens are
  // matched first (leftmost-longest), the rest is normalized, pre-tokenized and merged; with
  // `add_special_tokens` the post-processor's template tokens (Llama-3's BOS) are added.
  // kInvalidArgument if `text` is not valid UTF-8. kInternal if PCRE2 fails while matching
  // (resource limits), which the supported patterns do not trigger.
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text, bool add_special_tokens) const;

  // Text of `ids`, as `tokenizers`' decode(ids, skip_special_tokens): ids of no token are
  // dropped, special tokens are dropped when asked, each token becomes its ByteLevel bytes (a
  // token with a character outside the byte alphabet, such as most added tokens, contributes its
  // UTF-8 as is), and the bytes are decoded with invalid sequences replaced by U+FFFD (one per
  // maximal invalid subpart, as Rust's String::from_utf8_lossy does). Never fails.
  std::string Decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  // One past the largest id of the vocab and the added tokens (the embedding rows the ids need).
  // Ids below it that name no token are possible in principle; TokenText returns nullopt for them.
  int32_t vocab_size() const;

  // The id of `token` (an added token's content first, then a vocab string), as
  // `tokenizers`' token_to_id. nullopt if there is none.
  std::optional<int32_t> TokenId(std::string_view token) const;

  // The string of token `id` (byte-level alphabet for vocab tokens; an added token's content, or
  // its normalized form for a normalized=true token that normalization changes), as `tokenizers`'
  // id_to_token. nullopt for an id of no token.
  std::optional<std::string> TokenText(int32_t id) const;

  // The bytes token `id` decodes to on its own (a piece of a UTF-8 character for some byte-level
  // tokens); empty for an id of no token.
  std::string TokenBytes(int32_t id) const;

  // True if `id` is a special token, i.e. one that Decode drops with skip_special_tokens.
  bool IsSpecial(int32_t id) const;

 private:
  friend class IncrementalDecoder;
  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl);

  // Appends the decoded bytes of `id` to `out` (nothing for an unknown or a skipped special id).
  void AppendTokenBytes(int32_t id, bool skip_special_tokens, std::string* out) const;

  std::shared_ptr<const Impl> impl_;
};

// Streaming detokenization for one generated sequence. Feed returns only text made of complete
// UTF-8 characters: bytes of a character that later tokens may complete are held back (at most
// 3). The concatenation of every Feed result and Finish equals tokenizer.Decode(all ids,
// skip_special_tokens). Not thread-safe (one per stream); the tokenizer must outlive it.
class IncrementalDecoder {
 public:
  IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens);

  // Adds token `id` and returns the newly completed text (possibly empty). Invalid bytes that no
  // later token can complete come out as U+FFFD, as in Decode.
  std::string Feed(int32_t id);

  // Returns what was held back, an incomplete sequence becoming U+FFFD as Decode does, and
  // resets the decoder for a new sequence.
  std::string Finish();

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;  // bytes of an incomplete UTF-8 sequence at the end of the stream
};

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_TOKENIZER_TOKENIZER_H_
