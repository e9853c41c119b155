#include "codec/lut.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "codec/format.h"

namespace df11::codec {
namespace {

// A prefix of `bytes` whole bytes of a code word, as its value.
struct Prefix {
  int bytes;
  uint32_t value;
  bool operator<(const Prefix& o) const {
    return bytes != o.bytes ? bytes < o.bytes : value < o.value;
  }
  bool operator==(const Prefix& o) const = default;
};

Prefix PrefixOf(const CodeWord& w, int bytes) {
  const int drop = w.length - 8 * bytes;
  return {bytes, drop >= 32 ? 0u : w.bits >> drop};
}

// The level (row depth) of a code: the number of whole bytes before its last partial byte.
int LevelOf(const CodeWord& w) { return (w.length - 1) / 8; }

}  // namespace

absl::StatusOr<std::vector<uint8_t>> BuildLuts(const HuffmanCode& code) {
  // Rows: the root, then every symbol's own prefix (official), then any intermediate prefix a
  // pointer needs. Sorting by (length, value) gives the official order: stable sort by length of
  // prefixes registered in code order, which is lexicographic.
  std::vector<Prefix> prefixes = {{0, 0}};
  for (const CodeWord& w : code.symbols) {
    if (w.length == 0) continue;
    for (int level = 1; level <= LevelOf(w); ++level) prefixes.push_back(PrefixOf(w, level));
  }
  std::sort(prefixes.begin(), prefixes.end());
  prefixes.erase(std::unique(prefixes.begin(), prefixes.end()), prefixes.end());
  const int pointer_rows = static_cast<int>(prefixes.size()) - 1;
  if (pointer_rows > format::kMaxPointerRows) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the Huffman code needs ", pointer_rows, " pointer rows in its lookup tables; DF11 allows ",
        format::kMaxPointerRows));
  }
  auto row_of = [&prefixes](const Prefix& p) {
    return static_cast<int>(std::lower_bound(prefixes.begin(), prefixes.end(), p) -
                            prefixes.begin());
  };

  const int n_rows = static_cast<int>(prefixes.size()) + 1;
  std::vector<uint8_t> luts(static_cast<size_t>(n_rows) * format::kLutRowBytes, 0);
  int carried = -1;  // the official fill carries the last value across rows
  for (size_t r = 0; r < prefixes.size(); ++r) {
    const Prefix& p = prefixes[r];
    std::map<int, int> entries;  // key -> value
    for (int s = 0; s < 256; ++s) {
      const CodeWord& w = code.symbols[s];
      if (w.length == 0 || w.length <= 8 * p.bytes || PrefixOf(w, p.bytes).value != p.value) {
        continue;
      }
      const int rest = w.length - 8 * p.bytes;  // bits after the prefix
      if (LevelOf(w) == p.bytes) {
        entries[static_cast<int>((w.bits & ((1u << rest) - 1)) << (8 - rest))] = s;
      } else {
        const uint32_t next = (w.bits >> (rest - 8)) & 0xFF;  // rest <= 32
        entries[static_cast<int>(next)] = 256 - row_of(PrefixOf(w, p.bytes + 1));
      }
    }
    if (carried < 0 && !entries.empty()) carried = entries.begin()->second;
    if (p.bytes == 3 && carried >= format::kFirstPointerValue && !entries.empty()) {
      carried = entries.begin()->second;
    }
    uint8_t* row = &luts[r * format::kLutRowBytes];
    for (int key = 0; key < 256; ++key) {
      auto it = entries.find(key);
      if (it != entries.end()) carried = it->second;
      row[key] = static_cast<uint8_t>(std::max(carried, 0));
    }
  }
  uint8_t* lengths = &luts[(n_rows - 1) * size_t{format::kLutRowBytes}];
  for (int s = 0; s < 256; ++s) lengths[s] = code.symbols[s].length;
  return luts;
}

}  // namespace df11::codec
