#include "tests/codec/gpu_emulation.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codec/cuda/decode_steps.h"
#include "codec/gpu_layout.h"

namespace df11::testing {

absl::Status DecodeWithGpuStepsOnCpu(const codec::Unit& unit, std::span<uint16_t> out) {
  namespace gpu = codec::gpu;
  if (out.size() != unit.num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat("DF11 unit ", unit.name(), " has ",
                                                   unit.num_elements(), " elements; output holds ",
                                                   out.size()));
  }
  absl::StatusOr<codec::GpuLayout> layout = codec::BuildGpuLayout(unit, nullptr);
  if (!layout.ok()) return layout.status();
  const auto& t = unit.tensors();
  // Device-like buffers: the stream in 32-bit words with zero padding, gaps with one zero byte.
  std::vector<uint32_t> stream((t.encoded_exponent.size() + gpu::kStreamPadBytes + 3) / 4, 0);
  std::memcpy(stream.data(), t.encoded_exponent.data(), t.encoded_exponent.size());
  std::vector<uint8_t> gaps(t.gaps.begin(), t.gaps.end());
  gaps.push_back(0);
  const std::vector<uint32_t> positions(unit.positions().begin(), unit.positions().end());
  gpu::UnitView view{stream.data(),
                     t.sign_mantissa.data(),
                     gaps.data(),
                     positions.data(),
                     layout->segment_offsets.data(),
                     layout->table.data(),
                     t.luts.data(),
                     out.data(),
                     static_cast<uint32_t>(unit.num_elements()),
                     static_cast<uint32_t>(unit.num_bytes()),
                     static_cast<uint32_t>(unit.num_blocks()),
                     static_cast<uint32_t>(unit.lut_rows())};
  // The CTA's shared memory: table, LUT rows and the exponent staging.
  std::vector<uint32_t> table_smem(layout->table);
  std::vector<uint8_t> luts_smem(t.luts.begin(), t.luts.end());
  std::vector<uint8_t> exps(gpu::kMaxBlockElements);
  for (uint32_t b = 0; b < view.n_blocks; ++b) {
    for (uint32_t thread = 0; thread < gpu::kSegmentsPerBlock; ++thread) {
      if (!gpu::DecodeSegment(view, table_smem.data(), luts_smem.data(), b, thread, exps.data())) {
        return absl::DataLossError(absl::StrCat("block ", b, " thread ", thread, ": mismatch"));
      }
    }
    // __syncthreads()
    for (uint32_t thread = 0; thread < gpu::kSegmentsPerBlock; ++thread) {
      gpu::JoinSlice(view, b, exps.data(), thread, gpu::kSegmentsPerBlock);
    }
  }
  return absl::OkStatus();
}

}  // namespace df11::testing
