// BPE tokenizer read from a Hugging Face `tokenizer.json`, with exact id and text parity with the
// `tokenizers` library for the subset that byte-level files (Llama-3.x, Qwen2 / 2.5 / 3, GPT-2,
// Phi-4) and SentencePiece-converted files with byte fallback (Llama-2, Mistral 7B / Mixtral,
// Gemma 3) use (reference: huggingface/tokenizers, `tokenizers/src/tokenizer/added_vocabulary.rs`,
// `models/bpe`, `normalizers`, `pre_tokenizers`, `decoders`).
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
//                   ("<0xNN>" vocab tokens); continuing_subword_prefix and end_of_word_suffix
//                   null or "".
//   added_tokens    special and non-special, with single_word, lstrip, rstrip and normalized.
//   normalizer      null, NFC, Replace (String pattern), Prepend, or a Sequence of these.
//   pre_tokenizer   null; Split (Regex or String pattern, any behavior, invert); Metaspace
//                   (replacement, prepend_scheme always / first / never, split); ByteLevel
//                   (add_prefix_space false; use_regex true adds the GPT-2 split); alone or as a
//                   Sequence in which ByteLevel can only come last. Without ByteLevel, BPE works
//                   on the characters of each pre-token.
//   decoder         ByteLevel, Metaspace, or a Sequence of Replace (String pattern), ByteFallback,
//                   Metaspace, Strip (stop 0), ByteLevel and Fuse, with only Strip and Fuse after
//                   Fuse or ByteLevel (Llama-2 / Mistral: Replace, ByteFallback, Fuse, Strip).
//   post_processor  null, ByteLevel (offsets only: no effect on ids), TemplateProcessing whose
//                   `single` template is special tokens around one `$A`, or a Sequence of these.
//   `truncation` and `padding` are ignored (df11d never truncates or pads a prompt).
// Regexes run through PCRE2 with UTF | UCP. Oniguruma (the reference engine) and PCRE2 agree on
// every construct these patterns use but \s: PCRE2's also matches U+180E, which Unicode no longer
// counts as White_Space, so \s and \S are rewritten as explicit White_Space sets before compiling.
#ifndef DF11_DAEMON_RUNTIME_TEXT_TOKENIZER_TOKENIZER_H_
#define DF11_DAEMON_RUNTIME_TEXT_TOKENIZER_TOKENIZER_H_

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
  // than BPE, dropout, a normalizer such as NFKC, a Replace with a Regex pattern, a decoder such
  // as WordPiece, ...); the message lists the supported subset. kInvalidArgument as well for a
  // pattern PCRE2 cannot compile.
  static absl::StatusOr<Tokenizer> FromJson(const std::string& tokenizer_json_text);

  // As FromJson, reading `path`. kNotFound if it does not exist, kInternal if it cannot be read.
  // Error messages start with the path.
  static absl::StatusOr<Tokenizer> FromFile(const std::string& path);

  // Token ids of `text`, as `tokenizers`' encode(text, add_special_tokens).ids: added tokens are
  // matched first (leftmost-longest), the rest is normalized, pre-tokenized and merged; with
  // `add_special_tokens` the post-processor's template tokens (a BOS such as Llama-3's
  // <|begin_of_text|>, Mistral's <s> or Gemma's <bos>) are added.
  // kInvalidArgument if `text` is not valid UTF-8. kInternal if PCRE2 fails while matching
  // (resource limits), which the supported patterns do not trigger.
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text, bool add_special_tokens) const;

  // Text of `ids`, as `tokenizers`' decode(ids, skip_special_tokens): ids of no token are
  // dropped, special tokens are dropped when asked, and the token strings go through the
  // decoder. ByteLevel: each token becomes its bytes (a token with a character outside the byte
  // alphabet, such as most added tokens, contributes its UTF-8 as is), decoded with invalid
  // sequences replaced by U+FFFD (one per maximal invalid subpart, as Rust's
  // String::from_utf8_lossy does). SentencePiece style: "▁" becomes a space, a run of "<0xNN>"
  // tokens becomes its bytes if they are valid UTF-8 and one U+FFFD per byte otherwise, and Strip
  // drops the text's leading space. The result is valid UTF-8. Never fails.
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

  // The bytes token `id` stands for on its own (a piece of a UTF-8 character for some byte-level
  // and "<0xNN>" tokens; "▁" as a space), without what depends on its neighbours or on being at
  // the start of the text (how a run of "<0xNN>" tokens decodes, Metaspace's first-token rule,
  // Strip); empty for an id of no token.
  std::string TokenBytes(int32_t id) const;

  // True if `id` is a special token, i.e. one that Decode drops with skip_special_tokens.
  bool IsSpecial(int32_t id) const;

 private:
  friend class IncrementalDecoder;
  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl);

  // The string that decoding gives to the decoder for `id`; nullptr for an unknown id or a
  // skipped special one. Valid as long as the tokenizer's tables.
  const std::string* TokenString(int32_t id, bool skip_special_tokens) const;

  std::shared_ptr<const Impl> impl_;
};

namespace tokenizer_internal {
class DecoderStream;
}  // namespace tokenizer_internal

// Streaming detokenization for one generated sequence. Feed returns only text made of complete
// UTF-8 characters, and holds back only what later tokens can still change: bytes of a character
// that later tokens may complete (at most 3, byte-level decoders), and a run of "<0xNN>" byte
// tokens that is valid UTF-8 so far (ByteFallback decoders: tokenizers makes a whole run U+FFFDs
// if any byte of it is invalid, so the run waits for the next other token or Finish). The
// concatenation of every Feed result and Finish equals tokenizer.Decode(all ids,
// skip_special_tokens). Movable, not copyable. Not thread-safe (one per stream); the tokenizer
// must outlive it.
class IncrementalDecoder {
 public:
  IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens);
  ~IncrementalDecoder();
  IncrementalDecoder(IncrementalDecoder&&) noexcept;
  IncrementalDecoder& operator=(IncrementalDecoder&&) noexcept;

  // Adds token `id` and returns the newly completed text (possibly empty). Invalid bytes that no
  // later token can complete come out as U+FFFD, as in Decode.
  std::string Feed(int32_t id);

  // Returns what was held back, an incomplete sequence becoming U+FFFD as Decode does, and
  // resets the decoder for a new sequence.
  std::string Finish();

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  std::unique_ptr<tokenizer_internal::DecoderStream> stream_;  // the decoder's held-back state
};

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_TEXT_TOKENIZER_TOKENIZER_H_
