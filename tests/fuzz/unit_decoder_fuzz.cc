// libFuzzer target for Unit::Validate, DecodeReference and DecodeParallel. The input is a tiny
// container of the six tensors of a DF11 unit (layout below). Properties, each a trap when broken:
// - Validate returns OK or kDataLoss, and never reads outside the tensors (ASan);
// - on a valid unit, each decoder returns OK or kDataLoss and stays inside the tensors and the
//   output span;
// - the parallel decoder accepts everything the reference accepts (it checks a subset), and when
//   both succeed their outputs are identical;
// - a decoded value never has an exponent >= 240 and keeps its sign and mantissa byte.
//
// Input layout (little-endian):
//   u16 luts_len  u16 stream_len  u32 n_elements  u16 positions_len  u16 gaps_len  u8 n_splits
//   then luts_len bytes of luts (lut_rows = luts_len / 256), stream_len bytes of
//   encoded_exponent, positions_len bytes of output_positions, gaps_len bytes of gaps and
//   8 * n_splits bytes of split_positions (int64). A field that runs past the end of the input is
//   cut short. sign_mantissa is not in the input: it is n_elements bytes of a fixed pattern (the
//   decoders only copy it), n_elements capped at 2^17 so that every run is fast.
//
//   cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
//     -DDF11_FUZZ=ON -DDF11_CUDA=OFF && ninja -C build-fuzz unit_decoder_fuzz
//   mkdir -p /tmp/new && build-fuzz/tests/fuzz/unit_decoder_fuzz -max_total_time=120 \
//     /tmp/new tests/fuzz/corpus/unit_decoder
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codec/decoder.h"
#include "codec/format.h"
#include "codec/unit.h"

namespace {

using df11::codec::DecodeParallel;
using df11::codec::DecodeReference;
using df11::codec::Unit;
using df11::codec::UnitTensors;

constexpr size_t kHeaderBytes = 13;
constexpr uint32_t kMaxElements = 1u << 17;

void Require(bool condition) {
  if (!condition) __builtin_trap();
}

bool OkOrDataLoss(const absl::Status& s) {
  return s.ok() || s.code() == absl::StatusCode::kDataLoss;
}

// Reads the input front to back; a read past the end yields what is left.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint32_t Le(int bytes) {
    uint32_t v = 0;
    for (int i = 0; i < bytes; ++i) {
      v |= uint32_t{pos_ < size_ ? data_[pos_++] : uint8_t{0}} << (8 * i);
    }
    return v;
  }
  // Each tensor gets its own exact-size heap copy, so that ASan sees any read past its end.
  std::vector<uint8_t> Bytes(size_t n) {
    n = std::min(n, size_ - pos_);
    std::vector<uint8_t> v(data_ + pos_, data_ + pos_ + n);
    pos_ += n;
    return v;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < kHeaderBytes) return 0;
  Reader in(data, size);
  const uint32_t luts_len = in.Le(2);
  const uint32_t stream_len = in.Le(2);
  const uint32_t n_elements = std::min(in.Le(4), kMaxElements);
  const uint32_t positions_len = in.Le(2);
  const uint32_t gaps_len = in.Le(2);
  const uint32_t n_splits = in.Le(1);

  const std::vector<uint8_t> luts = in.Bytes(luts_len);
  const std::vector<uint8_t> stream = in.Bytes(stream_len);
  const std::vector<uint8_t> positions = in.Bytes(positions_len);
  const std::vector<uint8_t> gaps = in.Bytes(gaps_len);
  const std::vector<uint8_t> split_bytes = in.Bytes(8 * size_t{n_splits});
  std::vector<int64_t> splits(split_bytes.size() / 8);
  if (!splits.empty()) std::memcpy(splits.data(), split_bytes.data(), 8 * splits.size());
  std::vector<uint8_t> sign_mantissa(n_elements);
  for (uint32_t i = 0; i < n_elements; ++i) sign_mantissa[i] = static_cast<uint8_t>(i * 167 + 13);

  UnitTensors t;
  t.luts = luts;
  t.lut_rows = static_cast<int64_t>(luts.size() / 256);
  t.encoded_exponent = stream;
  t.sign_mantissa = sign_mantissa;
  t.output_positions = positions;
  t.gaps = gaps;
  t.split_positions = splits;

  absl::StatusOr<Unit> unit = Unit::Validate(t, "fuzz");
  Require(OkOrDataLoss(unit.status()));
  if (!unit.ok()) return 0;
  Require(unit->num_elements() == n_elements);

  std::vector<uint16_t> reference(n_elements, 0);
  std::vector<uint16_t> parallel(n_elements, 0);
  const absl::Status r = DecodeReference(*unit, reference);
  const absl::Status p = DecodeParallel(*unit, parallel, nullptr);
  Require(OkOrDataLoss(r));
  Require(OkOrDataLoss(p));
  if (r.ok()) Require(p.ok());
  if (r.ok() && p.ok()) Require(reference == parallel);
  if (r.ok()) {
    // Values >= 240 in the tables are pointers, never exponents; sign and mantissa pass through.
    for (uint32_t i = 0; i < n_elements; ++i) {
      Require(df11::format::Exponent(reference[i]) < df11::format::kFirstPointerValue);
      Require(df11::format::SignMantissa(reference[i]) == sign_mantissa[i]);
    }
  }
  return 0;
}
