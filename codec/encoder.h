// DF11 unit encoder: BF16 weights -> the six tensors of a unit, in the official layout.
//
//   std::vector<std::span<const uint16_t>> parts = {q, k, v};   // raw BF16 bit patterns
//   DF11_ASSIGN_OR_RETURN(EncodedUnit unit, EncodeUnit(parts));
//   DF11_ASSIGN_OR_RETURN(Unit checked, Unit::Validate(unit.tensors(), "model.layers.0"));
#ifndef DF11_CODEC_ENCODER_H_
#define DF11_CODEC_ENCODER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "codec/unit.h"

namespace df11::codec {

// The six tensors of an encoded unit, owned.
struct EncodedUnit {
  std::vector<uint8_t> luts;  // lut_rows x 256
  int64_t lut_rows = 0;
  std::vector<uint8_t> encoded_exponent;
  std::vector<uint8_t> sign_mantissa;
  std::vector<uint8_t> output_positions;  // (n_blocks + 1) little-endian u32
  std::vector<uint8_t> gaps;              // 320 bytes per block
  std::vector<int64_t> split_positions;   // cumulative sizes of the parts but the last
  int max_code_length = 0;
  bool limited = false;  // the 32-bit limiter changed the Huffman code

  // Borrowed views of the tensors above, valid while this object lives unchanged.
  UnitTensors tensors() const;
  // Stored bytes of the six tensors (split_positions counted at 8 bytes each).
  uint64_t stored_bytes() const;
};

// Encodes the concatenation of `parts` (each a weight flattened row-major) as one unit, with the
// official Huffman code, LUTs, bitstream tail rule, gaps and output positions; the output is
// byte-identical to the official compressor's wherever the official limiter has no ties.
// Single-threaded; holds one copy of the exponents.
//
// Errors: kInvalidArgument for no elements; kFailedPrecondition when the unit cannot be DF11-coded
// (2^31 elements or more, exponents 240..255 from |x| >= 2^113, Inf or NaN, or more than 16
// pointer rows of LUTs): keep such a unit in BF16.
absl::StatusOr<EncodedUnit> EncodeUnit(std::span<const std::span<const uint16_t>> parts);

}  // namespace df11::codec

#endif  // DF11_CODEC_ENCODER_H_
