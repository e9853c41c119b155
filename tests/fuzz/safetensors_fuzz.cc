// libFuzzer target for SafetensorsFile::Parse. Any input must either fail with kDataLoss or yield
// views that lie inside the input and agree with their shapes; an accepted file must survive a
// trip through SafetensorsWriter unchanged. Violations trap.
//
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -I. codec/safetensors.cc \
//     tests/fuzz/safetensors_fuzz.cc <absl libs> -o safetensors_fuzz
//   ./safetensors_fuzz -max_total_time=60 tests/fuzz/corpus/safetensors
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "codec/safetensors.h"

namespace {

using df11::codec::SafetensorsFile;
using df11::codec::SafetensorsWriter;
using df11::codec::TensorView;

void Require(bool condition) {
  if (!condition) __builtin_trap();
}

// Tensors, their bytes and the metadata of `a` and `b` are equal.
bool SameContents(const SafetensorsFile& a, const SafetensorsFile& b) {
  if (a.metadata() != b.metadata() || a.tensors().size() != b.tensors().size()) return false;
  for (const TensorView& t : a.tensors()) {
    const TensorView* u = b.Find(t.name);
    if (u == nullptr || u->dtype != t.dtype || u->shape != t.shape ||
        u->data.size() != t.data.size()) {
      return false;
    }
    for (size_t i = 0; i < t.data.size(); ++i) {
      if (t.data[i] != u->data[i]) return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> bytes = std::as_bytes(std::span<const uint8_t>(data, size));
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Parse(bytes, "fuzz-input");
  if (!file.ok()) {
    Require(file.status().code() == absl::StatusCode::kDataLoss);
    return 0;
  }
  Require(file->file_size() == size);

  // Touch every byte of every view; each must lie inside the input and match its shape.
  volatile uint8_t sink = 0;
  uint64_t total = 0;
  for (const TensorView& t : file->tensors()) {
    Require(file->Find(t.name) == &t);
    Require(t.num_elements() >= 0);
    Require(static_cast<uint64_t>(t.num_elements()) * df11::codec::DTypeSize(t.dtype) ==
            t.data.size());
    if (!t.data.empty()) {
      Require(t.data.data() >= bytes.data() &&
              t.data.data() + t.data.size() <= bytes.data() + bytes.size());
    }
    for (std::byte b : t.data) sink = sink ^ static_cast<uint8_t>(b);
    total += t.data.size();
  }
  Require(total <= size);

  // Write the parsed tensors back and read them again.
  SafetensorsWriter writer;
  for (const TensorView& t : file->tensors()) {
    Require(writer.Add(t.name, t.dtype, t.shape, t.data).ok());
  }
  writer.SetMetadata(file->metadata());
  const std::string rewritten = writer.Serialize();
  Require(rewritten.size() == writer.SerializedSize());
  absl::StatusOr<SafetensorsFile> reparsed = SafetensorsFile::Parse(
      std::as_bytes(std::span<const char>(rewritten.data(), rewritten.size())), "rewritten");
  Require(reparsed.ok());
  Require(SameContents(*file, *reparsed));
  return 0;
}
