#include "daemon/runtime/text/tokenizer/bpe.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "codec/base/status_macros.h"
#include "daemon/runtime/text/tokenizer/json_fields.h"
#include "daemon/runtime/text/tokenizer/text_util.h"

namespace df11::runtime::tokenizer_internal {
namespace {

constexpr char kSupportedModel[] =
    "type BPE with dropout null, continuing_subword_prefix and end_of_word_suffix null or \"\"";

// Reads model.merges into (left, right) string pairs in rank order. Both spellings that
// tokenizers' BPE deserializer accepts (serialization.rs `MergeType`): pairs ["a", "b"] and
// legacy strings "a b" (convert_merges_to_hashmap: lines starting "#version" are skipped, the
// rest split on ' ' into exactly two parts).
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ReadMerges(const Json& merges) {
  if (!merges.is_array()) return Malformed("model.merges", "expected an array");
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges.size());
  bool saw_string = false, saw_pair = false;
  for (size_t i = 0; i < merges.size(); ++i) {
    const Json& m = merges[i];
    const std::string path = absl::StrCat("model.merges[", i, "]");
    if (m.is_string()) {
      saw_string = true;
      const std::string& line = m.get_ref<const std::string&>();
      if (line.rfind("#version", 0) == 0) continue;
      const size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
        return Malformed(
            path,
            absl::StrCat("expected \"left right\" with exactly one space, got \"", line, "\""));
      }
      out.emplace_back(line.substr(0, space), line.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      saw_pair = true;
      out.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      return Malformed(path, "expected a \"left right\" string or a [\"left\", \"right\"] pair");
    }
    if (saw_string && saw_pair) return Malformed(path, "mixes merge strings and merge pairs");
  }
  return out;
}

}  // namespace

absl::StatusOr<BpeModel> BpeModel::FromJson(const Json& model) {
  DF11_ASSIGN_OR_RETURN(const std::string type, ComponentType(model, "model"));
  if (type != "BPE")
    return Unsupported("model.type", absl::StrCat("\"", type, "\""), kSupportedModel);
  if (const Json* dropout = FindField(model, "dropout"); dropout != nullptr) {
    if (!dropout->is_number()) return Malformed("model.dropout", "expected a number or null");
    // tokenizers treats 0.0 as "no dropout" in its trainer; any other value randomizes encode.
    if (dropout->get<double>() != 0.0)
      return Unsupported("model.dropout", "dropout", kSupportedModel);
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    DF11_ASSIGN_OR_RETURN(const std::optional<std::string> affix,
                          OptionalString(model, key, "model"));
    if (affix.has_value() && !affix->empty()) {
      return Unsupported(absl::StrCat("model.", key), absl::StrCat("\"", *affix, "\""),
                         kSupportedModel);
    }
  }

  BpeModel bpe;
  DF11_ASSIGN_OR_RETURN(bpe.ignore_merges_, OptionalBool(model, "ignore_merges", "model", false));
  DF11_ASSIGN_OR_RETURN(bpe.fuse_unk_, OptionalBool(model, "fuse_unk", "model", false));
  DF11_ASSIGN_OR_RETURN(bpe.byte_fallback_, OptionalBool(model, "byte_fallback", "model", false));

  const Json* vocab = FindField(model, "vocab");
  if (vocab == nullptr) return Malformed("model.vocab", "missing");
  if (!vocab->is_object()) return Malformed("model.vocab", "expected an object {token: id}");
  bpe.vocab_.reserve(vocab->size());
  absl::flat_hash_map<int32_t, const std::string*> seen_ids;
  seen_ids.reserve(vocab->size());
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    DF11_ASSIGN_OR_RETURN(const int32_t id,
                          ParseId(it.value(), absl::StrCat("model.vocab[\"", it.key(), "\"]")));
    bpe.vocab_.emplace(it.key(), id);
    // The key stays valid: it lives in `model`, which outlives this loop.
    if (!seen_ids.emplace(id, &it.key()).second) {
      return Malformed(absl::StrCat("model.vocab[\"", it.key(), "\"]"),
                       absl::StrCat("id ", id, " is also the id of \"", *seen_ids[id], "\""));
    }
  }

  const Json* merges = FindField(model, "merges");
  if (merges == nullptr) return Malformed("model.merges", "missing");
  DF11_ASSIGN_OR_RETURN(auto pairs, ReadMerges(*merges));
  bpe.merges_.reserve(pairs.size());
  for (size_t rank = 0; rank < pairs.size(); ++rank) {
    const auto& [left, right] = pairs[rank];
    const std::string merged = left + right;
    int32_t ids[3];
    const std::string* parts[3] = {&left, &right, &merged};
    for (int k = 0; k < 3; ++k) {
      auto it = bpe.vocab_.find(*parts[k]);
      if (it == bpe.vocab_.end()) {
        return Malformed(absl::StrCat("model.merges (rank ", rank, ")"),
                         absl::StrCat("token \"", *parts[k], "\" is not in model.vocab"));
      }
      ids[k] = it->second;
    }
    // A later duplicate of a pair replaces the earlier one, as collecting into tokenizers'
    // hash map does.
    bpe.merges_[PairKey(ids[0], ids[1])] = MergeTarget{static_cast<uint32_t>(rank), ids[2]};
  }

  DF11_ASSIGN_OR_RETURN(const std::optional<std::string> unk,
                        OptionalString(model, "unk_token", "model"));
  if (unk.has_value()) {
    auto it = bpe.vocab_.find(*unk);
    if (it == bpe.vocab_.end()) {
      return Malformed("model.unk_token", absl::StrCat("\"", *unk, "\" is not in model.vocab"));
    }
    bpe.unk_id_ = it->second;
  }

  const ByteLevelTable& table = ByteLevel();
  for (int b = 0; b < 256; ++b) {
    auto it = bpe.vocab_.find(table.byte_to_utf8[b]);
    bpe.byte_ids_[b] = it == bpe.vocab_.end() ? -1 : it->second;
    // merge_word's format!("<{b:#04X}>"): "0x" and two upper-case hex digits.
    it = bpe.vocab_.find(absl::StrFormat("<0x%02X>", b));
    bpe.byte_fallback_ids_[b] = it == bpe.vocab_.end() ? -1 : it->second;
  }
  return bpe;
}

std::optional<int32_t> BpeModel::TokenId(std::string_view token) const {
  auto it = vocab_.find(absl::string_view(token.data(), token.size()));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

// Builds the initial symbols of a word as merge_word does, one character at a time.
class BpeModel::WordBuilder {
 public:
  WordBuilder(const BpeModel& model, size_t capacity) : model_(model) {
    symbols_.reserve(capacity);
  }

  // A character whose vocab id is `id`; flushes a pending unk first.
  void Known(int32_t id) {
    FlushUnk();
    Add(id);
  }

  // A character (UTF-8 `text`) that is not in the vocab.
  void Unknown(std::string_view text) {
    if (model_.byte_fallback_) {
      bool all = true;
      for (char b : text) all = all && model_.byte_fallback_ids_[static_cast<uint8_t>(b)] >= 0;
      if (all) {
        // As merge_word, a pending unk is not flushed first: it lands after these bytes.
        for (char b : text) Add(model_.byte_fallback_ids_[static_cast<uint8_t>(b)]);
        return;
      }
    }
    if (!model_.unk_id_.has_value()) return;  // dropped
    if (unk_pending_ && !model_.fuse_unk_) Add(*model_.unk_id_);
    unk_pending_ = true;
  }

  std::vector<Symbol>& Finish() {
    FlushUnk();
    return symbols_;
  }

 private:
  void FlushUnk() {
    if (unk_pending_) Add(*model_.unk_id_);
    unk_pending_ = false;
  }
  void Add(int32_t id) {
    const auto n = static_cast<int32_t>(symbols_.size());
    symbols_.push_back(Symbol{id, n - 1, -1, true});
    if (n > 0) symbols_[n - 1].next = n;
  }

  const BpeModel& model_;
  std::vector<Symbol> symbols_;
  bool unk_pending_ = false;
};

void BpeModel::Tokenize(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    // tokenize_with_cache: a pre-token that is a vocab entry is one token, merges or not.
    if (std::optional<int32_t> id = TokenId(word); id.has_value()) {
      ids->push_back(*id);
      return;
    }
  }
  WordBuilder builder(*this, word.size());
  size_t i = 0;
  while (i < word.size()) {
    const size_t begin = i;
    NextCodePoint(word, &i);
    const std::string_view ch = word.substr(begin, i - begin);
    if (std::optional<int32_t> id = TokenId(ch); id.has_value()) {
      builder.Known(*id);
    } else {
      builder.Unknown(ch);
    }
  }
  MergeAll(builder.Finish(), ids);
}

void BpeModel::TokenizeByteLevel(std::string_view bytes, std::vector<int32_t>* ids) const {
  if (bytes.empty()) return;
  if (ignore_merges_) {
    auto it = vocab_.find(ByteLevelEncode(bytes));
    if (it != vocab_.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  const ByteLevelTable& table = ByteLevel();
  WordBuilder builder(*this, bytes.size());
  for (char ch : bytes) {
    const auto b = static_cast<uint8_t>(ch);
    if (byte_ids_[b] >= 0) {
      builder.Known(byte_ids_[b]);
    } else {
      builder.Unknown(table.byte_to_utf8[b]);
    }
  }
  MergeAll(builder.Finish(), ids);
}

void BpeModel::MergeAll(std::vector<Symbol>& symbols, std::vector<int32_t>* ids) const {
  if (symbols.size() <= 1) {
    if (!symbols.empty()) ids->push_back(symbols[0].id);
    return;
  }

  // Word::merge_all: a min-heap on (rank, position); stale entries are skipped when popped.
  struct Entry {
    uint32_t rank;
    int32_t pos;
    int32_t new_id;
  };
  auto after = [](const Entry& a, const Entry& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  std::vector<Entry> heap;
  heap.reserve(symbols.size() * 2);
  auto push = [&](int32_t pos) {
    const Symbol& s = symbols[pos];
    auto it = merges_.find(PairKey(s.id, symbols[s.next].id));
    if (it == merges_.end()) return;
    heap.push_back(Entry{it->second.rank, pos, it->second.new_id});
    std::push_heap(heap.begin(), heap.end(), after);
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) push(i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), after);
    const Entry top = heap.back();
    heap.pop_back();
    Symbol& s = symbols[top.pos];
    if (!s.alive || s.next < 0) continue;
    Symbol& right = symbols[s.next];
    auto it = merges_.find(PairKey(s.id, right.id));
    if (it == merges_.end() || it->second.new_id != top.new_id) continue;  // stale entry
    s.id = top.new_id;
    right.alive = false;
    s.next = right.next;
    if (s.next >= 0) symbols[s.next].prev = top.pos;
    if (s.prev >= 0) push(s.prev);
    if (s.next >= 0) push(top.pos);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) ids->push_back(symbols[i].id);
}

}  // namespace df11::runtime::tokenizer_internal
