#include "daemon/runtime/text/tokenizer/decoder.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "codec/base/status_macros.h"
#include "daemon/runtime/text/tokenizer/json_fields.h"
#include "daemon/runtime/text/tokenizer/pre_tokenizer.h"
#include "daemon/runtime/text/tokenizer/text_util.h"

namespace df11::runtime::tokenizer_internal {
namespace {

constexpr char kReplacementCharacter[] = "\xEF\xBF\xBD";  // U+FFFD
constexpr size_t kMaxSteps = 64;

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The byte a ByteFallback token "<0xNN>" stands for, or -1 for another token. As byte_fallback.rs:
// six bytes, "<0x" ... ">", and u8::from_str_radix(.., 16) of the two in between, which also
// accepts a '+' sign before a single digit.
int ByteTokenValue(std::string_view token) {
  if (token.size() != 6 || token.substr(0, 3) != "<0x" || token[5] != '>') return -1;
  if (token[3] == '+') return HexDigit(token[4]);
  const int hi = HexDigit(token[3]), lo = HexDigit(token[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// Reads a one-character string field (Rust `char`).
absl::StatusOr<std::string> RequiredChar(const Json& v, const char* key, const std::string& path) {
  DF11_ASSIGN_OR_RETURN(std::string s, RequiredString(v, key, path));
  size_t end = 0;
  if (!s.empty()) NextCodePoint(s, &end);
  if (s.empty() || end != s.size()) {
    return Malformed(absl::StrCat(path, ".", key), "expected one character");
  }
  return s;
}

absl::StatusOr<size_t> RequiredCount(const Json& v, const char* key, const std::string& path) {
  const Json* n = FindField(v, key);
  if (n == nullptr) return Malformed(absl::StrCat(path, ".", key), "missing");
  if (!n->is_number_integer() || (!n->is_number_unsigned() && n->get<int64_t>() < 0)) {
    return Malformed(absl::StrCat(path, ".", key), "expected a non-negative integer");
  }
  return static_cast<size_t>(n->get<uint64_t>());
}

// The leading characters `c` of `token`, at most `max` of them, removed (strip.rs with stop 0).
std::string_view StripLeading(std::string_view token, std::string_view c, size_t max) {
  for (size_t n = 0; n < max && token.substr(0, c.size()) == c; ++n) token.remove_prefix(c.size());
  return token;
}

}  // namespace

absl::StatusOr<Decoder> Decoder::FromJson(const Json* decoder) {
  if (decoder == nullptr) return Unsupported("decoder", "null", kSupported);
  Decoder d;
  DF11_RETURN_IF_ERROR(d.AddStep(*decoder, "decoder", false));
  return d;
}

absl::Status Decoder::AddStep(const Json& v, const std::string& path, bool nested) {
  DF11_ASSIGN_OR_RETURN(const std::string type, ComponentType(v, path));
  if (type == "Sequence" && !nested) {
    const Json* list = FindField(v, "decoders");
    if (list == nullptr || !list->is_array()) {
      return Malformed(absl::StrCat(path, ".decoders"), "expected an array");
    }
    // DecoderStream recurses once per step; released files have at most four.
    if (list->size() > kMaxSteps) {
      return Unsupported(absl::StrCat(path, ".decoders"),
                         absl::StrCat(list->size(), " steps (at most ", kMaxSteps, ")"),
                         kSupported);
    }
    for (size_t i = 0; i < list->size(); ++i) {
      DF11_RETURN_IF_ERROR(AddStep((*list)[i], absl::StrCat(path, ".decoders[", i, "]"), true));
    }
    return absl::OkStatus();
  }
  const bool fused = !steps_.empty() && (steps_.back().fused || steps_.back().kind == Kind::kFuse ||
                                         steps_.back().kind == Kind::kByteLevel);
  Step step;
  step.kind = Kind::kFuse;
  step.fused = fused;
  if (type == "Fuse") {
    step.kind = Kind::kFuse;
  } else if (type == "Strip") {
    step.kind = Kind::kStrip;
    DF11_ASSIGN_OR_RETURN(step.pattern, RequiredChar(v, "content", path));
    DF11_ASSIGN_OR_RETURN(step.strip_start, RequiredCount(v, "start", path));
    DF11_ASSIGN_OR_RETURN(const size_t stop, RequiredCount(v, "stop", path));
    if (stop != 0) {
      return Unsupported(absl::StrCat(path, ".stop"), absl::StrCat(stop), kSupported);
    }
  } else if (fused) {
    return Unsupported(path, absl::StrCat("type \"", type, "\" after Fuse or ByteLevel"),
                       kSupported);
  } else if (type == "ByteLevel") {
    // add_prefix_space, trim_offsets and use_regex do not change decoding.
    step.kind = Kind::kByteLevel;
  } else if (type == "ByteFallback") {
    step.kind = Kind::kByteFallback;
  } else if (type == "Metaspace") {
    step.kind = Kind::kMetaspace;
    DF11_ASSIGN_OR_RETURN(const MetaspaceOptions m, ParseMetaspace(v, path));
    step.pattern = m.replacement;
    step.drop_in_first = m.prepend_scheme != PrependScheme::kNever;
  } else if (type == "Replace") {
    step.kind = Kind::kReplace;
    DF11_ASSIGN_OR_RETURN(const StringReplace r, ParseStringReplace(v, path, kSupported));
    step.pattern = r.pattern;
    step.content = r.content;
  } else {
    return Unsupported(path, absl::StrCat("type \"", type, "\""), kSupported);
  }
  steps_.push_back(std::move(step));
  return absl::OkStatus();
}

void Decoder::AppendTokenBytes(std::string_view token, std::string* out) const {
  std::string t(token);
  for (const Step& step : steps_) {
    if (step.fused) break;
    switch (step.kind) {
      case Kind::kReplace:
        t = ReplaceAll(t, step.pattern, step.content);
        break;
      case Kind::kMetaspace:
        t = ReplaceAll(t, step.pattern, " ");
        break;
      case Kind::kStrip:
        t = std::string(StripLeading(t, step.pattern, step.strip_start));
        break;
      case Kind::kByteFallback:
        if (const int b = ByteTokenValue(t); b >= 0) t = std::string(1, static_cast<char>(b));
        break;
      case Kind::kByteLevel: {
        std::string bytes;
        ByteLevelDecodeToken(t, &bytes);
        t = std::move(bytes);
        break;
      }
      case Kind::kFuse:
        break;
    }
  }
  out->append(t);
}

DecoderStream::DecoderStream(const Decoder& decoder) : decoder_(&decoder) { Reset(); }

void DecoderStream::Reset() {
  states_.assign(decoder_->steps_.size(), State{});
  for (size_t k = 0; k < states_.size(); ++k)
    states_[k].strip_left = decoder_->steps_[k].strip_start;
}

void DecoderStream::Feed(std::string_view token, std::string* out) { Push(0, token, out); }

void DecoderStream::Push(size_t k, std::string_view token, std::string* out) {
  using Kind = Decoder::Kind;
  if (k == states_.size()) {
    out->append(token);
    return;
  }
  const Decoder::Step& step = decoder_->steps_[k];
  State& s = states_[k];
  switch (step.kind) {
    case Kind::kReplace:
      if (token.find(step.pattern) == std::string_view::npos) {
        Push(k + 1, token, out);
      } else {
        Push(k + 1, ReplaceAll(token, step.pattern, step.content), out);
      }
      return;
    case Kind::kMetaspace: {
      // metaspace.rs decode_chain: the replacement is a space, except in the first token, where
      // it is dropped (every occurrence) unless prepend_scheme is "never".
      const bool first = s.tokens_seen++ == 0;
      Push(k + 1, ReplaceAll(token, step.pattern, first && step.drop_in_first ? "" : " "), out);
      return;
    }
    case Kind::kStrip:
      if (!step.fused) {
        Push(k + 1, StripLeading(token, step.pattern, step.strip_start), out);
        return;
      }
      // After Fuse the chunks make up one token: only the text's first characters can go.
      if (s.strip_left > 0) {
        const std::string_view rest = StripLeading(token, step.pattern, s.strip_left);
        s.strip_left -= (token.size() - rest.size()) / step.pattern.size();
        if (!rest.empty()) s.strip_left = 0;
        token = rest;
      }
      Push(k + 1, token, out);
      return;
    case Kind::kFuse:
      Push(k + 1, token, out);
      return;
    case Kind::kByteFallback: {
      const int b = ByteTokenValue(token);
      if (b < 0) {
        FlushRun(k, out);
        Push(k + 1, token, out);
        return;
      }
      if (s.run_invalid) {  // the run already went out as U+FFFDs, one per byte
        Push(k + 1, kReplacementCharacter, out);
        return;
      }
      s.run.push_back(static_cast<char>(b));
      size_t i = s.run_valid, len;
      while (i < s.run.size()) {
        const Utf8Scan scan = ScanUtf8(s.run, i, &len);
        if (scan == Utf8Scan::kTruncated) break;
        if (scan == Utf8Scan::kInvalid) {
          // String::from_utf8 of the whole run will fail whatever follows.
          const size_t n = s.run.size();
          s.run.clear();
          s.run_valid = 0;
          s.run_invalid = true;
          for (size_t j = 0; j < n; ++j) Push(k + 1, kReplacementCharacter, out);
          return;
        }
        i += len;
        s.run_valid = i;
      }
      return;
    }
    case Kind::kByteLevel: {
      ByteLevelDecodeToken(token, &s.pending);
      const size_t settled = SettledUtf8Prefix(s.pending);
      if (settled == 0) return;
      const std::string_view ready = std::string_view(s.pending).substr(0, settled);
      if (k + 1 == states_.size()) {
        AppendUtf8Lossy(ready, out);
      } else {
        std::string text;
        AppendUtf8Lossy(ready, &text);
        Push(k + 1, text, out);
      }
      s.pending.erase(0, settled);
      return;
    }
  }
}

void DecoderStream::FlushRun(size_t k, std::string* out) {
  State& s = states_[k];
  if (s.run_invalid) {
    s.run_invalid = false;
    return;
  }
  if (s.run.empty()) return;
  const std::string run = std::move(s.run);
  const bool valid = s.run_valid == run.size();
  s.run.clear();
  s.run_valid = 0;
  if (valid) {
    Push(k + 1, run, out);
  } else {
    for (size_t j = 0; j < run.size(); ++j) Push(k + 1, kReplacementCharacter, out);
  }
}

void DecoderStream::Finish(std::string* out) {
  using Kind = Decoder::Kind;
  for (size_t k = 0; k < states_.size(); ++k) {
    State& s = states_[k];
    if (decoder_->steps_[k].kind == Kind::kByteFallback) FlushRun(k, out);
    if (decoder_->steps_[k].kind == Kind::kByteLevel && !s.pending.empty()) {
      std::string text;
      AppendUtf8Lossy(s.pending, &text);
      s.pending.clear();
      Push(k + 1, text, out);
    }
  }
  Reset();
}

}  // namespace df11::runtime::tokenizer_internal
