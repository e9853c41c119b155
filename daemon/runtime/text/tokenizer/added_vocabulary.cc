#include "daemon/runtime/text/tokenizer/added_vocabulary.h"

#include <algorithm>

#include "daemon/runtime/text/tokenizer/text_util.h"

namespace df11::runtime::tokenizer_internal {

int32_t AddedTokenMatcher::Child(int32_t node, uint8_t byte) const {
  const auto& children = nodes_[node].children;
  auto it =
      std::lower_bound(children.begin(), children.end(), byte,
                       [](const std::pair<uint8_t, int32_t>& c, uint8_t b) { return c.first < b; });
  return it != children.end() && it->first == byte ? it->second : -1;
}

void AddedTokenMatcher::Add(std::string_view pattern, int32_t index) {
  if (pattern.empty()) return;
  first_byte_[static_cast<uint8_t>(pattern[0])] = true;
  int32_t node = 0;
  for (char ch : pattern) {
    const auto byte = static_cast<uint8_t>(ch);
    int32_t next = Child(node, byte);
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_.push_back(Node{});
      auto& children = nodes_[node].children;
      children.insert(
          std::upper_bound(children.begin(), children.end(), std::make_pair(byte, -1),
                           [](const auto& a, const auto& b) { return a.first < b.first; }),
          {byte, next});
    }
    node = next;
  }
  nodes_[node].token = index;
}

namespace {

// Rust regex `\w$` on text[..end].
bool EndsWithWord(std::string_view text, size_t end) {
  if (end == 0) return false;
  size_t start;
  return IsWordChar(LastCodePoint(text, end, &start));
}

// Rust regex `^\w` on text[begin..].
bool StartsWithWord(std::string_view text, size_t begin) {
  if (begin >= text.size()) return false;
  return IsWordChar(NextCodePoint(text, &begin));
}

// Start of the match of `\s*$` in text[..end]: where its trailing whitespace begins.
size_t TrailingSpaceStart(std::string_view text, size_t end) {
  while (end > 0) {
    size_t start;
    if (!IsWhiteSpace(LastCodePoint(text, end, &start))) break;
    end = start;
  }
  return end;
}

// End of the match of `^\s*` in text[begin..].
size_t LeadingSpaceEnd(std::string_view text, size_t begin) {
  while (begin < text.size()) {
    size_t next = begin;
    if (!IsWhiteSpace(NextCodePoint(text, &next))) break;
    begin = next;
  }
  return begin;
}

}  // namespace

std::vector<AddedSplit> AddedTokenMatcher::Split(std::string_view text,
                                                 const std::vector<AddedToken>& tokens) const {
  std::vector<AddedSplit> splits;
  if (text.empty()) return splits;
  size_t start_offset = 0;  // end of the last token taken
  size_t pos = 0;           // where the leftmost-longest search resumes
  while (pos < text.size() && !empty()) {
    // Leftmost position where a pattern matches, longest pattern there.
    size_t match_begin = text.size(), match_end = 0;
    int32_t token = -1;
    for (size_t i = pos; i < text.size() && token < 0; ++i) {
      if (!first_byte_[static_cast<uint8_t>(text[i])]) continue;
      int32_t node = 0;
      for (size_t j = i; j < text.size(); ++j) {
        node = Child(node, static_cast<uint8_t>(text[j]));
        if (node < 0) break;
        if (nodes_[node].token >= 0) {
          token = nodes_[node].token;
          match_begin = i;
          match_end = j + 1;
        }
      }
    }
    if (token < 0) break;
    pos = match_end;
    const AddedToken& added = tokens[token];
    size_t begin = match_begin, end = match_end;
    if (added.single_word) {
      const bool space_before = begin == 0 || !EndsWithWord(text, begin);
      const bool space_after = end == text.size() || !StartsWithWord(text, end);
      if (!space_before || !space_after) continue;
    }
    if (added.lstrip) begin = std::max(TrailingSpaceStart(text, begin), start_offset);
    if (added.rstrip) end = LeadingSpaceEnd(text, end);
    if (start_offset < begin) splits.push_back(AddedSplit{start_offset, begin, -1});
    splits.push_back(AddedSplit{begin, end, token});
    start_offset = end;
  }
  if (start_offset != text.size()) splits.push_back(AddedSplit{start_offset, text.size(), -1});
  return splits;
}

}  // namespace df11::runtime::tokenizer_internal
