// Internal to df11_tokenizer: the BPE model of a byte-level tokenizer.json (tokenizers'
// models/bpe/{model.rs, word.rs, serialization.rs}). Not a public API; tokenizer.h is.
#ifndef DF11_DAEMON_RUNTIME_TOKENIZER_BPE_H_
#define DF11_DAEMON_RUNTIME_TOKENIZER_BPE_H_

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
  // kFailedPrecondition for BPE options this implementation lacks (dropout, byte_fallback,
  // subword prefix or suffix) or a model type other than BPE.
  static absl::StatusOr<BpeModel> FromJson(const nlohmann::json& model);

  // Appends the ids of one pre-token given as raw bytes (the ByteLevel mapping is applied here):
  // one symbol per byte, then merges by rank (lowest first, leftmost among equal ranks) until
  // none applies. With ignore_merges, a pre-token that is itself in the vocab is emitted whole.
  // Bytes whose character is not in the vocab become the unk token (fused if fuse_unk) or are
  // dropped when there is none, as in tokenizers. Thread-safe.
  void Tokenize(std::string_view piece, std::vector<int32_t>* ids) const;

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

  absl::flat_hash_map<std::string, int32_t> vocab_;
  absl::flat_hash_map<uint64_t, MergeTarget> merges_;
  std::array<int32_t, 256> byte_ids_{};  // id of each byte's ByteLevel character, or -1
  bool ignore_merges_ = false;
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
};

}  // namespace df11::runtime::tokenizer_internal

#endif  // DF11_DAEMON_RUNTIME_TOKENIZER_BPE_H_
