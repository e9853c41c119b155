#include "daemon/runtime/text/tokenizer/regex_split.h"

#include <algorithm>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "absl/strings/str_cat.h"

namespace df11::runtime::tokenizer_internal {

struct RegexSplitter::Code {
  ~Code() { pcre2_code_free(code); }
  pcre2_code* code = nullptr;
};

namespace {

std::string Pcre2Message(int error) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(error, buffer, sizeof(buffer)) < 0)
    return absl::StrCat("error ", error);
  return std::string(reinterpret_cast<const char*>(buffer));
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* md) const { pcre2_match_data_free(md); }
};

// Unicode White_Space, the set Oniguruma's \s matches in UTF-8 text (CR_Space in its unicode
// tables). PCRE2's UCP \s is \p{Z}, \h and \v, which adds U+180E MONGOLIAN VOWEL SEPARATOR
// (no longer White_Space since Unicode 6.3).
constexpr char kWhiteSpaceRanges[] =
    "\\t-\\r\\x20\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"
    "\\x{205F}\\x{3000}";

// Rewrites \s (anywhere) and \S (outside character classes) as explicit White_Space sets so that
// PCRE2 splits exactly where Oniguruma does. Other escapes, \Q..\E quoting aside, are copied.
std::string WithOnigurumaWhiteSpace(const std::string& pattern) {
  std::string out;
  out.reserve(pattern.size() + 64);
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == 's') {
        out +=
            in_class ? std::string(kWhiteSpaceRanges) : absl::StrCat("[", kWhiteSpaceRanges, "]");
      } else if (next == 'S' && !in_class) {
        out += absl::StrCat("[^", kWhiteSpaceRanges, "]");
      } else {
        out += c;
        out += next;
      }
      continue;
    }
    out += c;
    if (!in_class && c == '[') {
      in_class = true;
      // A leading '^' negates; a ']' right after '[' or '[^' is a literal.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
    } else if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      const size_t close = pattern.find(":]", i + 2);  // a POSIX class such as [:alpha:]
      if (close != std::string::npos) {
        out.append(pattern, i + 1, close + 2 - (i + 1));
        i = close + 1;
      }
    } else if (in_class && c == ']') {
      in_class = false;
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<RegexSplitter> RegexSplitter::Compile(const std::string& pattern, bool literal,
                                                     SplitBehavior behavior, bool invert,
                                                     const std::string& path) {
  // UCP makes \s, \w, \d and POSIX classes Unicode-aware, as Oniguruma's are for UTF-8 text.
  // PCRE2_LITERAL admits no UCP (which a literal does not need).
  const uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  int error = 0;
  PCRE2_SIZE offset = 0;
  // The pattern as written is compiled first so that an error's offset refers to it.
  pcre2_code* original = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                       options, &error, &offset, nullptr);
  if (original == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: ", path,
                                                   ": pattern does not compile at offset ", offset,
                                                   ": ", Pcre2Message(error)));
  }
  auto code = std::make_shared<Code>();
  if (literal) {
    code->code = original;
  } else {
    pcre2_code_free(original);
    const std::string rewritten = WithOnigurumaWhiteSpace(pattern);
    code->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.data()), rewritten.size(),
                               options, &error, &offset, nullptr);
    if (code->code == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer.json: ", path,
                       ": pattern with explicit \\s does not compile: ", Pcre2Message(error)));
    }
  }
  // JIT is an optimization only: without it (e.g. a build without JIT support) matching uses the
  // interpreter with identical results.
  pcre2_jit_compile(code->code, PCRE2_JIT_COMPLETE);
  RegexSplitter splitter;
  splitter.code_ = std::move(code);
  splitter.behavior_ = behavior;
  splitter.invert_ = invert;
  return splitter;
}

void SplitBySpans(std::string_view text, const std::vector<MatchSpan>& spans,
                  SplitBehavior behavior, bool invert, std::vector<std::string_view>* pieces) {
  struct Part {
    size_t begin;
    size_t end;
    bool remove;
  };
  std::vector<Part> parts;
  parts.reserve(spans.size());
  bool previous_match = false;
  // The folds of NormalizedString::split, one per behavior.
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const MatchSpan& s : spans) parts.push_back(Part{s.begin, s.end, false});
      break;
    case SplitBehavior::kRemoved:
      for (const MatchSpan& s : spans) parts.push_back(Part{s.begin, s.end, s.is_match != invert});
      break;
    case SplitBehavior::kContiguous:
      for (const MatchSpan& s : spans) {
        const bool match = s.is_match != invert;
        if (match == previous_match && !parts.empty()) {
          parts.back().end = s.end;
        } else {
          parts.push_back(Part{s.begin, s.end, false});
        }
        previous_match = match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const MatchSpan& s : spans) {
        const bool match = s.is_match != invert;
        if (match && !previous_match && !parts.empty()) {
          parts.back().end = s.end;
        } else {
          parts.push_back(Part{s.begin, s.end, false});
        }
        previous_match = match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      // Folded from the end: a match joins the piece after it.
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        const bool match = it->is_match != invert;
        if (match && !previous_match && !parts.empty()) {
          parts.back().begin = it->begin;
        } else {
          parts.push_back(Part{it->begin, it->end, false});
        }
        previous_match = match;
      }
      std::reverse(parts.begin(), parts.end());
      break;
  }
  for (const Part& p : parts) {
    if (!p.remove && p.end > p.begin) pieces->push_back(text.substr(p.begin, p.end - p.begin));
  }
}

absl::Status RegexSplitter::Split(std::string_view text,
                                  std::vector<std::string_view>* pieces) const {
  if (text.empty()) return absl::OkStatus();
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(
      pcre2_match_data_create_from_pattern(code_->code, nullptr));
  if (md == nullptr) return absl::ResourceExhaustedError("pcre2_match_data_create failed");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  // Isolated (the Llama-3, Qwen2 and GPT-2 splits) ignores which entries are matches.
  const bool isolated = behavior_ == SplitBehavior::kIsolated;
  std::vector<MatchSpan> spans;
  size_t prev = 0;       // end of the last match
  size_t start = 0;      // where the next search begins
  bool matched = false;  // whether there was a match before
  while (start <= text.size()) {
    // The text was validated as UTF-8 before splitting, so PCRE2 need not check it again.
    int rc = pcre2_match(code_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, md.get(),
                         nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      // The JIT's default 32 KiB stack is too small for this input; the interpreter keeps its
      // backtracking state on the heap.
      rc = pcre2_match(code_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                       md.get(), nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) return absl::InternalError(absl::StrCat("tokenizer regex: ", Pcre2Message(rc)));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(md.get());
    const size_t match_start = ovector[0], match_end = ovector[1];
    // The onig crate's find_iter drops an empty match right where the last match ended (and so
    // never repeats one); any other empty match is an entry too: it makes no piece, but the
    // merging behaviors see it.
    const bool empty = match_end == match_start;
    if (!(empty && matched && match_end == prev)) {
      if (isolated) {
        // Every entry is a piece of its own: no need to collect them.
        if (match_start > prev) pieces->push_back(text.substr(prev, match_start - prev));
        if (!empty) pieces->push_back(text.substr(match_start, match_end - match_start));
      } else {
        if (match_start > prev) spans.push_back(MatchSpan{prev, match_start, false});
        spans.push_back(MatchSpan{match_start, match_end, true});
      }
      prev = match_end;
      matched = true;
    }
    if (!empty) {
      start = match_end;
    } else {
      // After an empty match, the search resumes one character further on.
      if (match_end >= text.size()) break;
      start = match_end + 1;
      while (start < text.size() && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) ++start;
    }
  }
  if (isolated) {
    if (prev < text.size()) pieces->push_back(text.substr(prev));
    return absl::OkStatus();
  }
  if (prev < text.size()) spans.push_back(MatchSpan{prev, text.size(), false});
  SplitBySpans(text, spans, behavior_, invert_, pieces);
  return absl::OkStatus();
}

}  // namespace df11::runtime::tokenizer_internal
