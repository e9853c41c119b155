// Internal to df11_tokenizer: UTF-8 scanning, lossy decoding, literal replacement, Unicode
// character classes, NFC and the ByteLevel byte <-> character table. Not a public API;
// tokenizer.h is.
#ifndef DF11_DAEMON_RUNTIME_TEXT_TOKENIZER_TEXT_UTIL_H_
#define DF11_DAEMON_RUNTIME_TEXT_TOKENIZER_TEXT_UTIL_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace df11::runtime::tokenizer_internal {

enum class Utf8Scan {
  kValid,      // a complete, well-formed sequence
  kInvalid,    // a maximal subpart that can never become valid: one U+FFFD
  kTruncated,  // a well-formed prefix cut off by the end of the input
};

// Examines the UTF-8 sequence starting at s[i] (i < s.size()) and sets *len to its length: the
// whole sequence, the maximal invalid subpart (>= 1 byte), or the bytes present of a truncated
// one. "Maximal subpart" is Unicode's recommended practice (Unicode 15 section 3.9, U+FFFD
// substitution), which Rust's String::from_utf8_lossy follows.
Utf8Scan ScanUtf8(std::string_view s, size_t i, size_t* len);

// True if `s` is well-formed UTF-8 (no surrogates, no overlongs, nothing above U+10FFFF).
bool IsValidUtf8(std::string_view s);

// Appends `bytes` decoded as UTF-8 to `out`, each invalid or truncated subpart replaced by one
// U+FFFD, exactly as Rust's String::from_utf8_lossy.
void AppendUtf8Lossy(std::string_view bytes, std::string* out);

// Length of the longest prefix of `bytes` after which only a truncated (but so far well-formed)
// sequence remains, i.e. the bytes whose lossy decoding no further input can change.
size_t SettledUtf8Prefix(std::string_view bytes);

// Decodes the code point at s[*i] of valid UTF-8 `s` and advances *i past it.
char32_t NextCodePoint(std::string_view s, size_t* i);
// Decodes the code point that ends at s[end - 1] of valid UTF-8 `s` (end > 0).
char32_t LastCodePoint(std::string_view s, size_t end, size_t* start);

void AppendUtf8(char32_t c, std::string* out);

// `text` with each leftmost, non-overlapping occurrence of `pattern` (non-empty) replaced by
// `content`: what Oniguruma's find_iter does with an escaped literal, as tokenizers' Replace
// (normalizer and decoder) uses it.
std::string ReplaceAll(std::string_view text, std::string_view pattern, std::string_view content);

// Unicode White_Space (what Rust's regex \s matches).
bool IsWhiteSpace(char32_t c);

// Rust regex \w: Alphabetic, Mark, Decimal_Number, Connector_Punctuation or Join_Control.
// Alphabetic is approximated as the letter categories, Nl and the few So code points with
// Other_Alphabetic (circled and squared Latin letters).
bool IsWordChar(char32_t c);

// Unicode NFC of valid UTF-8 `s` (utf8proc). Text without code points >= U+0300 is copied as is.
std::string Nfc(std::string_view s);

// The ByteLevel alphabet (bytes_char in tokenizers' pre_tokenizers/byte_level.rs): bytes
// 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF map to the code point of the same value, the other 68 to
// U+0100, U+0101, ... in increasing byte order.
struct ByteLevelTable {
  std::array<std::string, 256> byte_to_utf8;  // UTF-8 of the character for each byte
  static constexpr char32_t kMaxCodePoint = 0x143;
  std::array<int16_t, kMaxCodePoint + 1> char_to_byte;  // -1 where no byte maps to it
};
const ByteLevelTable& ByteLevel();

// `bytes` with every byte replaced by its ByteLevel character.
std::string ByteLevelEncode(std::string_view bytes);

// Appends what the ByteLevel decoder makes of one token: its bytes if every character of
// `token` is in the alphabet, else the token's own UTF-8.
void ByteLevelDecodeToken(std::string_view token, std::string* out);

}  // namespace df11::runtime::tokenizer_internal

#endif  // DF11_DAEMON_RUNTIME_TEXT_TOKENIZER_TEXT_UTIL_H_
