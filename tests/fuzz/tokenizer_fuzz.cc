// libFuzzer target for the tokenizer (daemon/runtime/text/tokenizer/tokenizer.h): a tokenizer.json comes
// with a downloaded model and prompts come from clients, so both are untrusted. The first byte
// picks what the rest is:
// - 0: a tokenizer.json. FromJson returns OK, kInvalidArgument or kFailedPrecondition; a tokenizer
//   it accepts encodes and decodes a fixed text.
// - 1: a prompt for the demo model's tokenizer. Encode returns OK or kInvalidArgument (not UTF-8);
//   every id is below vocab_size; decoding is valid UTF-8, and encoding that text again and
//   decoding it gives it back (a fixed point after one round).
// - 2: token ids (4 bytes each, any value). Decode is valid UTF-8 and equals what the incremental
//   decoder streams, with and without special tokens.
// Anything else traps (abort), as does any out-of-bounds read (ASan) or undefined behaviour
// (UBSan).
//
//   mkdir -p /tmp/new && build-fuzz/tests/fuzz/tokenizer_fuzz -max_total_time=120 \
//     /tmp/new tests/fuzz/corpus/tokenizer
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "daemon/runtime/text/tokenizer/text_util.h"
#include "daemon/runtime/text/tokenizer/tokenizer.h"

namespace {

using df11::runtime::IncrementalDecoder;
using df11::runtime::Tokenizer;

const Tokenizer& Demo() {
  static const Tokenizer* demo = [] {
    absl::StatusOr<Tokenizer> t =
        Tokenizer::FromFile(std::string(DF11_SOURCE_DIR) + "/models/demo/tokenizer.json");
    if (!t.ok()) std::abort();
    return new Tokenizer(*std::move(t));
  }();
  return *demo;
}

void Check(bool ok) {
  if (!ok) std::abort();
}

void FuzzJson(const std::string& text) {
  absl::StatusOr<Tokenizer> t = Tokenizer::FromJson(text);
  if (!t.ok()) {
    Check(t.status().code() == absl::StatusCode::kInvalidArgument ||
          t.status().code() == absl::StatusCode::kFailedPrecondition);
    return;
  }
  absl::StatusOr<std::vector<int32_t>> ids = t->Encode("Hello, world! 123 <|x|>", true);
  if (ids.ok()) Check(df11::runtime::tokenizer_internal::IsValidUtf8(t->Decode(*ids, false)));
}

void FuzzText(const std::string& text) {
  const Tokenizer& t = Demo();
  absl::StatusOr<std::vector<int32_t>> ids = t.Encode(text, /*add_special_tokens=*/false);
  if (!ids.ok()) {
    Check(ids.status().code() == absl::StatusCode::kInvalidArgument &&
          !df11::runtime::tokenizer_internal::IsValidUtf8(text));
    return;
  }
  for (int32_t id : *ids) Check(id >= 0 && id < t.vocab_size());
  const std::string decoded = t.Decode(*ids, false);
  Check(df11::runtime::tokenizer_internal::IsValidUtf8(decoded));
  absl::StatusOr<std::vector<int32_t>> again = t.Encode(decoded, false);
  Check(again.ok());
  Check(t.Decode(*again, false) == decoded);
}

void FuzzIds(const std::string& bytes) {
  const Tokenizer& t = Demo();
  std::vector<int32_t> ids(bytes.size() / 4);
  if (!ids.empty()) std::memcpy(ids.data(), bytes.data(), ids.size() * 4);
  for (bool skip : {false, true}) {
    const std::string text = t.Decode(ids, skip);
    Check(df11::runtime::tokenizer_internal::IsValidUtf8(text));
    IncrementalDecoder stream(t, skip);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.Feed(id);
    streamed += stream.Finish();
    Check(streamed == text);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      FuzzJson(rest);
      break;
    case 1:
      FuzzText(rest);
      break;
    default:
      FuzzIds(rest);
      break;
  }
  return 0;
}
