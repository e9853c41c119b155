#include "codec/encoder.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "codec/base/status_macros.h"
#include "codec/format.h"
#include "codec/huffman.h"
#include "codec/lut.h"

namespace df11::codec {
namespace {

void AppendLe32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// Packs 5-bit gaps MSB-first, as np.packbits of their binary strings.
std::vector<uint8_t> PackGaps(const std::vector<uint8_t>& gaps) {
  std::vector<uint8_t> out(gaps.size() * format::kGapBits / 8, 0);
  for (size_t t = 0; t < gaps.size(); ++t) {
    const size_t bit = t * format::kGapBits;
    const uint32_t field = uint32_t{gaps[t]} << (16 - format::kGapBits - bit % 8);
    out[bit / 8] |= static_cast<uint8_t>(field >> 8);
    if (bit / 8 + 1 < out.size()) out[bit / 8 + 1] |= static_cast<uint8_t>(field);
  }
  return out;
}

// Appends code words MSB-first and records, before each code, the gap of a chunk and the first
// element of a block the first time a code starts in them (the official `encode`).
class BitstreamWriter {
 public:
  // `max_bytes` bounds the stream: the exact code bits rounded up, plus the tail byte.
  explicit BitstreamWriter(size_t max_bytes) : bytes_(max_bytes + 4) {
    gaps_.reserve(max_bytes / 8 + 1);
    positions_.reserve(max_bytes / format::kBytesPerBlock + 2);
  }

  // Notes that the next code starts at the current bit position, as element `element`.
  void MarkStart(uint64_t element) {
    const uint64_t pos = total_bits_;
    if ((pos >> 6) >= gaps_.size()) gaps_.push_back(static_cast<uint8_t>(pos & 63));
    if ((pos >> 15) >= positions_.size()) positions_.push_back(static_cast<uint32_t>(element));
  }

  void Put(CodeWord w) {
    acc_ = (acc_ << w.length) | w.bits;
    pending_ += w.length;
    total_bits_ += w.length;
    if (pending_ >= 32) {  // pending_ <= 63: 31 left over plus at most 32 new
      pending_ -= 32;
      const uint32_t big_endian = __builtin_bswap32(static_cast<uint32_t>(acc_ >> pending_));
      std::memcpy(bytes_.data() + size_, &big_endian, 4);
      size_ += 4;
    }
  }

  // Flushes whole bytes, then applies the official tail rule: when the stream does not end on a
  // byte boundary, the EOF code is appended and exactly one more byte is emitted.
  void Finish(uint64_t n_elements, CodeWord eof) {
    while (pending_ >= 8) {
      pending_ -= 8;
      bytes_[size_++] = static_cast<uint8_t>(acc_ >> pending_);
    }
    if (pending_ > 0) {
      MarkStart(n_elements);
      const uint64_t acc = ((acc_ & ((uint64_t{1} << pending_) - 1)) << eof.length) | eof.bits;
      const int size = pending_ + eof.length;
      bytes_[size_++] = static_cast<uint8_t>(size >= 8 ? acc >> (size - 8) : acc << (8 - size));
    }
    bytes_.resize(size_);
    positions_.push_back(static_cast<uint32_t>(n_elements));
    // A stream that ends byte-aligned right after a code that crossed into a new block leaves that
    // block without an entry; the official writer then stores only n_blocks entries. df11d always
    // writes n_blocks + 1 (the missing value is n_elements: no code starts in that block).
    const size_t n_blocks = format::NumBlocks(bytes_.size());
    while (positions_.size() < n_blocks + 1) positions_.push_back(static_cast<uint32_t>(n_elements));
    gaps_.resize(n_blocks * format::kThreadsPerBlock, 0);
  }

  std::vector<uint8_t>& bytes() { return bytes_; }
  const std::vector<uint8_t>& gaps() const { return gaps_; }
  const std::vector<uint32_t>& positions() const { return positions_; }

 private:
  std::vector<uint8_t> bytes_;
  std::vector<uint8_t> gaps_;
  std::vector<uint32_t> positions_;
  size_t size_ = 0;  // bytes written to bytes_
  uint64_t acc_ = 0;
  int pending_ = 0;
  uint64_t total_bits_ = 0;
};

}  // namespace

UnitTensors EncodedUnit::tensors() const {
  return {luts, lut_rows, encoded_exponent, sign_mantissa, output_positions, gaps,
          split_positions};
}

uint64_t EncodedUnit::stored_bytes() const {
  return luts.size() + encoded_exponent.size() + sign_mantissa.size() + output_positions.size() +
         gaps.size() + split_positions.size() * sizeof(int64_t);
}

absl::StatusOr<EncodedUnit> EncodeUnit(std::span<const std::span<const uint16_t>> parts) {
  uint64_t n = 0;
  Histogram histogram{};
  EncodedUnit unit;
  for (size_t i = 0; i < parts.size(); ++i) {
    n += parts[i].size();
    if (i + 1 < parts.size()) unit.split_positions.push_back(static_cast<int64_t>(n));
    CountExponents(parts[i], histogram);
  }
  if (n == 0) return absl::InvalidArgumentError("a DF11 unit needs at least one element");
  if (n > format::kMaxUnitElements) {
    return absl::FailedPreconditionError(
        absl::StrCat("a DF11 unit holds fewer than 2^31 elements; this one has ", n));
  }
  absl::StatusOr<HuffmanCode> code = BuildOfficialCode(histogram);
  if (!code.ok()) return absl::FailedPreconditionError(code.status().message());
  DF11_ASSIGN_OR_RETURN(unit.luts, BuildLuts(*code));
  unit.lut_rows = static_cast<int64_t>(unit.luts.size() / format::kLutRowBytes);
  unit.max_code_length = code->max_length();
  unit.limited = code->limited;

  uint64_t total_bits = 0;
  for (int e = 0; e < 256; ++e) total_bits += histogram[e] * code->symbols[e].length;
  BitstreamWriter writer(total_bits / 8 + 2);
  unit.sign_mantissa.resize(n);
  uint8_t* sm = unit.sign_mantissa.data();
  uint64_t element = 0;
  for (std::span<const uint16_t> part : parts) {
    for (uint16_t w : part) {
      writer.MarkStart(element);
      writer.Put(code->symbols[format::Exponent(w)]);
      sm[element++] = format::SignMantissa(w);
    }
  }
  writer.Finish(n, code->eof);
  unit.encoded_exponent = std::move(writer.bytes());
  for (uint32_t p : writer.positions()) AppendLe32(unit.output_positions, p);
  unit.gaps = PackGaps(writer.gaps());
  return unit;
}

}  // namespace df11::codec
