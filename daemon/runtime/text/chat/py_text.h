// Python `str` semantics over UTF-8, for the chat-template interpreter. Jinja runs on Python, so
// every string operation a template performs (len, slicing, strip, split, upper, repr, json.dumps
// of a string, float formatting) must give CPython 3.11's answer. Strings are UTF-8 and are
// checked for validity where they enter the interpreter (template source, JSON inputs), so these
// helpers may assume valid UTF-8 and work per code point, as Python does.
//
// Case mapping uses utf8proc's simple mappings plus CPython's multi-character special cases
// (SpecialCasing.txt, e.g. "ß".upper() == "SS") and its final-sigma rule for lower(); the
// Other_Lowercase / Other_Uppercase tables are CPython 3.11's. Checked against CPython 3.11 for
// every code point: upper, lower, title, capitalize, strip, isupper / islower and repr agree on
// all characters Unicode 14.0 (CPython 3.11's version) assigns. Characters added since differ
// where utf8proc's newer tables know them: repr prints them as is (CPython escapes unassigned
// code points) and their case properties follow utf8proc.
#ifndef DF11_DAEMON_RUNTIME_TEXT_CHAT_PY_TEXT_H_
#define DF11_DAEMON_RUNTIME_TEXT_CHAT_PY_TEXT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace df11::runtime::chat {

// True if `s` is well-formed UTF-8 (no surrogates, no overlong forms, at most U+10FFFF).
bool IsValidUtf8(std::string_view s);

// Code points of valid UTF-8 `s`.
std::u32string DecodeUtf8(std::string_view s);
void AppendUtf8(char32_t c, std::string& out);
std::string EncodeUtf8(std::u32string_view s);

// len(s) in Python: the number of code points.
int64_t CodePointCount(std::string_view s);

// str.isspace() for one code point; also what Python's `re` matches with \s in a str pattern.
bool IsPySpace(char32_t c);

// str.strip/lstrip/rstrip. `chars` null strips whitespace, otherwise every code point in *chars.
std::string PyStrip(std::string_view s, const std::string* chars, bool left, bool right);

// str.split(sep, maxsplit); `sep` null splits on runs of whitespace. `*sep` must not be empty
// (Python raises ValueError; the caller reports it). maxsplit < 0 means no limit.
std::vector<std::string> PySplit(std::string_view s, const std::string* sep, int64_t maxsplit);

// str.replace(old, new, count); count < 0 replaces every occurrence. An empty `old` inserts
// `repl` around every code point, as Python does.
std::string PyReplace(std::string_view s, std::string_view old, std::string_view repl,
                      int64_t count);

// str.upper(), str.lower(), str.title(), str.capitalize().
std::string PyUpper(std::string_view s);
std::string PyLower(std::string_view s);
std::string PyTitle(std::string_view s);
std::string PyCapitalize(std::string_view s);

// str.islower() / str.isupper(): at least one cased character and none of the other case.
bool PyIsLower(std::string_view s);
bool PyIsUpper(std::string_view s);

// `s` with every Unicode decimal digit (category Nd, e.g. U+0663 ARABIC-INDIC DIGIT THREE)
// replaced by its ASCII digit, which is how Python's int() and float() read them.
std::string AsciiDigits(std::string_view s);

// repr(s): quoted with ' (or " when s holds ' but no "), with Python's escapes for backslash,
// the quote, \t \n \r, other control characters and non-printable code points.
std::string PyStrRepr(std::string_view s);

// repr(d) for a float: the shortest string that round-trips, in fixed notation when the decimal
// exponent is in [-4, 16) ("0.0001", "1e-05", "1e+16", "1.0"), and "inf", "-inf", "nan".
std::string PyFloatRepr(double d);

// Appends `s` as a JSON string literal the way Python's json.dumps does: escapes ", \ and the
// control characters below U+0020 (\n \r \t \b \f by name, others as \u00xx); with
// `ensure_ascii` also every code point outside U+0020..U+007E, as \uxxxx (surrogate pairs above
// U+FFFF).
void AppendJsonString(std::string_view s, bool ensure_ascii, std::string& out);

}  // namespace df11::runtime::chat

#endif  // DF11_DAEMON_RUNTIME_TEXT_CHAT_PY_TEXT_H_
