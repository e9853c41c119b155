#include "daemon/runtime/backends/cuda/forward_ops.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"

namespace df11::runtime {

absl::StatusOr<RopeTable> RopeTable::Of(const RotaryEmbedding& rope, int64_t rotary_dim) {
  if (rotary_dim / 2 > kMaxFrequencies || rotary_dim < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RoPE over ", rotary_dim, " dimensions; the GPU kernels take 2 to ", 2 * kMaxFrequencies));
  }
  RopeTable t;
  t.rotary_dim = static_cast<int32_t>(rotary_dim);
  t.scale = rope.scale();
  t.long_from = rope.long_from();
  const std::vector<float>& inverse = rope.InverseFrequencies(0);
  std::copy(inverse.begin(), inverse.end(), t.inverse);
  if (t.long_from < std::numeric_limits<int64_t>::max()) {
    const std::vector<float>& long_inverse = rope.InverseFrequencies(t.long_from);
    std::copy(long_inverse.begin(), long_inverse.end(), t.long_inverse);
  }
  return t;
}

absl::Status CheckHeads(int64_t head_dim, int64_t rotary_dim) {
  if (head_dim < 1 || head_dim > kMaxHeadDim || rotary_dim > head_dim) {
    return absl::InvalidArgumentError(absl::StrCat("heads of ", head_dim, " rotating ", rotary_dim,
                                                   "; the kernels take heads of 1 to ", kMaxHeadDim,
                                                   " rotating up to all of them"));
  }
  return absl::OkStatus();
}

absl::Status CheckRowBytes(int64_t row_bytes) {
  if (row_bytes % 2 != 0 || row_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("GatherRows: rows of ", row_bytes, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status CheckColumns(int64_t first, int64_t width, int64_t in_width) {
  if (first < 0 || width < 0 || first + width > in_width) {
    return absl::InvalidArgumentError(
        absl::StrCat("SplitColumns: columns ", first, " + ", width, " of ", in_width));
  }
  return absl::OkStatus();
}

}  // namespace df11::runtime
