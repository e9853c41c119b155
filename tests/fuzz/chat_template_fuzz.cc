// libFuzzer target for the chat-template renderer (daemon/runtime/text/chat/chat_template.h): a chat
// template comes with a downloaded model, so it is untrusted input. The input is the template
// source; it is compiled and, when that succeeds, rendered over a fixed conversation (system,
// user, assistant with a tool call, tool result, user) with tools, with and without the
// generation prompt, under small limits. Properties, each a trap when broken:
// - compiling returns OK, kInvalidArgument, kFailedPrecondition or kResourceExhausted;
// - rendering returns OK, kInvalidArgument, kFailedPrecondition or kResourceExhausted, within the
//   limits (output no longer than max_output_bytes), never reading out of bounds (ASan) or
//   running into undefined behaviour (UBSan), and the output is valid UTF-8.
//
//   cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
//     -DDF11_FUZZ=ON -DDF11_CUDA=OFF && ninja -C build-fuzz chat_template_fuzz
//   mkdir -p /tmp/new && build-fuzz/tests/fuzz/chat_template_fuzz -max_total_time=120 \
//     /tmp/new tests/fuzz/corpus/chat_template
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "daemon/runtime/text/chat/chat_template.h"
#include "nlohmann/json.hpp"

namespace {

bool ExpectedError(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kOk:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kResourceExhausted:
      return true;
    default:
      return false;
  }
}

bool ValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

const nlohmann::ordered_json& Messages() {
  static const auto* messages = new nlohmann::ordered_json(nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris? \u00e9\u4e2d\ud83d\ude00 <b>\"q\"</b>\\"},
    {"role": "assistant", "content": "<think>\nlook it up\n</think>\n\n",
     "tool_calls": [{"type": "function",
                     "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "{\"temp\": 21}"},
    {"role": "user", "content": "Thanks"}
  ])"));
  return *messages;
}

const nlohmann::ordered_json& Extra() {
  static const auto* extra = new nlohmann::ordered_json(nlohmann::ordered_json::parse(R"({
    "tools": [{"type": "function", "function": {"name": "get_weather",
      "description": "Weather of a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                     "required": ["city"]}}}],
    "enable_thinking": false,
    "date_string": "26 Jul 2024"
  })"));
  return *extra;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using df11::runtime::ChatTemplate;
  absl::StatusOr<ChatTemplate> tmpl = ChatTemplate::FromSource(
      std::string(reinterpret_cast<const char*>(data), size), "<s>", "</s>");
  if (!ExpectedError(tmpl.status())) std::abort();
  if (!tmpl.ok()) return 0;
  ChatTemplate::Limits limits;
  limits.max_output_bytes = 1 << 16;
  limits.max_steps = 200'000;
  limits.max_built_bytes = 1 << 22;
  limits.max_list_items = 1 << 12;
  tmpl->set_limits(limits);
  for (const bool generation_prompt : {false, true}) {
    absl::StatusOr<std::string> text = tmpl->Render(Messages(), generation_prompt, Extra());
    if (!ExpectedError(text.status())) std::abort();
    if (text.ok() && (text->size() > limits.max_output_bytes || !ValidUtf8(*text))) std::abort();
  }
  return 0;
}
