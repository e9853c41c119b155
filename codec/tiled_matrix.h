// A matrix of a DF11 unit re-encoded, in memory, for the GPU's fused decode + matrix product
// (codec/gpu_tiled.h): y = W x for 1 to 8 columns of x without any decoded weight reaching
// memory. Design and the kernels' per-lane steps: codec/cuda/tiled_steps.h.
//
// Layout, for W of rows x cols (rows a multiple of 16, cols of 32):
//   - tiles of 16 x 16 weights; a band is a row of tiles (16 rows of W), cut into segments of
//     up to 32 tiles; one warp decodes a segment, lane l holding 8 weights of each tile (the
//     tensor-core product's A fragment);
//   - each lane's exponents of a segment are one MSB-first bit stream, coded with one prefix code
//     per matrix of at most 6 bits per code (ExponentCode; rare exponents as the escape code
//     followed by their byte); the segment's 32 streams follow each other, the segment starting
//     on a 32-bit word; per segment its first bit and each lane's length are kept (the index);
//   - the sign/mantissa bytes, 8 per lane per tile, in the order the lanes load them.
// On LLM-like weights this takes about 10.77 bits per weight in all (DF11: about 10.80).
//
//   DF11_ASSIGN_OR_RETURN(TiledMatrix m, TiledMatrix::Build(bf16, rows, cols, &pool));
//   std::vector<uint16_t> back(rows * cols);
//   DF11_RETURN_IF_ERROR(m.Decode(back));   // == bf16
#ifndef DF11_CODEC_TILED_MATRIX_H_
#define DF11_CODEC_TILED_MATRIX_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "codec/cuda/tiled_steps.h"
#include "codec/thread_pool.h"

namespace df11::codec {

// Where a TiledMatrix's arrays sit in one device image (each on a 256-byte boundary), as offsets
// from the image's start.
struct TiledImage {
  uint64_t words = 0, sign_mantissa = 0, segment_bits = 0, lane_bits = 0, codes = 0;
  uint64_t bytes = 0;  // the whole image
  uint32_t rows = 0, cols = 0;
  // The view of an image at `base` (device memory, or host memory in the CPU harness).
  gpu::TiledView View(const char* base) const;
  // The view of rows [first_row, first_row + rows) (multiples of 16) of the image at `base`.
  gpu::TiledView RowsView(const char* base, uint32_t first_row, uint32_t n_rows) const;
};

// Decodes the matrix of `view` (host memory) with the GPU kernels' per-lane steps, warp by warp,
// into out[r * ld + c]: what DecodeTiled computes, for emulated devices. False if a lane's codes
// do not end where its stream does (DecodeTiled's kDataLoss).
bool DecodeTiledView(const gpu::TiledView& view, uint16_t* out, uint64_t ld);

class TiledMatrix {
 public:
  // Whether a rows x cols matrix can be tiled: both positive, rows a multiple of 16 and cols of
  // 32 (every projection of the supported architectures is).
  static bool Supports(int64_t rows, int64_t cols);

  // From BF16 weights, row-major rows x cols, on `pool` (nullptr: this thread). kInvalidArgument
  // for a shape Supports() refuses or a size that does not match.
  static absl::StatusOr<TiledMatrix> Build(std::span<const uint16_t> weights, int64_t rows,
                                           int64_t cols, ThreadPool* pool);

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  uint64_t num_elements() const { return uint64_t(rows_) * uint64_t(cols_); }
  size_t num_segments() const { return segment_bits_.size() - 1; }

  // All of W, row-major, into `out` (num_elements() values; kInvalidArgument otherwise), by plain
  // C++ code by code: the definition of the layout. kDataLoss if a lane's codes do not end where
  // its stream does.
  absl::Status Decode(std::span<uint16_t> out) const;

  // Bytes held: code streams, index, code and sign/mantissa bytes.
  uint64_t stored_bytes() const;
  // Stored bits per weight, sign and mantissa included.
  double bits_per_weight() const { return 8.0 * stored_bytes() / num_elements(); }
  // How many weights are escaped (for tests and tools).
  uint64_t escaped_weights() const { return escaped_; }

  // The arrays the GPU kernels read (see gpu::TiledView), for uploading and for the CPU harness.
  std::span<const uint32_t> words() const { return words_; }
  std::span<const uint8_t> sign_mantissa() const { return sign_mantissa_; }
  std::span<const uint64_t> segment_bits() const { return segment_bits_; }
  std::span<const uint16_t> lane_bits() const { return lane_bits_; }
  std::span<const uint16_t> codes() const { return codes_; }
  // A view of this object's host memory.
  gpu::TiledView host_view() const;
  // Its device image: where each array goes (CopyImage writes them there).
  TiledImage image() const;
  void CopyImage(char* dst) const;

 private:
  int64_t rows_ = 0, cols_ = 0;
  uint64_t escaped_ = 0;
  std::vector<uint32_t> words_;  // with gpu::kTiledWordsRoom words of room at the end
  std::vector<uint8_t> sign_mantissa_;
  std::vector<uint64_t> segment_bits_;
  std::vector<uint16_t> lane_bits_;
  std::vector<uint16_t> codes_;  // gpu::kTiledCodes entries
};

}  // namespace df11::codec

#endif  // DF11_CODEC_TILED_MATRIX_H_
