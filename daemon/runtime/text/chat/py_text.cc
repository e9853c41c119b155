#include "daemon/runtime/text/chat/py_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "utf8proc.h"

namespace df11::runtime::chat {
namespace {

// Multi-code-point case mappings, generated from CPython 3.11 (Unicode 14.0): every code point c
// with len(chr(c).upper()) > 1 (likewise lower, title). Unused slots are 0.
struct SpecialCase {
  char32_t from;
  char32_t to[3];
};

constexpr SpecialCase kSpecialUpper[] = {
    {0x00DF, {0x0053, 0x0053, 0x0000}}, {0x0149, {0x02BC, 0x004E, 0x0000}},
    {0x01F0, {0x004A, 0x030C, 0x0000}}, {0x0390, {0x0399, 0x0308, 0x0301}},
    {0x03B0, {0x03A5, 0x0308, 0x0301}}, {0x0587, {0x0535, 0x0552, 0x0000}},
    {0x1E96, {0x0048, 0x0331, 0x0000}}, {0x1E97, {0x0054, 0x0308, 0x0000}},
    {0x1E98, {0x0057, 0x030A, 0x0000}}, {0x1E99, {0x0059, 0x030A, 0x0000}},
    {0x1E9A, {0x0041, 0x02BE, 0x0000}}, {0x1F50, {0x03A5, 0x0313, 0x0000}},
    {0x1F52, {0x03A5, 0x0313, 0x0300}}, {0x1F54, {0x03A5, 0x0313, 0x0301}},
    {0x1F56, {0x03A5, 0x0313, 0x0342}}, {0x1F80, {0x1F08, 0x0399, 0x0000}},
    {0x1F81, {0x1F09, 0x0399, 0x0000}}, {0x1F82, {0x1F0A, 0x0399, 0x0000}},
    {0x1F83, {0x1F0B, 0x0399, 0x0000}}, {0x1F84, {0x1F0C, 0x0399, 0x0000}},
    {0x1F85, {0x1F0D, 0x0399, 0x0000}}, {0x1F86, {0x1F0E, 0x0399, 0x0000}},
    {0x1F87, {0x1F0F, 0x0399, 0x0000}}, {0x1F88, {0x1F08, 0x0399, 0x0000}},
    {0x1F89, {0x1F09, 0x0399, 0x0000}}, {0x1F8A, {0x1F0A, 0x0399, 0x0000}},
    {0x1F8B, {0x1F0B, 0x0399, 0x0000}}, {0x1F8C, {0x1F0C, 0x0399, 0x0000}},
    {0x1F8D, {0x1F0D, 0x0399, 0x0000}}, {0x1F8E, {0x1F0E, 0x0399, 0x0000}},
    {0x1F8F, {0x1F0F, 0x0399, 0x0000}}, {0x1F90, {0x1F28, 0x0399, 0x0000}},
    {0x1F91, {0x1F29, 0x0399, 0x0000}}, {0x1F92, {0x1F2A, 0x0399, 0x0000}},
    {0x1F93, {0x1F2B, 0x0399, 0x0000}}, {0x1F94, {0x1F2C, 0x0399, 0x0000}},
    {0x1F95, {0x1F2D, 0x0399, 0x0000}}, {0x1F96, {0x1F2E, 0x0399, 0x0000}},
    {0x1F97, {0x1F2F, 0x0399, 0x0000}}, {0x1F98, {0x1F28, 0x0399, 0x0000}},
    {0x1F99, {0x1F29, 0x0399, 0x0000}}, {0x1F9A, {0x1F2A, 0x0399, 0x0000}},
    {0x1F9B, {0x1F2B, 0x0399, 0x0000}}, {0x1F9C, {0x1F2C, 0x0399, 0x0000}},
    {0x1F9D, {0x1F2D, 0x0399, 0x0000}}, {0x1F9E, {0x1F2E, 0x0399, 0x0000}},
    {0x1F9F, {0x1F2F, 0x0399, 0x0000}}, {0x1FA0, {0x1F68, 0x0399, 0x0000}},
    {0x1FA1, {0x1F69, 0x0399, 0x0000}}, {0x1FA2, {0x1F6A, 0x0399, 0x0000}},
    {0x1FA3, {0x1F6B, 0x0399, 0x0000}}, {0x1FA4, {0x1F6C, 0x0399, 0x0000}},
    {0x1FA5, {0x1F6D, 0x0399, 0x0000}}, {0x1FA6, {0x1F6E, 0x0399, 0x0000}},
    {0x1FA7, {0x1F6F, 0x0399, 0x0000}}, {0x1FA8, {0x1F68, 0x0399, 0x0000}},
    {0x1FA9, {0x1F69, 0x0399, 0x0000}}, {0x1FAA, {0x1F6A, 0x0399, 0x0000}},
    {0x1FAB, {0x1F6B, 0x0399, 0x0000}}, {0x1FAC, {0x1F6C, 0x0399, 0x0000}},
    {0x1FAD, {0x1F6D, 0x0399, 0x0000}}, {0x1FAE, {0x1F6E, 0x0399, 0x0000}},
    {0x1FAF, {0x1F6F, 0x0399, 0x0000}}, {0x1FB2, {0x1FBA, 0x0399, 0x0000}},
    {0x1FB3, {0x0391, 0x0399, 0x0000}}, {0x1FB4, {0x0386, 0x0399, 0x0000}},
    {0x1FB6, {0x0391, 0x0342, 0x0000}}, {0x1FB7, {0x0391, 0x0342, 0x0399}},
    {0x1FBC, {0x0391, 0x0399, 0x0000}}, {0x1FC2, {0x1FCA, 0x0399, 0x0000}},
    {0x1FC3, {0x0397, 0x0399, 0x0000}}, {0x1FC4, {0x0389, 0x0399, 0x0000}},
    {0x1FC6, {0x0397, 0x0342, 0x0000}}, {0x1FC7, {0x0397, 0x0342, 0x0399}},
    {0x1FCC, {0x0397, 0x0399, 0x0000}}, {0x1FD2, {0x0399, 0x0308, 0x0300}},
    {0x1FD3, {0x0399, 0x0308, 0x0301}}, {0x1FD6, {0x0399, 0x0342, 0x0000}},
    {0x1FD7, {0x0399, 0x0308, 0x0342}}, {0x1FE2, {0x03A5, 0x0308, 0x0300}},
    {0x1FE3, {0x03A5, 0x0308, 0x0301}}, {0x1FE4, {0x03A1, 0x0313, 0x0000}},
    {0x1FE6, {0x03A5, 0x0342, 0x0000}}, {0x1FE7, {0x03A5, 0x0308, 0x0342}},
    {0x1FF2, {0x1FFA, 0x0399, 0x0000}}, {0x1FF3, {0x03A9, 0x0399, 0x0000}},
    {0x1FF4, {0x038F, 0x0399, 0x0000}}, {0x1FF6, {0x03A9, 0x0342, 0x0000}},
    {0x1FF7, {0x03A9, 0x0342, 0x0399}}, {0x1FFC, {0x03A9, 0x0399, 0x0000}},
    {0xFB00, {0x0046, 0x0046, 0x0000}}, {0xFB01, {0x0046, 0x0049, 0x0000}},
    {0xFB02, {0x0046, 0x004C, 0x0000}}, {0xFB03, {0x0046, 0x0046, 0x0049}},
    {0xFB04, {0x0046, 0x0046, 0x004C}}, {0xFB05, {0x0053, 0x0054, 0x0000}},
    {0xFB06, {0x0053, 0x0054, 0x0000}}, {0xFB13, {0x0544, 0x0546, 0x0000}},
    {0xFB14, {0x0544, 0x0535, 0x0000}}, {0xFB15, {0x0544, 0x053B, 0x0000}},
    {0xFB16, {0x054E, 0x0546, 0x0000}}, {0xFB17, {0x0544, 0x053D, 0x0000}},
};
constexpr SpecialCase kSpecialLower[] = {
    {0x0130, {0x0069, 0x0307, 0x0000}},
};
constexpr SpecialCase kSpecialTitle[] = {
    {0x00DF, {0x0053, 0x0073, 0x0000}}, {0x0149, {0x02BC, 0x004E, 0x0000}},
    {0x01F0, {0x004A, 0x030C, 0x0000}}, {0x0390, {0x0399, 0x0308, 0x0301}},
    {0x03B0, {0x03A5, 0x0308, 0x0301}}, {0x0587, {0x0535, 0x0582, 0x0000}},
    {0x1E96, {0x0048, 0x0331, 0x0000}}, {0x1E97, {0x0054, 0x0308, 0x0000}},
    {0x1E98, {0x0057, 0x030A, 0x0000}}, {0x1E99, {0x0059, 0x030A, 0x0000}},
    {0x1E9A, {0x0041, 0x02BE, 0x0000}}, {0x1F50, {0x03A5, 0x0313, 0x0000}},
    {0x1F52, {0x03A5, 0x0313, 0x0300}}, {0x1F54, {0x03A5, 0x0313, 0x0301}},
    {0x1F56, {0x03A5, 0x0313, 0x0342}}, {0x1FB2, {0x1FBA, 0x0345, 0x0000}},
    {0x1FB4, {0x0386, 0x0345, 0x0000}}, {0x1FB6, {0x0391, 0x0342, 0x0000}},
    {0x1FB7, {0x0391, 0x0342, 0x0345}}, {0x1FC2, {0x1FCA, 0x0345, 0x0000}},
    {0x1FC4, {0x0389, 0x0345, 0x0000}}, {0x1FC6, {0x0397, 0x0342, 0x0000}},
    {0x1FC7, {0x0397, 0x0342, 0x0345}}, {0x1FD2, {0x0399, 0x0308, 0x0300}},
    {0x1FD3, {0x0399, 0x0308, 0x0301}}, {0x1FD6, {0x0399, 0x0342, 0x0000}},
    {0x1FD7, {0x0399, 0x0308, 0x0342}}, {0x1FE2, {0x03A5, 0x0308, 0x0300}},
    {0x1FE3, {0x03A5, 0x0308, 0x0301}}, {0x1FE4, {0x03A1, 0x0313, 0x0000}},
    {0x1FE6, {0x03A5, 0x0342, 0x0000}}, {0x1FE7, {0x03A5, 0x0308, 0x0342}},
    {0x1FF2, {0x1FFA, 0x0345, 0x0000}}, {0x1FF4, {0x038F, 0x0345, 0x0000}},
    {0x1FF6, {0x03A9, 0x0342, 0x0000}}, {0x1FF7, {0x03A9, 0x0342, 0x0345}},
    {0xFB00, {0x0046, 0x0066, 0x0000}}, {0xFB01, {0x0046, 0x0069, 0x0000}},
    {0xFB02, {0x0046, 0x006C, 0x0000}}, {0xFB03, {0x0046, 0x0066, 0x0069}},
    {0xFB04, {0x0046, 0x0066, 0x006C}}, {0xFB05, {0x0053, 0x0074, 0x0000}},
    {0xFB06, {0x0053, 0x0074, 0x0000}}, {0xFB13, {0x0544, 0x0576, 0x0000}},
    {0xFB14, {0x0544, 0x0565, 0x0000}}, {0xFB15, {0x0544, 0x056B, 0x0000}},
    {0xFB16, {0x054E, 0x0576, 0x0000}}, {0xFB17, {0x0544, 0x056D, 0x0000}},
};

// Unicode's Other_Lowercase / Other_Uppercase (letters and symbols that count as lowercase or
// uppercase without being Ll / Lu), as CPython 3.11 (Unicode 14.0) has them: every c with
// chr(c).islower() (isupper) outside category Ll (Lu).
constexpr char32_t kOtherLowercase[][2] = {
    {0x00AA, 0x00AA},   {0x00BA, 0x00BA},   {0x02B0, 0x02B8},   {0x02C0, 0x02C1},
    {0x02E0, 0x02E4},   {0x0345, 0x0345},   {0x037A, 0x037A},   {0x1D2C, 0x1D6A},
    {0x1D78, 0x1D78},   {0x1D9B, 0x1DBF},   {0x2071, 0x2071},   {0x207F, 0x207F},
    {0x2090, 0x209C},   {0x2170, 0x217F},   {0x24D0, 0x24E9},   {0x2C7C, 0x2C7D},
    {0xA69C, 0xA69D},   {0xA770, 0xA770},   {0xA7F8, 0xA7F9},   {0xAB5C, 0xAB5F},
    {0x10780, 0x10780}, {0x10783, 0x10785}, {0x10787, 0x107B0}, {0x107B2, 0x107BA},
};
constexpr char32_t kOtherUppercase[][2] = {
    {0x2160, 0x216F}, {0x24B6, 0x24CF}, {0x1F130, 0x1F149}, {0x1F150, 0x1F169}, {0x1F170, 0x1F189},
};

template <size_t N>
bool InRanges(const char32_t (&ranges)[N][2], char32_t c) {
  for (const auto& range : ranges) {
    if (c >= range[0] && c <= range[1]) return true;
  }
  return false;
}

template <size_t N>
const SpecialCase* FindSpecial(const SpecialCase (&table)[N], char32_t c) {
  size_t lo = 0, hi = N;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (table[mid].from < c) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < N && table[lo].from == c ? &table[lo] : nullptr;
}

enum class CaseMap { kUpper, kLower, kTitle };

// Appends the full case mapping of `c` (special cases first, then utf8proc's simple mapping).
void AppendCaseMapped(char32_t c, CaseMap map, std::string& out) {
  const SpecialCase* special = nullptr;
  switch (map) {
    case CaseMap::kUpper:
      special = FindSpecial(kSpecialUpper, c);
      break;
    case CaseMap::kLower:
      special = FindSpecial(kSpecialLower, c);
      break;
    case CaseMap::kTitle:
      special = FindSpecial(kSpecialTitle, c);
      break;
  }
  if (special != nullptr) {
    for (char32_t m : special->to) {
      if (m != 0) AppendUtf8(m, out);
    }
    return;
  }
  const auto cp = static_cast<utf8proc_int32_t>(c);
  utf8proc_int32_t mapped = cp;
  switch (map) {
    case CaseMap::kUpper:
      mapped = utf8proc_toupper(cp);
      break;
    case CaseMap::kLower:
      mapped = utf8proc_tolower(cp);
      break;
    case CaseMap::kTitle:
      mapped = utf8proc_totitle(cp);
      break;
  }
  AppendUtf8(static_cast<char32_t>(mapped), out);
}

utf8proc_category_t Category(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

// Unicode's Uppercase, Lowercase and Cased properties (CPython's _PyUnicode_IsUppercase,
// _PyUnicode_IsLowercase, _PyUnicode_IsCased).
bool IsUppercase(char32_t c) {
  return Category(c) == UTF8PROC_CATEGORY_LU || InRanges(kOtherUppercase, c);
}
bool IsLowercase(char32_t c) {
  return Category(c) == UTF8PROC_CATEGORY_LL || InRanges(kOtherLowercase, c);
}
bool IsTitlecase(char32_t c) { return Category(c) == UTF8PROC_CATEGORY_LT; }
bool IsCased(char32_t c) { return IsUppercase(c) || IsLowercase(c) || IsTitlecase(c); }

// Unicode "Case_Ignorable": Mn, Me, Cf, Lm, Sk and the MidLetter / MidNumLet / Single_Quote
// punctuation.
bool IsCaseIgnorable(char32_t c) {
  switch (Category(c)) {
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_SK:
      return true;
    default:
      break;
  }
  // Word_Break MidLetter, MidNumLet and Single_Quote.
  static constexpr char32_t kMidLetter[] = {0x27,   0x2E,   0x3A,   0xB7,   0x387,  0x55F,
                                            0x5F4,  0x2018, 0x2019, 0x2024, 0x2027, 0xFE13,
                                            0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A};
  return std::find(std::begin(kMidLetter), std::end(kMidLetter), c) != std::end(kMidLetter);
}

// CPython's handle_capital_sigma: U+03A3 lowercases to final sigma U+03C2 when preceded by a
// cased letter and not followed by one (case-ignorable characters skipped both ways).
bool IsFinalSigma(const std::u32string& s, size_t i) {
  size_t j = i;
  while (j > 0 && IsCaseIgnorable(s[j - 1])) --j;
  if (j == 0 || !IsCased(s[j - 1])) return false;
  size_t k = i + 1;
  while (k < s.size() && IsCaseIgnorable(s[k])) ++k;
  return k == s.size() || !IsCased(s[k]);
}

void AppendLowerAt(const std::u32string& s, size_t i, std::string& out) {
  if (s[i] == 0x3A3) {
    AppendUtf8(IsFinalSigma(s, i) ? 0x3C2 : 0x3C3, out);
  } else {
    AppendCaseMapped(s[i], CaseMap::kLower, out);
  }
}

bool IsPrintable(char32_t c) {
  if (c < 0x80) return c >= 0x20 && c != 0x7F;
  switch (Category(c)) {
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

void AppendHex(uint32_t v, int digits, std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (int shift = 4 * (digits - 1); shift >= 0; shift -= 4) out.push_back(kHex[(v >> shift) & 15]);
}

// Byte length of the UTF-8 sequence that starts with `lead` (valid input assumed).
size_t SequenceLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  return 4;
}

}  // namespace

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      ++i;
      continue;
    }
    int n;
    char32_t c;
    if ((b & 0xE0) == 0xC0) {
      n = 1;
      c = b & 0x1F;
    } else if ((b & 0xF0) == 0xE0) {
      n = 2;
      c = b & 0x0F;
    } else if ((b & 0xF8) == 0xF0) {
      n = 3;
      c = b & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;  // truncated sequence
    for (int k = 1; k <= n; ++k) {
      const auto t = static_cast<unsigned char>(s[i + k]);
      if ((t & 0xC0) != 0x80) return false;
      c = (c << 6) | (t & 0x3F);
    }
    static constexpr char32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (c < kMin[n] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

std::u32string DecodeUtf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t n = SequenceLength(b);
    char32_t c = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
    for (size_t k = 1; k < n && i + k < s.size(); ++k) {
      c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    }
    out.push_back(c);
    i += n;
  }
  return out;
}

void AppendUtf8(char32_t c, std::string& out) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string EncodeUtf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) AppendUtf8(c, out);
  return out;
}

int64_t CodePointCount(std::string_view s) {
  int64_t n = 0;
  for (char ch : s) n += (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
  return n;
}

bool IsPySpace(char32_t c) {
  // CPython's _PyUnicode_IsWhitespace: bidirectional class WS, B or S, or category Zs.
  static constexpr char32_t kSpaces[] = {
      0x09,   0x0A,   0x0B,   0x0C,   0x0D,   0x1C,   0x1D,   0x1E,   0x1F,   0x20,
      0x85,   0xA0,   0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006,
      0x2007, 0x2008, 0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
  return std::find(std::begin(kSpaces), std::end(kSpaces), c) != std::end(kSpaces);
}

std::string PyStrip(std::string_view s, const std::string* chars, bool left, bool right) {
  const std::u32string text = DecodeUtf8(s);
  const std::u32string set = chars != nullptr ? DecodeUtf8(*chars) : std::u32string();
  auto strip = [&](char32_t c) {
    return chars == nullptr ? IsPySpace(c) : set.find(c) != std::u32string::npos;
  };
  size_t begin = 0, end = text.size();
  if (left) {
    while (begin < end && strip(text[begin])) ++begin;
  }
  if (right) {
    while (end > begin && strip(text[end - 1])) --end;
  }
  return EncodeUtf8(std::u32string_view(text).substr(begin, end - begin));
}

std::vector<std::string> PySplit(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> parts;
  int64_t remaining = maxsplit < 0 ? INT64_MAX : maxsplit;
  if (sep != nullptr) {
    size_t start = 0;
    while (remaining-- > 0) {
      const size_t hit = s.find(*sep, start);
      if (hit == std::string_view::npos) break;
      parts.emplace_back(s.substr(start, hit - start));
      start = hit + sep->size();
    }
    parts.emplace_back(s.substr(start));
    return parts;
  }
  // CPython's split_whitespace.
  const std::u32string text = DecodeUtf8(s);
  size_t i = 0;
  const size_t n = text.size();
  while (remaining-- > 0) {
    while (i < n && IsPySpace(text[i])) ++i;
    if (i == n) break;
    const size_t j = i;
    while (i < n && !IsPySpace(text[i])) ++i;
    parts.push_back(EncodeUtf8(std::u32string_view(text).substr(j, i - j)));
  }
  if (i < n) {
    while (i < n && IsPySpace(text[i])) ++i;
    if (i != n) parts.push_back(EncodeUtf8(std::u32string_view(text).substr(i)));
  }
  return parts;
}

std::string PyReplace(std::string_view s, std::string_view old, std::string_view repl,
                      int64_t count) {
  int64_t remaining = count < 0 ? INT64_MAX : count;
  std::string out;
  if (old.empty()) {
    // "ab".replace("", "-") == "-a-b-": before every code point and at the end.
    size_t i = 0;
    while (i < s.size()) {
      if (remaining-- > 0) out.append(repl);
      const size_t n = SequenceLength(static_cast<unsigned char>(s[i]));
      out.append(s.substr(i, n));
      i += n;
    }
    if (remaining > 0) out.append(repl);
    return out;
  }
  size_t start = 0;
  while (remaining-- > 0) {
    const size_t hit = s.find(old, start);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(start, hit - start));
    out.append(repl);
    start = hit + old.size();
  }
  out.append(s.substr(start));
  return out;
}

std::string PyUpper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : DecodeUtf8(s)) AppendCaseMapped(c, CaseMap::kUpper, out);
  return out;
}

std::string PyLower(std::string_view s) {
  const std::u32string text = DecodeUtf8(s);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < text.size(); ++i) AppendLowerAt(text, i, out);
  return out;
}

std::string PyTitle(std::string_view s) {
  // CPython do_title: a code point after a cased one is lowercased, any other is titlecased.
  const std::u32string text = DecodeUtf8(s);
  std::string out;
  out.reserve(s.size());
  bool previous_is_cased = false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (previous_is_cased) {
      AppendLowerAt(text, i, out);
    } else {
      AppendCaseMapped(text[i], CaseMap::kTitle, out);
    }
    previous_is_cased = IsCased(text[i]);
  }
  return out;
}

std::string PyCapitalize(std::string_view s) {
  // Python >= 3.8: the first code point titlecased, the rest lowercased.
  const std::u32string text = DecodeUtf8(s);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (i == 0) {
      AppendCaseMapped(text[i], CaseMap::kTitle, out);
    } else {
      AppendLowerAt(text, i, out);
    }
  }
  return out;
}

bool PyIsLower(std::string_view s) {
  bool cased = false;
  for (char32_t c : DecodeUtf8(s)) {
    if (IsUppercase(c) || IsTitlecase(c)) return false;
    if (IsLowercase(c)) cased = true;
  }
  return cased;
}

bool PyIsUpper(std::string_view s) {
  bool cased = false;
  for (char32_t c : DecodeUtf8(s)) {
    if (IsLowercase(c) || IsTitlecase(c)) return false;
    if (IsUppercase(c)) cased = true;
  }
  return cased;
}

std::string AsciiDigits(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : DecodeUtf8(s)) {
    if (c >= 0x80 && Category(c) == UTF8PROC_CATEGORY_ND) {
      // Unicode allocates decimal digits in contiguous runs of ten, zero first.
      char32_t start = c;
      while (start > 0 && Category(start - 1) == UTF8PROC_CATEGORY_ND) --start;
      out.push_back(static_cast<char>('0' + (c - start) % 10));
    } else {
      AppendUtf8(c, out);
    }
  }
  return out;
}

std::string PyStrRepr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back(quote);
  for (char32_t c : DecodeUtf8(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\t') {
      out.append("\\t");
    } else if (c == '\n') {
      out.append("\\n");
    } else if (c == '\r') {
      out.append("\\r");
    } else if (IsPrintable(c)) {
      AppendUtf8(c, out);
    } else if (c <= 0xFF) {
      out.append("\\x");
      AppendHex(c, 2, out);
    } else if (c <= 0xFFFF) {
      out.append("\\u");
      AppendHex(c, 4, out);
    } else {
      out.append("\\U");
      AppendHex(c, 8, out);
    }
  }
  out.push_back(quote);
  return out;
}

std::string PyFloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits in scientific form, e.g. "-1.2345e+02".
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  const std::string_view sci(buf, result.ptr - buf);
  const size_t e_pos = sci.find('e');
  std::string_view mantissa = sci.substr(0, e_pos);
  const int exponent = std::atoi(std::string(sci.substr(e_pos + 1)).c_str());
  std::string out;
  if (mantissa.front() == '-') {
    out.push_back('-');
    mantissa.remove_prefix(1);
  }
  std::string digits;
  for (char ch : mantissa) {
    if (ch != '.') digits.push_back(ch);
  }
  // CPython float_repr_style 'short': fixed notation when -4 <= exponent < 16.
  if (exponent >= -4 && exponent < 16) {
    const int point = exponent + 1;  // digits before the decimal point
    if (point <= 0) {
      out.append("0.");
      out.append(static_cast<size_t>(-point), '0');
      out.append(digits);
    } else if (static_cast<size_t>(point) >= digits.size()) {
      out.append(digits);
      out.append(static_cast<size_t>(point) - digits.size(), '0');
      out.append(".0");
    } else {
      out.append(digits.substr(0, point));
      out.push_back('.');
      out.append(digits.substr(point));
    }
    return out;
  }
  out.push_back(digits[0]);
  if (digits.size() > 1) {
    out.push_back('.');
    out.append(digits.substr(1));
  }
  char exp_text[16];
  std::snprintf(exp_text, sizeof(exp_text), "e%c%02d", exponent < 0 ? '-' : '+',
                exponent < 0 ? -exponent : exponent);
  out.append(exp_text);
  return out;
}

void AppendJsonString(std::string_view s, bool ensure_ascii, std::string& out) {
  out.push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      ++i;
      switch (b) {
        case '"':
          out.append("\\\"");
          break;
        case '\\':
          out.append("\\\\");
          break;
        case '\n':
          out.append("\\n");
          break;
        case '\r':
          out.append("\\r");
          break;
        case '\t':
          out.append("\\t");
          break;
        case '\b':
          out.append("\\b");
          break;
        case '\f':
          out.append("\\f");
          break;
        default:
          if (b < 0x20 || (ensure_ascii && b == 0x7F)) {
            out.append("\\u");
            AppendHex(b, 4, out);
          } else {
            out.push_back(static_cast<char>(b));
          }
      }
      continue;
    }
    const size_t n = SequenceLength(b);
    if (!ensure_ascii) {
      out.append(s.substr(i, n));
    } else {
      const char32_t c = DecodeUtf8(s.substr(i, n))[0];
      if (c >= 0x10000) {
        const char32_t v = c - 0x10000;
        out.append("\\u");
        AppendHex(0xD800 | (v >> 10), 4, out);
        out.append("\\u");
        AppendHex(0xDC00 | (v & 0x3FF), 4, out);
      } else {
        out.append("\\u");
        AppendHex(c, 4, out);
      }
    }
    i += n;
  }
  out.push_back('"');
}

}  // namespace df11::runtime::chat
