#include "daemon/runtime/text/chat/lexer.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "absl/status/status.h"
#include "daemon/runtime/text/chat/py_text.h"
#include "daemon/runtime/text/chat/str_cat.h"

namespace df11::runtime::chat {
namespace {

// Jinja's operators, longest first so that "//" wins over "/".
constexpr std::string_view kOperators[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/",
                                           "*",  "%",  "~",  "[",  "]",  "(",  ")", "{", "}",
                                           ">",  "<",  "=",  ".",  ":",  "|",  ",", ";"};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }
int HexValue(char c) {
  if (IsDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "\r\n" and "\r" become "\n"; one trailing newline goes (keep_trailing_newline=False).
std::string NormalizeNewlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Length of the Python whitespace code point at `s[pos]`, or 0.
size_t SpaceAt(std::string_view s, size_t pos) {
  const auto b = static_cast<unsigned char>(s[pos]);
  if (b < 0x80) return IsPySpace(b) ? 1 : 0;
  const size_t n = (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : 4;
  if (pos + n > s.size()) return 0;
  return IsPySpace(DecodeUtf8(s.substr(pos, n))[0]) ? n : 0;
}

// Python's str.rstrip() of `text`.
std::string_view RStripSpace(std::string_view text) {
  const std::u32string decoded = DecodeUtf8(text);
  size_t keep = decoded.size();
  while (keep > 0 && IsPySpace(decoded[keep - 1])) --keep;
  size_t bytes = 0;
  for (size_t i = 0; i < keep; ++i) {
    const char32_t c = decoded[i];
    bytes += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
  }
  return text.substr(0, bytes);
}

bool AllSpace(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const size_t n = SpaceAt(text, i);
    if (n == 0) return false;
    i += n;
  }
  return !text.empty();
}

int CountNewlines(std::string_view text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  absl::StatusOr<std::vector<Token>> Run() {
    while (pos_ < src_.size()) {
      if (absl::Status s = LexRoot(); !s.ok()) return s;
    }
    Emit(TokenType::kEnd, "");
    return std::move(tokens_);
  }

 private:
  bool StartsWith(std::string_view prefix) const {
    return std::string_view(src_).substr(pos_, prefix.size()) == prefix;
  }

  void Emit(TokenType type, std::string text) {
    Token token;
    token.type = type;
    token.text = std::move(text);
    token.line = line_;
    tokens_.push_back(std::move(token));
  }

  absl::Status SyntaxError(std::string_view message) const {
    return absl::InvalidArgumentError(AtLine(line_, message));
  }

  // Skips whitespace after `-%}`, `-}}` or `-#}`.
  void SkipSpace() {
    while (pos_ < src_.size()) {
      const size_t n = SpaceAt(src_, pos_);
      if (n == 0) break;
      line_ += src_[pos_] == '\n';
      pos_ += n;
    }
  }

  // {%(-|+|)\s*raw\s*(-%}|%}), which jinja2 lexes as a raw block.
  bool IsRawTag(size_t tag) const {
    size_t i = tag + 2;
    if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ++i;
    while (i < src_.size() && SpaceAt(src_, i) > 0) i += SpaceAt(src_, i);
    if (std::string_view(src_).substr(i, 3) != "raw") return false;
    i += 3;
    while (i < src_.size() && SpaceAt(src_, i) > 0) i += SpaceAt(src_, i);
    const std::string_view rest = std::string_view(src_).substr(i);
    return rest.substr(0, 2) == "%}" || rest.substr(0, 3) == "-%}";
  }

  // Text up to the next tag, then the tag.
  absl::Status LexRoot() {
    size_t tag = pos_;
    char kind = 0;
    while ((tag = src_.find('{', tag)) != std::string::npos && tag + 1 < src_.size()) {
      const char next = src_[tag + 1];
      if (next == '{' || next == '%' || next == '#') {
        kind = next;
        break;
      }
      ++tag;
    }
    if (kind == 0) {
      Emit(TokenType::kData, src_.substr(pos_));
      line_ += CountNewlines(std::string_view(src_).substr(pos_));
      pos_ = src_.size();
      return absl::OkStatus();
    }
    const std::string_view raw_text = std::string_view(src_).substr(pos_, tag - pos_);
    const size_t after = tag + 2;
    const char sign =
        after < src_.size() && (src_[after] == '-' || src_[after] == '+') ? src_[after] : 0;
    std::string_view text = raw_text;
    if (sign == '-') {
      text = RStripSpace(text);
    } else if (sign != '+' && kind != '{') {
      // lstrip_blocks: only whitespace between the line start and the tag.
      const size_t newline = text.rfind('\n');
      const size_t line_start = newline == std::string_view::npos ? 0 : newline + 1;
      if ((line_start > 0 || line_starting_) && AllSpace(text.substr(line_start))) {
        text = text.substr(0, line_start);
      }
    }
    if (!text.empty()) Emit(TokenType::kData, std::string(text));
    line_ += CountNewlines(raw_text);
    line_starting_ = false;
    if (kind == '%' && IsRawTag(tag)) {
      return absl::FailedPreconditionError(AtLine(line_, "unsupported Jinja tag 'raw'"));
    }
    pos_ = after + (sign != 0 ? 1 : 0);
    if (kind == '#') return LexComment();
    Emit(kind == '%' ? TokenType::kBlockBegin : TokenType::kVariableBegin, "");
    return LexTag(kind == '%');
  }

  absl::Status LexComment() {
    // jinja2 quietly ends a template that ends right after `{#` (no rule matches, at the end).
    if (pos_ >= src_.size()) return absl::OkStatus();
    const int start_line = line_;
    for (size_t i = pos_; i < src_.size(); ++i) {
      const std::string_view rest = std::string_view(src_).substr(i);
      size_t end = 0;
      bool strip_after = false;
      if (rest.substr(0, 3) == "+#}") {
        end = i + 3;
      } else if (rest.substr(0, 3) == "-#}") {
        end = i + 3;
        strip_after = true;
      } else if (rest.substr(0, 2) == "#}") {
        end = i + 2;
        if (end < src_.size() && src_[end] == '\n') ++end;  // trim_blocks
      } else {
        continue;
      }
      line_ += CountNewlines(std::string_view(src_).substr(pos_, end - pos_));
      pos_ = end;
      if (strip_after) SkipSpace();
      line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(AtLine(start_line, "missing end of comment tag '#}'"));
  }

  // Tokens up to the end of a {% %} or {{ }} tag.
  absl::Status LexTag(bool block) {
    std::vector<char> brackets;  // closers expected, innermost last
    while (true) {
      if (pos_ >= src_.size()) {
        return SyntaxError(
            Cat("unexpected end of template inside a ", block ? "{% %}" : "{{ }}", " tag"));
      }
      if (brackets.empty()) {
        const std::string_view close = block ? "%}" : "}}";
        if (block && StartsWith("+%}")) {
          pos_ += 3;
          Emit(TokenType::kBlockEnd, "");
          line_starting_ = false;
          return absl::OkStatus();
        }
        if (StartsWith("-") && std::string_view(src_).substr(pos_ + 1, 2) == close) {
          Emit(block ? TokenType::kBlockEnd : TokenType::kVariableEnd, "");
          pos_ += 3;
          SkipSpace();
          line_starting_ = src_[pos_ - 1] == '\n';
          return absl::OkStatus();
        }
        if (StartsWith(close)) {
          Emit(block ? TokenType::kBlockEnd : TokenType::kVariableEnd, "");
          pos_ += 2;
          line_starting_ = false;
          if (block && pos_ < src_.size() && src_[pos_] == '\n') {  // trim_blocks
            ++pos_;
            ++line_;
            line_starting_ = true;
          }
          return absl::OkStatus();
        }
      }
      if (const size_t n = SpaceAt(src_, pos_); n > 0) {
        SkipSpace();
        continue;
      }
      const char c = src_[pos_];
      if (IsDigit(c)) {
        if (absl::Status s = LexNumber(); !s.ok()) return s;
      } else if (IsNameStart(c)) {
        const size_t start = pos_;
        while (pos_ < src_.size() && IsNameChar(src_[pos_])) ++pos_;
        Emit(TokenType::kName, src_.substr(start, pos_ - start));
      } else if (c == '\'' || c == '"') {
        if (absl::Status s = LexString(); !s.ok()) return s;
      } else if (absl::Status s = LexOperator(brackets); !s.ok()) {
        return s;
      }
    }
  }

  // Digits with single underscores between them: (\d+_)*\d+. Returns the end, or npos.
  size_t ScanDigits(size_t i) const {
    if (i >= src_.size() || !IsDigit(src_[i])) return std::string::npos;
    while (true) {
      while (i < src_.size() && IsDigit(src_[i])) ++i;
      if (i + 1 < src_.size() && src_[i] == '_' && IsDigit(src_[i + 1])) {
        ++i;
        continue;
      }
      return i;
    }
  }

  // jinja2's float_re: (?<!\.)D((\.D)?e[+-]?D|\.D), case-insensitive.
  std::optional<size_t> ScanFloat() const {
    if (pos_ > 0 && src_[pos_ - 1] == '.') return std::nullopt;
    const size_t whole = ScanDigits(pos_);
    auto exponent_at = [&](size_t i) -> size_t {
      if (i >= src_.size() || (src_[i] != 'e' && src_[i] != 'E')) return std::string::npos;
      ++i;
      if (i < src_.size() && (src_[i] == '+' || src_[i] == '-')) ++i;
      return ScanDigits(i);
    };
    size_t fraction = std::string::npos;
    if (whole < src_.size() && src_[whole] == '.') fraction = ScanDigits(whole + 1);
    if (fraction != std::string::npos) {
      if (const size_t e = exponent_at(fraction); e != std::string::npos) return e;
    }
    if (const size_t e = exponent_at(whole); e != std::string::npos) return e;
    if (fraction != std::string::npos) return fraction;
    return std::nullopt;
  }

  absl::Status LexNumber() {
    if (const std::optional<size_t> end = ScanFloat(); end.has_value()) {
      std::string text;
      for (size_t i = pos_; i < *end; ++i) {
        if (src_[i] != '_') text.push_back(src_[i]);
      }
      Emit(TokenType::kFloat, text);
      tokens_.back().float_value = std::strtod(text.c_str(), nullptr);
      pos_ = *end;
      return absl::OkStatus();
    }
    // jinja2's integer_re: 0b.., 0o.., 0x.. (case-insensitive), [1-9](_?\d)*, 0(_?0)*.
    int base = 10;
    size_t i = pos_;
    const char prefix = pos_ + 1 < src_.size() ? static_cast<char>(src_[pos_ + 1] | 0x20) : 0;
    auto digit_ok = [&](char ch, int b) {
      const int v = HexValue(ch);
      return v >= 0 && v < b;
    };
    auto scan = [&](size_t from, int b) {
      // (_?digit)+
      size_t j = from;
      while (true) {
        if (j < src_.size() && digit_ok(src_[j], b)) {
          ++j;
        } else if (j + 1 < src_.size() && src_[j] == '_' && digit_ok(src_[j + 1], b)) {
          j += 2;
        } else {
          return j;
        }
      }
    };
    if (src_[pos_] == '0' && (prefix == 'b' || prefix == 'o' || prefix == 'x')) {
      const int b = prefix == 'b' ? 2 : prefix == 'o' ? 8 : 16;
      const size_t end = scan(pos_ + 2, b);
      if (end > pos_ + 2) {
        base = b;
        i = end;
      }
    }
    if (base == 10) {
      if (src_[pos_] == '0') {
        i = pos_ + 1;
        while (true) {  // 0(_?0)*
          if (i < src_.size() && src_[i] == '0') {
            ++i;
          } else if (i + 1 < src_.size() && src_[i] == '_' && src_[i + 1] == '0') {
            i += 2;
          } else {
            break;
          }
        }
      } else {
        i = scan(pos_, 10);
      }
    }
    std::string digits;
    for (size_t k = base == 10 ? pos_ : pos_ + 2; k < i; ++k) {
      if (src_[k] != '_') digits.push_back(src_[k]);
    }
    errno = 0;
    const long long value = std::strtoll(digits.c_str(), nullptr, base);
    if (errno == ERANGE) {
      return absl::FailedPreconditionError(
          AtLine(line_, Cat("integer literal ", src_.substr(pos_, i - pos_),
                            " is beyond int64 (arbitrary-precision integers are unsupported)")));
    }
    Emit(TokenType::kInteger, src_.substr(pos_, i - pos_));
    tokens_.back().int_value = value;
    pos_ = i;
    return absl::OkStatus();
  }

  absl::Status LexString() {
    const char quote = src_[pos_];
    size_t i = pos_ + 1;
    while (i < src_.size() && src_[i] != quote) i += src_[i] == '\\' ? 2 : 1;
    if (i >= src_.size()) return SyntaxError("unterminated string literal");
    const std::string_view body = std::string_view(src_).substr(pos_ + 1, i - pos_ - 1);
    absl::StatusOr<std::string> value = DecodeEscapes(body);
    if (!value.ok()) return value.status();
    Emit(TokenType::kString, *std::move(value));
    line_ += CountNewlines(body);
    pos_ = i + 1;
    return absl::OkStatus();
  }

  // Python's unicode-escape decoding, applied by jinja2 to the literal after encoding its
  // non-ASCII characters with backslashreplace.
  absl::StatusOr<std::string> DecodeEscapes(std::string_view body) const {
    std::string out;
    size_t i = 0;
    while (i < body.size()) {
      if (body[i] != '\\') {
        out.push_back(body[i++]);
        continue;
      }
      const char e = body[i + 1];  // a backslash is always followed by a character here
      i += 2;
      auto code_point = [&](int digits) -> absl::StatusOr<char32_t> {
        char32_t v = 0;
        for (int k = 0; k < digits; ++k) {
          if (i + k >= body.size() || HexValue(body[i + k]) < 0) {
            return absl::InvalidArgumentError(
                AtLine(line_, Cat("truncated \\", std::string(1, e), " escape")));
          }
          v = v * 16 + HexValue(body[i + k]);
        }
        i += digits;
        return v;
      };
      switch (e) {
        case '\n':
          break;  // line continuation
        case '\\':
        case '\'':
        case '"':
          out.push_back(e);
          break;
        case 'a':
          out.push_back('\a');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'v':
          out.push_back('\v');
          break;
        case 'x':
        case 'u':
        case 'U': {
          absl::StatusOr<char32_t> c = code_point(e == 'x' ? 2 : e == 'u' ? 4 : 8);
          if (!c.ok()) return c.status();
          if (*c > 0x10FFFF) {
            return absl::InvalidArgumentError(AtLine(line_, "illegal Unicode character escape"));
          }
          if (*c >= 0xD800 && *c <= 0xDFFF) {
            return absl::FailedPreconditionError(
                AtLine(line_, "surrogate code point escapes are unsupported"));
          }
          AppendUtf8(*c, out);
          break;
        }
        case 'N':
          return absl::FailedPreconditionError(
              AtLine(line_, "\\N{...} escapes in string literals are unsupported"));
        default:
          if (e >= '0' && e <= '7') {
            char32_t v = e - '0';
            for (int k = 0; k < 2 && i < body.size() && body[i] >= '0' && body[i] <= '7'; ++k) {
              v = v * 8 + (body[i++] - '0');
            }
            AppendUtf8(v, out);
          } else if (static_cast<unsigned char>(e) >= 0x80) {
            // backslashreplace turned the character into \xhh, \uhhhh or \Uhhhhhhhh, whose
            // backslash the preceding one escaped: the result is a backslash and that text.
            const size_t start = i - 1;
            size_t end = i;
            while (end < body.size() && (static_cast<unsigned char>(body[end]) & 0xC0) == 0x80) {
              ++end;
            }
            const char32_t c = DecodeUtf8(body.substr(start, end - start))[0];
            char buf[16];
            if (c < 0x100) {
              std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
            } else if (c < 0x10000) {
              std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
            } else {
              std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(c));
            }
            out.append(buf);
            i = end;
          } else {
            out.push_back('\\');  // unknown escapes stay as they are
            out.push_back(e);
          }
      }
    }
    return out;
  }

  absl::Status LexOperator(std::vector<char>& brackets) {
    for (std::string_view op : kOperators) {
      if (!StartsWith(op)) continue;
      if (op == "(" || op == "[" || op == "{") {
        brackets.push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
      } else if (op == ")" || op == "]" || op == "}") {
        if (brackets.empty()) return SyntaxError(Cat("unexpected '", op, "'"));
        if (brackets.back() != op[0]) {
          return SyntaxError(
              Cat("unexpected '", op, "', expected '", std::string(1, brackets.back()), "'"));
        }
        brackets.pop_back();
      }
      Emit(TokenType::kOperator, std::string(op));
      pos_ += op.size();
      return absl::OkStatus();
    }
    const auto b = static_cast<unsigned char>(src_[pos_]);
    if (b >= 0x80) {
      return absl::FailedPreconditionError(AtLine(
          line_, "non-ASCII characters outside string literals (identifiers) are unsupported"));
    }
    return SyntaxError(Cat("unexpected char ", PyStrRepr(std::string(1, src_[pos_]))));
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  // Whether the last thing lexed ended a line (lets lstrip_blocks strip at a line start).
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::string AtLine(int line, std::string_view message) {
  return Cat("chat template line ", line, ": ", message);
}

absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source) {
  return Lexer(NormalizeNewlines(source)).Run();
}

}  // namespace df11::runtime::chat
