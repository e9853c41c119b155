#include "daemon/runtime/text/tokenizer/pre_tokenizer.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codec/base/status_macros.h"
#include "daemon/runtime/text/tokenizer/json_fields.h"
#include "daemon/runtime/text/tokenizer/text_util.h"

namespace df11::runtime::tokenizer_internal {
namespace {

// The GPT-2 split that ByteLevel applies when use_regex is true (pre_tokenizers/byte_level.rs RE).
constexpr char kGpt2Pattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

absl::StatusOr<SplitBehavior> ParseBehavior(const std::string& behavior, const std::string& path) {
  if (behavior == "Removed") return SplitBehavior::kRemoved;
  if (behavior == "Isolated") return SplitBehavior::kIsolated;
  if (behavior == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (behavior == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (behavior == "Contiguous") return SplitBehavior::kContiguous;
  return Unsupported(path, absl::StrCat("\"", behavior, "\""),
                     "Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous");
}

}  // namespace

absl::StatusOr<MetaspaceOptions> ParseMetaspace(const Json& v, const std::string& path) {
  MetaspaceOptions options;
  DF11_ASSIGN_OR_RETURN(options.replacement, RequiredString(v, "replacement", path));
  size_t end = 0;
  if (!options.replacement.empty()) NextCodePoint(options.replacement, &end);
  if (options.replacement.empty() || end != options.replacement.size()) {
    return Malformed(absl::StrCat(path, ".replacement"), "expected one character");
  }
  DF11_ASSIGN_OR_RETURN(const std::optional<std::string> scheme,
                        OptionalString(v, "prepend_scheme", path));
  if (!scheme.has_value() || *scheme == "always") {
    options.prepend_scheme = PrependScheme::kAlways;
  } else if (*scheme == "first") {
    options.prepend_scheme = PrependScheme::kFirst;
  } else if (*scheme == "never") {
    options.prepend_scheme = PrependScheme::kNever;
  } else {
    return Malformed(
        absl::StrCat(path, ".prepend_scheme"),
        absl::StrCat("expected \"always\", \"first\" or \"never\", got \"", *scheme, "\""));
  }
  DF11_ASSIGN_OR_RETURN(const bool add_prefix_space,
                        OptionalBool(v, "add_prefix_space", path, true));
  if (!add_prefix_space) {
    if (options.prepend_scheme != PrependScheme::kNever) {
      return Malformed(absl::StrCat(path, ".add_prefix_space"),
                       "false does not match the declared prepend_scheme");
    }
  }
  DF11_ASSIGN_OR_RETURN(options.split, OptionalBool(v, "split", path, true));
  return options;
}

absl::StatusOr<PreTokenizer> PreTokenizer::FromJson(const Json* pre_tokenizer) {
  PreTokenizer p;
  if (pre_tokenizer == nullptr) return p;
  DF11_ASSIGN_OR_RETURN(const std::string type, ComponentType(*pre_tokenizer, "pre_tokenizer"));
  if (type != "Sequence") {
    DF11_RETURN_IF_ERROR(p.AddStep(*pre_tokenizer, "pre_tokenizer"));
    return p;
  }
  const Json* list = FindField(*pre_tokenizer, "pretokenizers");
  if (list == nullptr || !list->is_array()) {
    return Malformed("pre_tokenizer.pretokenizers", "expected an array");
  }
  for (size_t i = 0; i < list->size(); ++i) {
    DF11_RETURN_IF_ERROR(
        p.AddStep((*list)[i], absl::StrCat("pre_tokenizer.pretokenizers[", i, "]")));
  }
  return p;
}

absl::Status PreTokenizer::AddStep(const Json& v, const std::string& path) {
  DF11_ASSIGN_OR_RETURN(const std::string type, ComponentType(v, path));
  if (byte_level_) {
    return Unsupported(path, absl::StrCat("type \"", type, "\" after ByteLevel"), kSupported);
  }
  if (type == "Split") {
    const Json* pattern = FindField(v, "pattern");
    if (pattern == nullptr || !pattern->is_object() || pattern->size() != 1) {
      return Malformed(absl::StrCat(path, ".pattern"),
                       "expected {\"Regex\": ...} or {\"String\": ...}");
    }
    const bool literal = pattern->contains("String");
    if (!literal && !pattern->contains("Regex")) {
      return Malformed(absl::StrCat(path, ".pattern"),
                       "expected {\"Regex\": ...} or {\"String\": ...}");
    }
    DF11_ASSIGN_OR_RETURN(
        const std::string text,
        RequiredString(*pattern, literal ? "String" : "Regex", absl::StrCat(path, ".pattern")));
    DF11_ASSIGN_OR_RETURN(const std::string behavior_name, RequiredString(v, "behavior", path));
    DF11_ASSIGN_OR_RETURN(const SplitBehavior behavior,
                          ParseBehavior(behavior_name, absl::StrCat(path, ".behavior")));
    const Json* invert = FindField(v, "invert");
    if (invert == nullptr || !invert->is_boolean()) {
      return Malformed(absl::StrCat(path, ".invert"), "expected a boolean");
    }
    Step step;
    step.kind = Kind::kSplit;
    DF11_ASSIGN_OR_RETURN(step.splitter,
                          RegexSplitter::Compile(text, literal, behavior, invert->get<bool>(),
                                                 absl::StrCat(path, ".pattern")));
    steps_.push_back(std::move(step));
    return absl::OkStatus();
  }
  if (type == "Metaspace") {
    Step step;
    step.kind = Kind::kMetaspace;
    DF11_ASSIGN_OR_RETURN(step.metaspace, ParseMetaspace(v, path));
    steps_.push_back(std::move(step));
    return absl::OkStatus();
  }
  if (type == "ByteLevel") {
    const Json* prefix = FindField(v, "add_prefix_space");
    if (prefix == nullptr || !prefix->is_boolean()) {
      return Malformed(absl::StrCat(path, ".add_prefix_space"), "expected a boolean");
    }
    if (prefix->get<bool>()) {
      return Unsupported(absl::StrCat(path, ".add_prefix_space"), "true", kSupported);
    }
    DF11_ASSIGN_OR_RETURN(const bool use_regex, OptionalBool(v, "use_regex", path, true));
    if (use_regex) {
      Step step;
      step.kind = Kind::kSplit;
      DF11_ASSIGN_OR_RETURN(
          step.splitter,
          RegexSplitter::Compile(kGpt2Pattern, false, SplitBehavior::kIsolated, false, path));
      steps_.push_back(std::move(step));
    }
    byte_level_ = true;
    return absl::OkStatus();
  }
  return Unsupported(path, absl::StrCat("type \"", type, "\""), kSupported);
}

void PreTokenizer::Metaspace(const Step& step, Piece piece, std::forward_list<std::string>* storage,
                             std::vector<Piece>* out) const {
  // metaspace.rs: every ' ' becomes the replacement, which is then put in front unless the piece
  // starts with it (for "first": only a piece at offset 0 of the input), then optionally split
  // in front of each replacement (MergedWithNext).
  const MetaspaceOptions& m = step.metaspace;
  // Whether the piece starts with the replacement once its spaces are replaced.
  const bool starts =
      piece.text.substr(0, m.replacement.size()) == m.replacement || piece.text.substr(0, 1) == " ";
  const bool prepend =
      !starts && (m.prepend_scheme == PrependScheme::kAlways ||
                  (m.prepend_scheme == PrependScheme::kFirst && piece.at_text_start));
  std::string_view text = piece.text;
  if (prepend || text.find(' ') != std::string_view::npos) {
    std::string& s = storage->emplace_front();
    s.reserve(text.size() + 8);
    if (prepend) s = m.replacement;
    for (char c : text) {
      if (c == ' ') {
        s += m.replacement;
      } else {
        s += c;
      }
    }
    text = s;
  }
  if (!m.split) {
    out->push_back(Piece{text, piece.at_text_start});
    return;
  }
  std::vector<MatchSpan> spans;
  size_t prev = 0;
  for (size_t pos = text.find(m.replacement); pos != std::string_view::npos;
       pos = text.find(m.replacement, pos + m.replacement.size())) {
    if (pos > prev) spans.push_back(MatchSpan{prev, pos, false});
    spans.push_back(MatchSpan{pos, pos + m.replacement.size(), true});
    prev = pos + m.replacement.size();
  }
  if (prev < text.size()) spans.push_back(MatchSpan{prev, text.size(), false});
  std::vector<std::string_view> split;
  SplitBySpans(text, spans, SplitBehavior::kMergedWithNext, false, &split);
  for (std::string_view s : split) {
    out->push_back(Piece{s, piece.at_text_start && s.data() == text.data()});
  }
}

absl::Status PreTokenizer::Split(std::string_view text, bool at_text_start,
                                 std::forward_list<std::string>* storage,
                                 std::vector<std::string_view>* pieces) const {
  if (text.empty()) return absl::OkStatus();
  if (steps_.empty()) {
    pieces->push_back(text);
    return absl::OkStatus();
  }
  if (steps_.size() == 1 && steps_[0].kind == Kind::kSplit) {
    return steps_[0].splitter.Split(text, pieces);  // the byte-level files' one regex
  }
  std::vector<Piece> current{Piece{text, at_text_start}}, next;
  std::vector<std::string_view> split;
  for (const Step& step : steps_) {
    next.clear();
    for (const Piece& piece : current) {
      if (step.kind == Kind::kMetaspace) {
        Metaspace(step, piece, storage, &next);
        continue;
      }
      split.clear();
      DF11_RETURN_IF_ERROR(step.splitter.Split(piece.text, &split));
      for (std::string_view s : split) {
        // Only a piece that begins where its parent does can be at the start of the input.
        next.push_back(Piece{s, piece.at_text_start && s.data() == piece.text.data()});
      }
    }
    current.swap(next);
  }
  for (const Piece& piece : current) pieces->push_back(piece.text);
  return absl::OkStatus();
}

}  // namespace df11::runtime::tokenizer_internal
