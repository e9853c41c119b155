// Internal to df11_tokenizer: the BPE model of a tokenizer.json (tokenizers'
// models/bpe/{model.rs, word.rs, serialization.rs}), for byte-level vocabularies (GPT-2, Llama-3,
// Qwen2) and SentencePiece-converted ones with byte_fallback (Llama-2, Mistral, Gemma). Not a
// public API; tokenizer.h is.
#ifndef DF11_DAEMON_RUNTIME_TEXT_TOKENIZER_BPE_H_
#define DF11_DAEMON_RUNTIME_TEXT_TOKENIZER_BPE_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace df11::runtime::tokenizer_internal {

class BpeModel {
 public:
  // Parses the "model" object. kInvalidArgument for malformed fields (named as "model.<field>"),
  // kFailedPrecondition for BPE options this implementation lacks (dropout, subword prefix or
  // suffix) or a model type other than BPE.
  static absl::StatusOr<BpeModel> FromJson(const nlohmann::json& model);

  // Appends the ids of one pre-token `word` (valid UTF-8), as tokenizers' BPE::tokenize: with
  // ignore_merges, a word that is itself in the vocab is one token; otherwise one symbol per
  // character, then merges by rank (lowest first, leftmost among equal ranks) until none
  // applies. A character not in the vocab becomes, with byte_fallback, one "<0xNN>" token per
  // UTF-8 byte if the vocab has them all; else the unk token (consecutive ones fused with
  // fuse_unk), or nothing when there is none. Thread-safe.
  void Tokenize(std::string_view word, std::vector<int32_t>* ids) const;

  // As Tokenize on the ByteLevel encoding of `bytes` (one alphabet character per byte), without
  // building it: what follows a ByteLevel pre-tokenizer. Thread-safe.
  void TokenizeByteLevel(std::string_view bytes, std::vector<int32_t>* ids) const;

  std::optional<int32_t> TokenId(std::string_view token) const;
  const absl::flat_hash_map<std::string, int32_t>& vocab() const { return vocab_; }

 private:
  struct MergeTarget {
    uint32_t rank;
    int32_t new_id;
  };
  static uint64_t PairKey(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    bool alive;
  };
  class WordBuilder;
  // Word::merge_all on `symbols` (at least one), then appends the surviving ids.
  void MergeAll(std::vector<Symbol>& symbols, std::vector<int32_t>* ids) const;

  absl::flat_hash_map<std::string, int32_t> vocab_;
  absl::flat_hash_map<uint64_t, MergeTarget> merges_;
  std::array<int32_t, 256> byte_ids_{};           // id of each byte's ByteLevel character, or -1
  std::array<int32_t, 256> byte_fallback_ids_{};  // id of "<0xNN>" for each byte, or -1
  bool ignore_merges_ = false;
  bool byte_fallback_ = false;
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
};

}  // namespace df11::runtime::tokenizer_internal

#endif  // DF11_DAEMON_RUNTIME_TEXT_TOKENIZER_BPE_H_
