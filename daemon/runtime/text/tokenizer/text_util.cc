#include "daemon/runtime/text/tokenizer/text_util.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

namespace df11::runtime::tokenizer_internal {

Utf8Scan ScanUtf8(std::string_view s, size_t i, size_t* len) {
  const auto b = static_cast<uint8_t>(s[i]);
  if (b < 0x80) {
    *len = 1;
    return Utf8Scan::kValid;
  }
  // Well-formed sequences (Unicode 15 table 3-7): the second byte's range depends on the lead.
  int trailing;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    trailing = 1;
  } else if (b >= 0xE0 && b <= 0xEF) {
    trailing = 2;
    if (b == 0xE0) lo = 0xA0;  // no overlongs
    if (b == 0xED) hi = 0x9F;  // no surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    trailing = 3;
    if (b == 0xF0) lo = 0x90;  // no overlongs
    if (b == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    *len = 1;
    return Utf8Scan::kInvalid;
  }
  size_t k = 1;
  for (int t = 0; t < trailing; ++t, ++k) {
    if (i + k >= s.size()) {
      *len = k;
      return Utf8Scan::kTruncated;
    }
    const auto c = static_cast<uint8_t>(s[i + k]);
    if (c < lo || c > hi) {
      *len = k;
      return Utf8Scan::kInvalid;
    }
    lo = 0x80;
    hi = 0xBF;
  }
  *len = k;
  return Utf8Scan::kValid;
}

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    if (ScanUtf8(s, i, &len) != Utf8Scan::kValid) return false;
    i += len;
  }
  return true;
}

void AppendUtf8Lossy(std::string_view bytes, std::string* out) {
  out->reserve(out->size() + bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    size_t len;
    if (ScanUtf8(bytes, i, &len) == Utf8Scan::kValid) {
      out->append(bytes.substr(i, len));
    } else {
      out->append("\xEF\xBF\xBD");  // U+FFFD
    }
    i += len;
  }
}

size_t SettledUtf8Prefix(std::string_view bytes) {
  // A truncated sequence can only be the last thing in the input, and at most 3 bytes long.
  const size_t from = bytes.size() > 3 ? bytes.size() - 3 : 0;
  for (size_t i = from; i < bytes.size(); ++i) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    if (b < 0xC2 || b > 0xF4) continue;  // not a lead byte
    size_t len;
    if (ScanUtf8(bytes, i, &len) == Utf8Scan::kTruncated) return i;
  }
  return bytes.size();
}

char32_t NextCodePoint(std::string_view s, size_t* i) {
  const auto b = static_cast<uint8_t>(s[*i]);
  if (b < 0x80) {
    ++*i;
    return b;
  }
  int trailing = b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : 1;
  char32_t c = b & (0x3F >> trailing);
  ++*i;
  for (int t = 0; t < trailing; ++t, ++*i) c = (c << 6) | (static_cast<uint8_t>(s[*i]) & 0x3F);
  return c;
}

char32_t LastCodePoint(std::string_view s, size_t end, size_t* start) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80) --i;
  *start = i;
  return NextCodePoint(s, &i);
}

void AppendUtf8(char32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string ReplaceAll(std::string_view text, std::string_view pattern, std::string_view content) {
  std::string out;
  size_t pos = text.find(pattern);
  if (pos == std::string_view::npos) return std::string(text);
  out.reserve(text.size() + text.size() / 4);
  size_t done = 0;
  while (pos != std::string_view::npos) {
    out.append(text.substr(done, pos - done));
    out.append(content);
    done = pos + pattern.size();
    pos = text.find(pattern, done);
  }
  out.append(text.substr(done));
  return out;
}

bool IsWhiteSpace(char32_t c) {
  // PropList.txt White_Space (unchanged since Unicode 6.3).
  if (c >= 0x09 && c <= 0x0D) return true;
  switch (c) {
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

bool IsWordChar(char32_t c) {
  if (c < 0x80) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  }
  if (c == 0x200C || c == 0x200D) return true;  // Join_Control
  // So code points with Other_Alphabetic: circled, parenthesized, squared and negative letters.
  if ((c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) ||
      (c >= 0x1F150 && c <= 0x1F169) || (c >= 0x1F170 && c <= 0x1F189)) {
    return true;
  }
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

std::string Nfc(std::string_view s) {
  // Code points below U+0300 are NFC and never combine with what precedes them, so text of
  // bytes < 0xCC only is already NFC (0xCC is the first lead byte at or above U+0300).
  bool trivial = true;
  for (char ch : s) {
    if (static_cast<uint8_t>(ch) >= 0xCC) {
      trivial = false;
      break;
    }
  }
  if (trivial) return std::string(s);
  utf8proc_uint8_t* mapped = nullptr;
  // An explicit length (not UTF8PROC_NULLTERM) keeps embedded NULs.
  const utf8proc_ssize_t n = utf8proc_map(
      reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()),
      &mapped, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(mapped, &std::free);
  // utf8proc fails only on invalid UTF-8 or out of memory; callers pass valid UTF-8.
  if (n < 0) return std::string(s);
  return std::string(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n));
}

const ByteLevelTable& ByteLevel() {
  static const ByteLevelTable* const table = [] {
    auto* t = new ByteLevelTable;
    t->char_to_byte.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool same = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const char32_t c = same ? static_cast<char32_t>(b) : next++;
      AppendUtf8(c, &t->byte_to_utf8[b]);
      t->char_to_byte[c] = static_cast<int16_t>(b);
    }
    return t;
  }();
  return *table;
}

std::string ByteLevelEncode(std::string_view bytes) {
  const ByteLevelTable& table = ByteLevel();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char b : bytes) out += table.byte_to_utf8[static_cast<uint8_t>(b)];
  return out;
}

void ByteLevelDecodeToken(std::string_view token, std::string* out) {
  const ByteLevelTable& table = ByteLevel();
  const size_t mark = out->size();
  size_t i = 0;
  while (i < token.size()) {
    const char32_t c = NextCodePoint(token, &i);
    if (c > ByteLevelTable::kMaxCodePoint || table.char_to_byte[c] < 0) {
      out->resize(mark);
      out->append(token);
      return;
    }
    out->push_back(static_cast<char>(table.char_to_byte[c]));
  }
}

}  // namespace df11::runtime::tokenizer_internal
