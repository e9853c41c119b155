#include "daemon/runtime/engine/estimate.h"

#include <array>
#include <map>
#include <string_view>
#include <utility>

#include "codec/base/status_macros.h"
#include "codec/format.h"
#include "codec/safetensors.h"
#include "daemon/runtime/engine/model.h"

namespace df11::runtime {
namespace {

// For "U.luts", "U.gaps", ... (one of the six tensors of DF11 unit U): U and the suffix.
// Empty for other tensors.
std::pair<std::string_view, std::string_view> SplitUnitTensor(std::string_view name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string_view::npos) return {};
  const std::string_view suffix = name.substr(dot + 1);
  constexpr std::array<std::string_view, 6> kUnitTensors = {
      format::kLuts, format::kEncodedExponent, format::kSignMantissa, format::kOutputPositions,
      format::kGaps, format::kSplitPositions};
  for (std::string_view t : kUnitTensors) {
    if (suffix == t) return {name.substr(0, dot), suffix};
  }
  return {};
}

}  // namespace

absl::StatusOr<ModelEstimate> EstimateModel(const std::string& dir) {
  DF11_ASSIGN_OR_RETURN(const codec::ModelDirectory directory, codec::ModelDirectory::Read(dir));
  return EstimateModel(directory);
}

absl::StatusOr<ModelEstimate> EstimateModel(const codec::ModelDirectory& dir) {
  ModelEstimate e;
  DF11_ASSIGN_OR_RETURN(e.config, ParseModelConfig(dir));
  e.df11 = dir.is_df11();
  // Opening maps the files and parses their headers; the tensor bytes are never touched. The
  // files are read as Model::Load reads them: every file for DF11, the index's shards for BF16.
  DF11_ASSIGN_OR_RETURN(const codec::Checkpoint checkpoint,
                        codec::Checkpoint::Open(dir.path(), /*all_files=*/e.df11));
  std::map<std::string_view, codec::UnitSizes> units;
  for (const codec::SafetensorsFile& file : checkpoint.files()) {
    for (const codec::TensorView& t : file.tensors()) {
      const auto [unit, suffix] =
          e.df11 ? SplitUnitTensor(t.name) : std::pair<std::string_view, std::string_view>();
      // The other towers of a multimodal checkpoint are not loaded (Model::skipped_tensors).
      if (!InTextModel(e.config, unit.empty() ? std::string_view(t.name) : unit)) continue;
      if (unit.empty()) {
        e.plain_bytes += t.data.size();
        e.plain_tensors.push_back(t.data.size());
        continue;
      }
      e.unit_bytes += t.data.size();
      codec::UnitSizes& sizes = units[unit];
      if (suffix == format::kSignMantissa) sizes.elements = t.data.size();
      if (suffix == format::kEncodedExponent) sizes.stream_bytes = t.data.size();
      if (suffix == format::kGaps) sizes.gaps_bytes = t.data.size();
      if (suffix == format::kLuts) sizes.lut_bytes = t.data.size();
    }
  }
  for (const auto& [name, sizes] : units) e.units.push_back(sizes);
  e.from_headers = true;
  return e;
}

}  // namespace df11::runtime
