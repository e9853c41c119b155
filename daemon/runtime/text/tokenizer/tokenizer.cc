// Loading tokenizer.json and the encode / decode pipelines (tokenizers' tokenizer/mod.rs
// `encode_single_sequence` and `decode`). The pieces live in normalizer.cc, pre_tokenizer.cc,
// regex_split.cc, bpe.cc, decoder.cc, added_vocabulary.cc and text_util.cc.
#include "daemon/runtime/text/tokenizer/tokenizer.h"

#include <filesystem>
#include <forward_list>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "codec/base/read_file.h"
#include "codec/base/status_macros.h"
#include "daemon/runtime/text/tokenizer/added_vocabulary.h"
#include "daemon/runtime/text/tokenizer/bpe.h"
#include "daemon/runtime/text/tokenizer/decoder.h"
#include "daemon/runtime/text/tokenizer/json_fields.h"
#include "daemon/runtime/text/tokenizer/normalizer.h"
#include "daemon/runtime/text/tokenizer/pre_tokenizer.h"
#include "daemon/runtime/text/tokenizer/text_util.h"

namespace df11::runtime {

using tokenizer_internal::AddedSplit;
using tokenizer_internal::AddedToken;
using tokenizer_internal::AddedTokenMatcher;
using tokenizer_internal::BpeModel;
using tokenizer_internal::Decoder;
using tokenizer_internal::DecoderStream;
using tokenizer_internal::FindField;
using tokenizer_internal::Json;
using tokenizer_internal::Malformed;
using tokenizer_internal::Normalizer;
using tokenizer_internal::PreTokenizer;
using tokenizer_internal::Unsupported;

namespace {

constexpr char kSupportedPostProcessors[] =
    "null, ByteLevel, TemplateProcessing (special tokens around $A), Sequence of these";

}  // namespace

struct Tokenizer::Impl {
  BpeModel bpe;
  Normalizer normalizer;
  // With a ByteLevel pre-tokenizer, the byte -> alphabet mapping happens inside BpeModel.
  PreTokenizer pre_tokenizer;
  Decoder decoder;
  std::vector<AddedToken> added;         // by index, as the matchers report them
  AddedTokenMatcher raw_matcher;         // normalized=false tokens, matched in the input
  AddedTokenMatcher normalized_matcher;  // normalized=true tokens, matched after normalization
  absl::flat_hash_map<std::string, int32_t> added_ids;  // content -> id
  std::vector<int32_t> prefix_ids, suffix_ids;          // post-processor template around $A
  // Per id: the token string decode uses (empty for ids of no token), and flags.
  std::vector<std::string> id_text;
  std::vector<bool> id_present;
  std::vector<bool> id_special;

  absl::Status ParsePostProcessor(const Json& root);
  absl::Status ParseTemplate(const Json& v, const std::string& path);
  absl::Status ParseAddedTokens(const Json& root);
  // kInvalidArgument for an id so far beyond the tokens listed that its tables would be huge.
  absl::Status BuildIdTables();

  // Normalizes `piece` of the input (which starts at its offset 0 if `at_text_start`) and encodes
  // it: normalized added tokens, then pre-tokens through the model.
  absl::Status EncodeSegment(std::string_view piece, bool at_text_start,
                             std::vector<int32_t>* ids) const;
};

absl::Status Tokenizer::Impl::ParseTemplate(const Json& v, const std::string& path) {
  const Json* single = FindField(v, "single");
  if (single == nullptr || !single->is_array()) {
    return Malformed(absl::StrCat(path, ".single"), "expected an array");
  }
  const Json* specials = FindField(v, "special_tokens");
  if (specials != nullptr && !specials->is_object()) {
    return Malformed(absl::StrCat(path, ".special_tokens"), "expected an object");
  }
  std::vector<int32_t> before, after;
  bool saw_sequence = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const Json& piece = (*single)[i];
    const std::string piece_path = absl::StrCat(path, ".single[", i, "]");
    if (!piece.is_object() || piece.size() != 1) {
      return Malformed(piece_path, "expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    }
    if (const Json* seq = FindField(piece, "Sequence"); seq != nullptr) {
      if (!seq->is_object()) return Malformed(piece_path, "expected {\"Sequence\": {\"id\": ...}}");
      DF11_ASSIGN_OR_RETURN(
          const std::string id,
          tokenizer_internal::RequiredString(*seq, "id", absl::StrCat(piece_path, ".Sequence")));
      if (id != "A" || saw_sequence) {
        return Unsupported(piece_path, absl::StrCat("sequence \"", id, "\" in a single template"),
                           kSupportedPostProcessors);
      }
      saw_sequence = true;
      continue;
    }
    const Json* special = FindField(piece, "SpecialToken");
    if (special == nullptr || !special->is_object()) {
      return Malformed(piece_path, "expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    }
    DF11_ASSIGN_OR_RETURN(const std::string name,
                          tokenizer_internal::RequiredString(
                              *special, "id", absl::StrCat(piece_path, ".SpecialToken")));
    const Json* entry = specials == nullptr ? nullptr : FindField(*specials, name.c_str());
    const std::string entry_path = absl::StrCat(path, ".special_tokens[\"", name, "\"]");
    if (entry == nullptr || !entry->is_object()) return Malformed(entry_path, "missing");
    const Json* entry_ids = FindField(*entry, "ids");
    if (entry_ids == nullptr || !entry_ids->is_array()) {
      return Malformed(absl::StrCat(entry_path, ".ids"), "expected an array of ids");
    }
    for (size_t k = 0; k < entry_ids->size(); ++k) {
      DF11_ASSIGN_OR_RETURN(
          const int32_t id,
          tokenizer_internal::ParseId((*entry_ids)[k], absl::StrCat(entry_path, ".ids[", k, "]")));
      (saw_sequence ? after : before).push_back(id);
    }
  }
  if (!saw_sequence) return Malformed(absl::StrCat(path, ".single"), "has no $A sequence");
  // A later processor in a Sequence wraps what the earlier ones produced.
  prefix_ids.insert(prefix_ids.begin(), before.begin(), before.end());
  suffix_ids.insert(suffix_ids.end(), after.begin(), after.end());
  return absl::OkStatus();
}

absl::Status Tokenizer::Impl::ParsePostProcessor(const Json& root) {
  const Json* v = FindField(root, "post_processor");
  if (v == nullptr) return absl::OkStatus();
  DF11_ASSIGN_OR_RETURN(const std::string type,
                        tokenizer_internal::ComponentType(*v, "post_processor"));
  std::vector<std::pair<const Json*, std::string>> steps;
  if (type == "Sequence") {
    const Json* list = FindField(*v, "processors");
    if (list == nullptr || !list->is_array()) {
      return Malformed("post_processor.processors", "expected an array");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      steps.emplace_back(&(*list)[i], absl::StrCat("post_processor.processors[", i, "]"));
    }
  } else {
    steps.emplace_back(v, "post_processor");
  }
  for (const auto& [step, path] : steps) {
    DF11_ASSIGN_OR_RETURN(const std::string t, tokenizer_internal::ComponentType(*step, path));
    if (t == "ByteLevel") continue;  // adjusts offsets only
    if (t != "TemplateProcessing") {
      return Unsupported(path, absl::StrCat("type \"", t, "\""), kSupportedPostProcessors);
    }
    DF11_RETURN_IF_ERROR(ParseTemplate(*step, path));
  }
  return absl::OkStatus();
}

absl::Status Tokenizer::Impl::ParseAddedTokens(const Json& root) {
  const Json* list = FindField(root, "added_tokens");
  if (list == nullptr) return absl::OkStatus();
  if (!list->is_array()) return Malformed("added_tokens", "expected an array");
  // As AddedVocabulary::add_tokens when the tokenizer is deserialized: the id is the content's
  // existing id (an earlier added token, then the vocab), else the next one from the model's
  // vocab size. The "id" field is only checked to be an id; tokenizers merely warns when it
  // differs from the id it assigns.
  auto next_id = static_cast<int32_t>(bpe.vocab().size());
  absl::flat_hash_map<int32_t, size_t> index_of_id;
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& entry = (*list)[i];
    const std::string path = absl::StrCat("added_tokens[", i, "]");
    if (!entry.is_object()) return Malformed(path, "expected an object");
    const Json* id_field = FindField(entry, "id");
    if (id_field == nullptr) return Malformed(absl::StrCat(path, ".id"), "missing");
    DF11_RETURN_IF_ERROR(
        tokenizer_internal::ParseId(*id_field, absl::StrCat(path, ".id")).status());
    AddedToken token;
    DF11_ASSIGN_OR_RETURN(token.content,
                          tokenizer_internal::RequiredString(entry, "content", path));
    DF11_ASSIGN_OR_RETURN(token.single_word,
                          tokenizer_internal::OptionalBool(entry, "single_word", path, false));
    DF11_ASSIGN_OR_RETURN(token.lstrip,
                          tokenizer_internal::OptionalBool(entry, "lstrip", path, false));
    DF11_ASSIGN_OR_RETURN(token.rstrip,
                          tokenizer_internal::OptionalBool(entry, "rstrip", path, false));
    DF11_ASSIGN_OR_RETURN(token.special,
                          tokenizer_internal::OptionalBool(entry, "special", path, false));
    DF11_ASSIGN_OR_RETURN(token.normalized, tokenizer_internal::OptionalBool(entry, "normalized",
                                                                             path, !token.special));
    if (token.content.empty()) continue;  // tokenizers ignores empty tokens
    // A normalized token is matched (and decoded) as its normalized form (normalized_cache).
    token.pattern = token.normalized && !normalizer.identity() ? normalizer.Normalize(token.content)
                                                               : token.content;
    int32_t id;
    if (auto it = added_ids.find(token.content); it != added_ids.end()) {
      id = it->second;
    } else if (std::optional<int32_t> vocab_id = bpe.TokenId(token.content); vocab_id.has_value()) {
      id = *vocab_id;
    } else {
      id = next_id++;
    }
    token.id = id;
    added_ids[token.content] = id;
    if (auto it = index_of_id.find(id); it != index_of_id.end()) {
      added[it->second] = std::move(token);  // a re-added token replaces the earlier entry
    } else {
      index_of_id[id] = added.size();
      added.push_back(std::move(token));
    }
  }
  for (size_t k = 0; k < added.size(); ++k) {
    AddedTokenMatcher& matcher = added[k].normalized ? normalized_matcher : raw_matcher;
    matcher.Add(added[k].pattern, static_cast<int32_t>(k));
  }
  return absl::OkStatus();
}

absl::Status Tokenizer::Impl::BuildIdTables() {
  int64_t size = 0;
  for (const auto& [text, id] : bpe.vocab()) size = std::max<int64_t>(size, int64_t{id} + 1);
  for (const AddedToken& t : added) size = std::max<int64_t>(size, int64_t{t.id} + 1);
  // The tables are indexed by id: a file that lists a few tokens under ids in the billions (a
  // hostile or broken download) would take gigabytes. Real vocabularies are dense, with small gaps.
  const int64_t listed = static_cast<int64_t>(bpe.vocab().size() + added.size());
  const int64_t limit = 2 * listed + 65536;
  if (size > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer.json: id ", size - 1, " is far beyond the ", listed,
                     " tokens listed (ids must stay below ", limit, ")"));
  }
  id_text.assign(size, std::string());
  id_present.assign(size, false);
  id_special.assign(size, false);
  for (const auto& [text, id] : bpe.vocab()) {
    id_text[id] = text;
    id_present[id] = true;
  }
  // decode() maps an added id to its content, or to the normalized form when normalization
  // changes it (simple_id_to_token), ahead of the vocab.
  absl::flat_hash_set<std::string> special_contents;
  for (const AddedToken& t : added) {
    id_text[t.id] = t.normalized ? t.pattern : t.content;
    id_present[t.id] = true;
    if (t.special) special_contents.insert(t.content);
  }
  // skip_special_tokens drops a token whose *string* is a special token's content
  // (is_special_token), which is how tokenizers decides.
  for (int64_t id = 0; id < size; ++id) {
    id_special[id] = id_present[id] && special_contents.contains(id_text[id]);
  }
  return absl::OkStatus();
}

Tokenizer::Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<Tokenizer> Tokenizer::FromJson(const std::string& tokenizer_json_text) {
  Json root;
  try {
    root = Json::parse(tokenizer_json_text);
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: not valid JSON: ", e.what()));
  }
  if (!root.is_object()) return Malformed("(root)", "expected an object");
  if (const Json* version = FindField(root, "version"); version != nullptr) {
    if (!version->is_string()) return Malformed("version", "expected a string");
    if (version->get<std::string>() != "1.0") {
      return Unsupported("version", absl::StrCat("\"", version->get<std::string>(), "\""),
                         "\"1.0\"");
    }
  }
  auto impl = std::make_shared<Impl>();
  const Json* model = FindField(root, "model");
  if (model == nullptr) return Malformed("model", "missing");
  DF11_ASSIGN_OR_RETURN(impl->bpe, BpeModel::FromJson(*model));
  DF11_ASSIGN_OR_RETURN(impl->normalizer, Normalizer::FromJson(FindField(root, "normalizer")));
  DF11_ASSIGN_OR_RETURN(impl->pre_tokenizer,
                        PreTokenizer::FromJson(FindField(root, "pre_tokenizer")));
  DF11_ASSIGN_OR_RETURN(impl->decoder, Decoder::FromJson(FindField(root, "decoder")));
  DF11_RETURN_IF_ERROR(impl->ParsePostProcessor(root));
  DF11_RETURN_IF_ERROR(impl->ParseAddedTokens(root));
  DF11_RETURN_IF_ERROR(impl->BuildIdTables());
  return Tokenizer(std::move(impl));
}

absl::StatusOr<Tokenizer> Tokenizer::FromFile(const std::string& path) {
  DF11_ASSIGN_OR_RETURN(const std::string text, base::ReadFile(path, base::kMaxTokenizerBytes));
  absl::StatusOr<Tokenizer> tokenizer = FromJson(text);
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(),
                        absl::StrCat(path, ": ", tokenizer.status().message()));
  }
  return tokenizer;
}

absl::Status Tokenizer::Impl::EncodeSegment(std::string_view piece, bool at_text_start,
                                            std::vector<int32_t>* ids) const {
  std::string normalized_storage;
  std::string_view normalized = piece;
  if (!normalizer.identity()) {
    normalized_storage = normalizer.Normalize(piece);
    normalized = normalized_storage;
  }
  std::forward_list<std::string> storage;  // pre-tokens that the pre-tokenizer rewrote
  std::vector<std::string_view> pieces;
  for (const AddedSplit& s : normalized_matcher.Split(normalized, added)) {
    if (s.token >= 0) {
      ids->push_back(added[s.token].id);
      continue;
    }
    pieces.clear();
    // Normalized offset 0 of a segment at input offset 0 is input offset 0 (a Prepend
    // normalizer's prefix is aligned with the first character).
    DF11_RETURN_IF_ERROR(pre_tokenizer.Split(normalized.substr(s.begin, s.end - s.begin),
                                             at_text_start && s.begin == 0, &storage, &pieces));
    for (std::string_view p : pieces) {
      if (pre_tokenizer.byte_level()) {
        bpe.TokenizeByteLevel(p, ids);
      } else {
        bpe.Tokenize(p, ids);
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::Encode(std::string_view text,
                                                       bool add_special_tokens) const {
  if (!tokenizer_internal::IsValidUtf8(text)) {
    return absl::InvalidArgumentError("tokenizer: text to encode is not valid UTF-8");
  }
  const Impl& impl = *impl_;
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (add_special_tokens) ids = impl.prefix_ids;
  // extract_and_normalize: normalized=false added tokens in the raw text first; the rest is
  // normalized, searched for normalized=true added tokens, pre-tokenized and merged.
  for (const AddedSplit& s : impl.raw_matcher.Split(text, impl.added)) {
    if (s.token >= 0) {
      ids.push_back(impl.added[s.token].id);
    } else {
      DF11_RETURN_IF_ERROR(
          impl.EncodeSegment(text.substr(s.begin, s.end - s.begin), s.begin == 0, &ids));
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), impl.suffix_ids.begin(), impl.suffix_ids.end());
  return ids;
}

std::string Tokenizer::TokenBytes(int32_t id) const {
  std::string bytes;
  if (const std::string* token = TokenString(id, /*skip_special_tokens=*/false); token != nullptr) {
    impl_->decoder.AppendTokenBytes(*token, &bytes);
  }
  return bytes;
}

const std::string* Tokenizer::TokenString(int32_t id, bool skip_special_tokens) const {
  const Impl& impl = *impl_;
  if (id < 0 || id >= static_cast<int32_t>(impl.id_text.size()) || !impl.id_present[id]) {
    return nullptr;
  }
  if (skip_special_tokens && impl.id_special[id]) return nullptr;
  return &impl.id_text[id];
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  DecoderStream stream(impl_->decoder);
  std::string text;
  text.reserve(ids.size() * 4);
  for (int32_t id : ids) {
    if (const std::string* token = TokenString(id, skip_special_tokens); token != nullptr) {
      stream.Feed(*token, &text);
    }
  }
  stream.Finish(&text);
  return text;
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->id_text.size()); }

std::optional<int32_t> Tokenizer::TokenId(std::string_view token) const {
  if (auto it = impl_->added_ids.find(absl::string_view(token.data(), token.size()));
      it != impl_->added_ids.end())
    return it->second;
  return impl_->bpe.TokenId(token);
}

std::optional<std::string> Tokenizer::TokenText(int32_t id) const {
  if (id < 0 || id >= vocab_size() || !impl_->id_present[id]) return std::nullopt;
  return impl_->id_text[id];
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && id < vocab_size() && impl_->id_special[id];
}

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer),
      skip_special_tokens_(skip_special_tokens),
      stream_(std::make_unique<DecoderStream>(tokenizer.impl_->decoder)) {}

IncrementalDecoder::~IncrementalDecoder() = default;
IncrementalDecoder::IncrementalDecoder(IncrementalDecoder&&) noexcept = default;
IncrementalDecoder& IncrementalDecoder::operator=(IncrementalDecoder&&) noexcept = default;

std::string IncrementalDecoder::Feed(int32_t id) {
  std::string text;
  if (const std::string* token = tokenizer_->TokenString(id, skip_special_tokens_);
      token != nullptr) {
    stream_->Feed(*token, &text);
  }
  return text;
}

std::string IncrementalDecoder::Finish() {
  std::string text;
  stream_->Finish(&text);
  return text;
}

}  // namespace df11::runtime
