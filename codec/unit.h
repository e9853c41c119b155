// A DF11 unit: the six tensors that hold one module's compressed weights, and their validation.
//
//   UnitTensors t = ...;                      // spans over U.luts, U.encoded_exponent, ...
//   DF11_ASSIGN_OR_RETURN(Unit unit, Unit::Validate(t, "model.layers.0"));
//   std::vector<uint16_t> out(unit.num_elements());
//   DF11_RETURN_IF_ERROR(DecodeParallel(unit, out, pool));
#ifndef DF11_CODEC_UNIT_H_
#define DF11_CODEC_UNIT_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace df11::codec {

// Raw bytes of the six tensors of a unit, as stored (official layout). Spans are borrowed.
struct UnitTensors {
  std::span<const uint8_t> luts;  // n_luts * 256 bytes
  int64_t lut_rows = 0;           // luts.shape[0]
  std::span<const uint8_t> encoded_exponent;
  std::span<const uint8_t> sign_mantissa;
  std::span<const uint8_t> output_positions;  // little-endian u32 values
  std::span<const uint8_t> gaps;              // 5-bit fields, MSB-first
  std::span<const int64_t> split_positions;
};

// A unit whose metadata passed every structural check of codec/FORMAT.md ("Invariants"). It keeps
// the spans of UnitTensors (the caller keeps their storage alive) and owns the decoded metadata.
// The bitstream itself is checked while decoding. Immutable and thread-safe once built.
class Unit {
 public:
  // kDataLoss naming `name` and the numbers for every violated invariant: LUT shape and row count,
  // a decode-row pointer to a row outside [1, n_luts - 2], lengths > 32 or set for values >= 240,
  // n_bytes outside [ceil(n_elements / 8), 4 n_elements + 1], gaps length != 320 n_blocks,
  // output_positions length not 4 (n_blocks + 1) or 4 n_blocks, P[0] != 0, decreasing positions,
  // a block with more than 32768 elements, last position != n_elements, a nonzero gap of chunk 0,
  // split positions not
  // strictly increasing inside (0, n_elements).
  static absl::StatusOr<Unit> Validate(const UnitTensors& tensors, std::string name);

  const std::string& name() const { return name_; }
  size_t num_elements() const { return tensors_.sign_mantissa.size(); }
  size_t num_bytes() const { return tensors_.encoded_exponent.size(); }
  size_t num_blocks() const { return positions_.size() - 1; }
  int lut_rows() const { return static_cast<int>(tensors_.lut_rows); }
  const UnitTensors& tensors() const { return tensors_; }

  // P[0..n_blocks]: P[b] is the first element decoded by block b; P[n_blocks] == num_elements().
  std::span<const uint32_t> positions() const { return positions_; }
  // The 5-bit gap of chunk t (t < 512 n_blocks): bit offset of the first code starting in it.
  int gap(size_t chunk) const;
  // Decode row r (r < lut_rows() - 1) and the code-length row.
  const uint8_t* lut_row(int r) const { return tensors_.luts.data() + size_t{256} * r; }
  const uint8_t* code_lengths() const { return lut_row(lut_rows() - 1); }
  // Split points between the concatenated weights ([] for one weight).
  std::span<const int64_t> split_positions() const { return tensors_.split_positions; }

 private:
  Unit() = default;
  std::string name_;
  UnitTensors tensors_;
  std::vector<uint32_t> positions_;
};

}  // namespace df11::codec

#endif  // DF11_CODEC_UNIT_H_
