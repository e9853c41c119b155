// Internal to df11_tokenizer: finding added tokens in text, as tokenizers'
// tokenizer/added_vocabulary.rs `find_matches` does. Not a public API; tokenizer.h is.
#ifndef DF11_DAEMON_RUNTIME_TEXT_TOKENIZER_ADDED_VOCABULARY_H_
#define DF11_DAEMON_RUNTIME_TEXT_TOKENIZER_ADDED_VOCABULARY_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace df11::runtime::tokenizer_internal {

// One entry of tokenizer.json "added_tokens".
struct AddedToken {
  int32_t id = 0;
  std::string content;
  std::string pattern;  // what is matched: content, or its normalized form if `normalized`
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

// A piece of text after added-token extraction: [begin, end) of the searched text, and the
// token it is (token >= 0, an index into the tokens given to AddedTokenMatcher::Add) or -1 for
// text that continues down the pipeline.
struct AddedSplit {
  size_t begin;
  size_t end;
  int32_t token;
};

// A set of patterns matched leftmost-longest and non-overlapping (daachorse's
// MatchKind::LeftmostLongest): at the leftmost position where any pattern matches, the longest
// one wins, and the search resumes at its end.
class AddedTokenMatcher {
 public:
  // Adds `pattern` (non-empty) for token `index`. A pattern added twice keeps the last index.
  void Add(std::string_view pattern, int32_t index);

  bool empty() const { return nodes_.size() <= 1; }

  // Splits `text` (valid UTF-8) into added tokens and the text between them, applying each
  // token's flags (`tokens` indexed by the values given to Add):
  //   single_word: a match with a word character (Rust regex \w) just before or after it is
  //     discarded (its text stays in the gap; the search still resumes after it);
  //   lstrip: the whitespace before the match joins the token, but not text an earlier token
  //     already took; rstrip: the whitespace after it joins the token.
  // Empty text yields nothing. Deterministic and thread-safe.
  std::vector<AddedSplit> Split(std::string_view text, const std::vector<AddedToken>& tokens) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
    int32_t token = -1;
  };
  int32_t Child(int32_t node, uint8_t byte) const;

  std::vector<Node> nodes_{Node{}};
  std::array<bool, 256> first_byte_{};  // bytes that start some pattern
};

}  // namespace df11::runtime::tokenizer_internal

#endif  // DF11_DAEMON_RUNTIME_TEXT_TOKENIZER_ADDED_VOCABULARY_H_
