// Where the fused products of short passes find each projection of a model just uploaded: as
// rows of a tiled matrix or of a lane-stream unit, or nowhere (then the layer decodes it).
//
//   DF11_ASSIGN_OR_RETURN(CudaUploader::Layouts kept, uploader.Upload(host, plan, id, progress));
//   FusedSources fused = FindFusedSources(host, kept);
#ifndef DF11_DAEMON_RUNTIME_BACKENDS_CUDA_FUSED_SOURCES_H_
#define DF11_DAEMON_RUNTIME_BACKENDS_CUDA_FUSED_SOURCES_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "daemon/runtime/backends/cuda/cuda_placed_model.h"
#include "daemon/runtime/backends/cuda/cuda_uploader.h"
#include "daemon/runtime/engine/model.h"

namespace df11::runtime {

struct FusedSources {
  std::vector<CudaPlacedModel::FusedLayer> layers;  // one per decoder layer
  std::optional<CudaPlacedModel::FusedSource> head;
  std::optional<CudaPlacedModel::LaneSource> lane_head;
  // The workspace of the largest lane-stream launch a short pass makes (q, k and v; o; gate and
  // up; down; the head), with ForwardOps::kMaxTiledRows columns.
  uint64_t lane_workspace = 0;
};

// The sources of every projection and the output head of `host` among the units `kept` in a
// fused layout.
FusedSources FindFusedSources(const Model& host, const CudaUploader::Layouts& kept);

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_BACKENDS_CUDA_FUSED_SOURCES_H_
