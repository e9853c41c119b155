#include "tests/codec/gpu_emulation.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codec/cuda/decode_steps.h"
#include "codec/gpu_layout.h"

namespace df11::testing {
namespace {

namespace gpu = codec::gpu;

// A unit's tensors in device-like buffers: the stream in 32-bit words with zero padding, gaps with
// one zero byte, positions as n_blocks + 1 values.
struct DeviceLike {
  explicit DeviceLike(const codec::Unit& unit)
      : stream((unit.tensors().encoded_exponent.size() + gpu::kStreamPadBytes + 3) / 4, 0),
        gaps(unit.tensors().gaps.begin(), unit.tensors().gaps.end()),
        positions(unit.positions().begin(), unit.positions().end()),
        table(codec::BuildDecodeTable(unit)) {
    std::memcpy(stream.data(), unit.tensors().encoded_exponent.data(),
                unit.tensors().encoded_exponent.size());
    gaps.push_back(0);
  }
  gpu::UnitView View(const codec::Unit& unit, const uint16_t* offsets, uint16_t* out) const {
    return gpu::UnitView{stream.data(),
                         unit.tensors().sign_mantissa.data(),
                         gaps.data(),
                         positions.data(),
                         offsets,
                         table.data(),
                         unit.tensors().luts.data(),
                         out,
                         static_cast<uint32_t>(unit.num_elements()),
                         static_cast<uint32_t>(unit.num_bytes()),
                         static_cast<uint32_t>(unit.num_blocks()),
                         static_cast<uint32_t>(unit.lut_rows())};
  }
  std::vector<uint32_t> stream;
  std::vector<uint8_t> gaps;
  std::vector<uint32_t> positions;
  std::vector<uint32_t> table;
};

}  // namespace

absl::StatusOr<std::vector<uint16_t>> BuildOffsetsWithGpuStepsOnCpu(const codec::Unit& unit) {
  const DeviceLike d(unit);
  std::vector<uint16_t> offsets(unit.num_blocks() * gpu::kSegmentsPerBlock, 0);
  const gpu::UnitView view = d.View(unit, offsets.data(), nullptr);
  uint32_t counts[gpu::kSegmentsPerBlock];
  for (uint32_t b = 0; b < view.n_blocks; ++b) {
    for (uint32_t t = 0; t < gpu::kSegmentsPerBlock; ++t) {
      counts[t] = gpu::CountSegment(view, view.table, view.luts, b, t);
    }
    // __syncthreads(), then thread 0.
    if (!gpu::FinishBlockOffsets(view, b, counts, offsets.data() + b * gpu::kSegmentsPerBlock)) {
      return absl::DataLossError(absl::StrCat("block ", b, ": the codes do not add up"));
    }
  }
  return offsets;
}

absl::Status DecodeWithGpuStepsOnCpu(const codec::Unit& unit, std::span<uint16_t> out,
                                     bool offsets_from_layout_pass) {
  if (out.size() != unit.num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat("DF11 unit ", unit.name(), " has ",
                                                   unit.num_elements(), " elements; output holds ",
                                                   out.size()));
  }
  absl::StatusOr<codec::GpuLayout> layout = codec::BuildGpuLayout(unit, nullptr);
  if (!layout.ok()) return layout.status();
  std::vector<uint16_t> offsets = layout->segment_offsets;
  if (offsets_from_layout_pass) {
    absl::StatusOr<std::vector<uint16_t>> built = BuildOffsetsWithGpuStepsOnCpu(unit);
    if (!built.ok()) return built.status();
    for (size_t i = 0; i < offsets.size(); ++i) {
      if ((*built)[i] != offsets[i]) {
        return absl::InternalError(absl::StrCat("segment offset ", i, ": the layout pass gives ",
                                                (*built)[i], ", BuildGpuLayout ", offsets[i]));
      }
    }
  }
  const DeviceLike d(unit);
  const gpu::UnitView view = d.View(unit, offsets.data(), out.data());
  // The CTA's shared memory: table, LUT rows and the exponent staging.
  std::vector<uint32_t> table_smem(d.table);
  std::vector<uint8_t> luts_smem(unit.tensors().luts.begin(), unit.tensors().luts.end());
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
