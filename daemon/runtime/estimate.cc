#include "daemon/runtime/estimate.h"

#include <array>
#include <string_view>

#include "codec/base/status_macros.h"
#include "codec/format.h"
#include "codec/safetensors.h"
#include "daemon/runtime/model.h"

namespace df11::runtime {
namespace {

// True for "U.luts", "U.gaps", ...: one of the six tensors of DF11 unit U.
bool IsUnitTensor(std::string_view name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string_view::npos) return false;
  const std::string_view suffix = name.substr(dot + 1);
  constexpr std::array<std::string_view, 6> kUnitTensors = {
      format::kLuts,   format::kEncodedExponent, format::kSignMantissa,
      format::kOutputPositions, format::kGaps, format::kSplitPositions};
  for (std::string_view t : kUnitTensors) {
    if (suffix == t) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<ModelEstimate> EstimateModel(const std::string& dir) {
  ModelEstimate e;
  DF11_ASSIGN_OR_RETURN(e.config, ReadModelConfig(dir));
  DF11_ASSIGN_OR_RETURN(e.df11, IsDf11Directory(dir));
  // Opening maps the files and parses their headers; the tensor bytes are never touched. The
  // files are read as Model::Load reads them: every file for DF11, the index's shards for BF16.
  DF11_ASSIGN_OR_RETURN(const codec::Checkpoint checkpoint,
                        codec::Checkpoint::Open(dir, /*all_files=*/e.df11));
  for (const codec::SafetensorsFile& file : checkpoint.files()) {
    for (const codec::TensorView& t : file.tensors()) {
      (e.df11 && IsUnitTensor(t.name) ? e.unit_bytes : e.plain_bytes) += t.data.size();
    }
  }
  return e;
}

}  // namespace df11::runtime
