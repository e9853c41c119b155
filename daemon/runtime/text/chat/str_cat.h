// Cat(): absl::StrCat that also accepts std::string_view. Debian's Abseil is built with its own
// absl::string_view type (ABSL_OPTION_USE_STD_STRING_VIEW 0), which StrCat's AlphaNum takes but
// std::string_view does not convert to.
#ifndef DF11_DAEMON_RUNTIME_TEXT_CHAT_STR_CAT_H_
#define DF11_DAEMON_RUNTIME_TEXT_CHAT_STR_CAT_H_

#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace df11::runtime::chat {

inline absl::string_view ToAbsl(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}
inline std::string_view ToStd(absl::string_view s) { return std::string_view(s.data(), s.size()); }

namespace internal_cat {
inline absl::string_view Piece(std::string_view s) { return ToAbsl(s); }
template <typename T>
const T& Piece(const T& v) {
  return v;
}
}  // namespace internal_cat

template <typename... Args>
std::string Cat(const Args&... args) {
  return absl::StrCat(internal_cat::Piece(args)...);
}

}  // namespace df11::runtime::chat

#endif  // DF11_DAEMON_RUNTIME_TEXT_CHAT_STR_CAT_H_
