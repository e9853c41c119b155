// CPU decoders of DF11 units: the sequential reference and a block-parallel, multi-threaded one.
// Both produce the same bits on every input; the reference checks every gap and position of the
// unit, the parallel decoder every one it reads (block starts, per-block counts). Both return
// kDataLoss on corrupt input and never read outside the unit's tensors.
//
//   DF11_ASSIGN_OR_RETURN(Unit unit, Unit::Validate(tensors, name));
//   std::vector<uint16_t> bf16(unit.num_elements());
//   DF11_RETURN_IF_ERROR(DecodeParallel(unit, bf16, &pool));
#ifndef DF11_CODEC_DECODER_H_
#define DF11_CODEC_DECODER_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "absl/status/status.h"
#include "codec/thread_pool.h"
#include "codec/unit.h"

namespace df11::codec {

// Decodes `unit` symbol by symbol from bit 0 through the LUT walk of codec/FORMAT.md, checking on
// the way that every chunk's gap and every block's first element match the stream, and that the
// stream ends exactly at its last byte. `out` must hold unit.num_elements() values (else
// kInvalidArgument). Single-threaded; the bit-exact reference for every other decoder.
absl::Status DecodeReference(const Unit& unit, std::span<uint16_t> out);

// Decodes `unit` block by block from the block start positions (gaps and output_positions),
// several symbols per table lookup, the blocks split over `pool`'s threads (nullptr: the calling
// thread only). Checks each block's start and end bit and element count. `out` as above.
absl::Status DecodeParallel(const Unit& unit, std::span<uint16_t> out, ThreadPool* pool);

// The parallel decoder bound to one unit, with its multi-symbol table built once (about 0.1 ms
// of work, worth keeping when a unit is decoded again and again, as the engine does per token).
// Immutable and thread-safe; `unit` must outlive it.
class UnitDecoder {
 public:
  static constexpr int kTableBits = 12;
  explicit UnitDecoder(const Unit& unit);

  const Unit& unit() const { return *unit_; }
  // As DecodeParallel.
  absl::Status Decode(std::span<uint16_t> out, ThreadPool* pool) const;
  // Decodes elements [first, last) only, on the calling thread, in element order: the blocks
  // that hold them, four at a time, each piece's values (clipped to the range) handed to `sink`,
  // valid during the call only; `sink` must not decode on the same thread. The same checks as
  // DecodeParallel on those blocks. For consumers that use the values at once, such as a
  // matrix-vector product over a block's rows. kInvalidArgument for a range outside the unit;
  // kDataLoss from a corrupt block (after the pieces before it were handed over).
  using Bf16Sink = std::function<void(std::span<const uint16_t> values)>;
  absl::Status DecodeInPieces(size_t first, size_t last, const Bf16Sink& sink) const;
  // As DecodeInPieces, but each piece is handed over as the two bytes of its values, not yet
  // joined: exponents and sign/mantissa bytes (format::JoinBf16). For consumers that widen the
  // values to fp32 anyway, which then skip writing and reading the BF16 values.
  using ExponentSink = std::function<void(std::span<const uint8_t> exponents,
                                          std::span<const uint8_t> sign_mantissa)>;
  absl::Status DecodeExponentsInPieces(size_t first, size_t last, const ExponentSink& sink) const;
  // Elements [first, first + out.size()) into `out`, as DecodeInPieces.
  absl::Status DecodeElements(size_t first, std::span<uint16_t> out) const;

 private:
  const Unit* unit_;
  std::unique_ptr<std::array<uint64_t, 1 << kTableBits>> table_;
};

// UnitDecoder(unit).DecodeElements(first, out): random access into large units, such as the
// embedding rows of a batch of tokens.
absl::Status DecodeElements(const Unit& unit, size_t first, std::span<uint16_t> out);

}  // namespace df11::codec

#endif  // DF11_CODEC_DECODER_H_
