// A unit's BF16 weights in the lane-stream layout, the GPU's resident layout (design in
// codec/cuda/lane_steps.h): segments of 8192 weights, each one warp's work; lane l of a segment
// owns 8 consecutive weights of every 256 and codes their exponents in a bit stream of its own
// (a prefix code of at most 8 bits per unit, the rare exponents escaped with their raw byte); the
// streams are stored as rows of 32 words, one per lane, padded to the segment's longest lane. The
// sign/mantissa bytes are the unit's own, in element order.
//
// This is the layout's definition and its reference builder, run on the host (tests, the host
// tier, and units whose GPU build is not available); Decode is its reference decoder, written
// independently of the kernel's steps, which tests run lane by lane (DecodeLaneView).
//
//   DF11_ASSIGN_OR_RETURN(LaneUnit u, LaneUnit::Build(bf16_values, &pool));
//   std::vector<uint16_t> out(u.num_elements());
//   DF11_RETURN_IF_ERROR(u.Decode(out));
#ifndef DF11_CODEC_LANE_UNIT_H_
#define DF11_CODEC_LANE_UNIT_H_

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codec/cuda/lane_steps.h"
#include "codec/decoder.h"
#include "codec/exponent_code.h"
#include "codec/thread_pool.h"

namespace df11::codec {

class LaneUnit {
 public:
  // Bytes readable after the last segment's sign/mantissa bytes: a lane loads the next group's
  // bytes while it decodes this one's.
  static constexpr uint64_t kSignMantissaTail = gpu::kLaneGroup;

  // Codes `values` (kInvalidArgument when empty or over 2^40). `pool` may be nullptr.
  static absl::StatusOr<LaneUnit> Build(std::span<const uint16_t> values, ThreadPool* pool);
  // Decodes `decoder`'s unit (which checks its bitstream: kDataLoss) and codes it.
  static absl::StatusOr<LaneUnit> FromDf11(const UnitDecoder& decoder, ThreadPool* pool);

  uint64_t num_elements() const { return n_; }
  uint32_t num_segments() const { return static_cast<uint32_t>(segment_words_.size() - 1); }
  const std::vector<uint32_t>& words() const { return words_; }
  const std::vector<uint32_t>& segment_words() const { return segment_words_; }
  // num_segments() * kLaneSegment + kSignMantissaTail bytes, zero past num_elements().
  const std::vector<uint8_t>& sign_mantissa() const { return sign_mantissa_; }
  const std::array<uint32_t, gpu::kLaneTableEntries>& table() const { return table_; }
  const ExponentCode& code() const { return code_; }

  // What a resident copy holds: words, segment index and table, plus the unit's sign/mantissa
  // bytes (one per weight); and per weight, in bits.
  uint64_t stored_bytes() const;
  double bits_per_weight() const { return 8.0 * stored_bytes() / n_; }

  // The reference decoder: every weight into `out` (num_elements() values). kDataLoss when a
  // lane's codes do not fit its segment's rows, or the longest lane ends before the last row.
  absl::Status Decode(std::span<uint16_t> out) const;

  // A view over host memory, for the CPU harness (DecodeLaneView).
  gpu::LaneView view(uint16_t* out) const;

 private:
  LaneUnit() = default;

  uint64_t n_ = 0;
  ExponentCode code_;
  std::array<uint32_t, gpu::kLaneTableEntries> table_{};
  std::vector<uint32_t> words_;
  std::vector<uint32_t> segment_words_;
  std::vector<uint8_t> sign_mantissa_;
};

// The kernel's steps run lane by lane and warp by warp on the host, as the kernel runs them:
// every segment of `view` decoded into view.out (when not null). False when a segment's codes are
// inconsistent with its rows (the kernel's error flag).
bool DecodeLaneView(const gpu::LaneView& view);

// The fused product's steps (gpu::LaneGemv) run the same way: each product of `products` times
// x [columns][cols] (ldx = cols, BF16), into its y (fp32 when `y_fp32`, else BF16), through the
// row pieces and their ordered sum, bit for bit what the kernels give. False as DecodeLaneView.
// kInvalidArgument as CheckLaneProducts (no products: nothing to do).
absl::StatusOr<bool> MultiplyLaneProducts(std::span<const gpu::LaneProduct> products,
                                          const uint16_t* x, int columns, bool y_fp32);

// Whether the fused product takes a matrix of `rows` x `cols` weights from `first_element` of a
// unit: cols and first_element multiples of 256, at least one row.
bool LaneProductSupported(uint64_t first_element, uint64_t rows, uint64_t cols);

// The checks of a decode launch, on the host before it (gpu::DecodeLanes, the emulated device):
// kInvalidArgument for no views or more than kMaxLaneViews, a workspace under
// LaneWorkspaceBytes(), an output not 16-byte aligned or sign/mantissa bytes not 8-byte aligned,
// a segment range past its unit, or 2^31 segments or more in all.
absl::Status CheckLaneDecodeLaunch(std::span<const gpu::LaneView> views, uint64_t workspace_bytes);

// The checks of a fused product launch (gpu::LaneGemv, MultiplyLaneProducts): kInvalidArgument
// for no products or more than kMaxLaneProducts, columns outside 1 to kLaneMaxColumns, a matrix
// LaneProductSupported refuses or one that runs past its unit, mixed cols, or 2^31 segments or
// more in all.
absl::Status CheckLaneProducts(std::span<const gpu::LaneProduct> products, int columns);

}  // namespace df11::codec

#endif  // DF11_CODEC_LANE_UNIT_H_
