#include "daemon/runtime/backends/cuda/fused_sources.h"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <utility>

#include "codec/gpu_lane.h"
#include "codec/gpu_tiled.h"
#include "codec/lane_unit.h"

namespace df11::runtime {
namespace {

// Where weight `w` is as rows of a tiled matrix of `tiled` (per unit), when it is: a whole tensor
// of a tiled unit, or a range of its rows that starts and ends on a band.
std::optional<CudaPlacedModel::FusedSource> FindTiled(
    const WeightLocation& w, const std::vector<std::vector<TiledTensor>>& tiled) {
  if (w.unit < 0 || static_cast<size_t>(w.unit) >= tiled.size() || w.shape.size() != 2) {
    return std::nullopt;
  }
  const uint64_t rows = w.shape[0], cols = w.shape[1];
  for (const TiledTensor& t : tiled[w.unit]) {
    const uint64_t n = uint64_t{t.image.rows} * t.image.cols;
    if (w.offset < t.element_offset || w.offset >= t.element_offset + n) continue;
    const uint64_t first = w.offset - t.element_offset;
    if (cols != t.image.cols || first % cols != 0) return std::nullopt;
    const uint64_t first_row = first / cols;
    if (first_row % codec::gpu::kTileRows != 0 || rows % codec::gpu::kTileRows != 0 ||
        first_row + rows > t.image.rows) {
      return std::nullopt;
    }
    return CudaPlacedModel::FusedSource{.offset = t.offset,
                                        .image = t.image,
                                        .first_row = static_cast<uint32_t>(first_row),
                                        .rows = static_cast<uint32_t>(rows)};
  }
  return std::nullopt;
}

// Weight `w` as a lane-stream product, when its unit is lane-stream and the product takes it.
std::optional<CudaPlacedModel::LaneSource> FindLane(
    const WeightLocation& w, const std::vector<std::optional<LaneImage>>& lanes) {
  if (w.unit < 0 || static_cast<size_t>(w.unit) >= lanes.size() || !lanes[w.unit].has_value() ||
      w.shape.size() != 2 || !codec::LaneProductSupported(w.offset, w.shape[0], w.shape[1])) {
    return std::nullopt;
  }
  return CudaPlacedModel::LaneSource{.unit = static_cast<size_t>(w.unit),
                                     .first_element = w.offset,
                                     .rows = static_cast<uint32_t>(w.shape[0]),
                                     .cols = static_cast<uint32_t>(w.shape[1])};
}

}  // namespace

FusedSources FindFusedSources(const Model& host, const CudaUploader::Layouts& kept) {
  FusedSources out;
  // Where a weight of a unit is; none for a plain tensor or an absent name.
  auto locate = [&](const std::string& name) -> std::optional<WeightLocation> {
    if (name.empty()) return std::nullopt;
    absl::StatusOr<WeightLocation> w = host.Locate(name);
    if (!w.ok() || w->unit < 0) return std::nullopt;
    return *std::move(w);
  };
  using LaneSource = CudaPlacedModel::LaneSource;
  // One launch of the fused lane-stream product: the workspace grows to what it needs.
  auto lane_launch = [&](std::initializer_list<std::optional<LaneSource>> sources) {
    std::vector<codec::gpu::LaneProduct> products;
    for (const std::optional<LaneSource>& s : sources) {
      if (s.has_value()) {
        products.push_back({.first_element = s->first_element, .rows = s->rows, .cols = s->cols});
      }
    }
    if (products.empty()) return;
    out.lane_workspace = std::max(out.lane_workspace, codec::gpu::LaneGemvWorkspaceBytes(
                                                          products, ForwardOps::kMaxTiledRows));
  };
  out.layers.resize(host.config().num_layers);
  for (int64_t l = 0; l < host.config().num_layers; ++l) {
    const std::vector<std::string> names = LayerTensorNames(host.config(), l);
    CudaPlacedModel::FusedLayer& f = out.layers[l];
    for (size_t k = 0; k < names.size(); ++k) {
      const std::optional<WeightLocation> w = locate(names[k]);
      if (!w.has_value()) continue;
      if (k < f.projections.size()) {
        f.projections[k] = FindTiled(*w, kept.tiled);
        f.lanes[k] = FindLane(*w, kept.lanes);
        if (f.projections[k].has_value() || f.lanes[k].has_value()) {
          f.any = true;
          continue;
        }
      }
      // A tensor of a fused unit that the products do not take (a projection of another shape,
      // a norm, a bias) would not be decoded when the pass skips the layer: then it may not.
      if (kept.fused(w->unit)) f.complete = false;
    }
    lane_launch({f.lanes[0], f.lanes[1], f.lanes[2]});
    lane_launch({f.lanes[3]});
    lane_launch({f.lanes[4], f.lanes[5]});
    lane_launch({f.lanes[6]});
  }
  const std::optional<WeightLocation> head_location = locate(LmHeadName(host.config()));
  if (head_location.has_value()) {
    out.head = FindTiled(*head_location, kept.tiled);
    out.lane_head = FindLane(*head_location, kept.lanes);
  }
  lane_launch({out.lane_head});
  return out;
}

}  // namespace df11::runtime
