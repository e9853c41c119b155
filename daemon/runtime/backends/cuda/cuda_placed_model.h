// A model placed by the CUDA backend, as its rooms see it: where its tensors are in its arena
// allocation (GpuModelPlan), which of its units are tiled matrices, its RoPE tables; and a KV
// cache of pages of the backend's pool. Private to the CUDA backend (cuda_*.cc).
#ifndef DF11_DAEMON_RUNTIME_BACKENDS_CUDA_CUDA_PLACED_MODEL_H_
#define DF11_DAEMON_RUNTIME_BACKENDS_CUDA_CUDA_PLACED_MODEL_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "codec/cuda/lane_steps.h"
#include "codec/tiled_matrix.h"
#include "daemon/runtime/backends/cuda/arena_allocator.h"
#include "daemon/runtime/engine/backend.h"
#include "daemon/runtime/backends/cuda/forward_ops.h"
#include "daemon/runtime/backends/cuda/gpu_placement.h"
#include "daemon/runtime/backends/cuda/kv_page_pool.h"
#include "daemon/runtime/engine/placed_model.h"

namespace df11::runtime {

class CudaBackend;

// A tensor of a unit kept as a tiled matrix: where its rows start in the unit (elements), and
// where its image is in the model's allocation.
struct TiledTensor {
  uint64_t element_offset = 0;
  uint64_t offset = 0;
  codec::TiledImage image;
};

// A unit kept in the lane-stream layout (codec::LaneUnit): where its parts are in the model's
// allocation (offsets from its start).
struct LaneImage {
  uint64_t words = 0, index = 0, table = 0, sign_mantissa = 0;
  uint64_t elements = 0;
  uint32_t segments = 0;
  codec::gpu::LaneView View(const char* allocation, uint16_t* out) const {
    return codec::gpu::LaneView{
        .words = reinterpret_cast<const uint32_t*>(allocation + words),
        .segment_words = reinterpret_cast<const uint32_t*>(allocation + index),
        .sign_mantissa = reinterpret_cast<const uint8_t*>(allocation + sign_mantissa),
        .table = reinterpret_cast<const uint32_t*>(allocation + table),
        .out = out,
        .n_elements = elements,
        .first_segment = 0,
        .n_segments = segments};
  }
};

// A tensor on the device after a decode: in a scratch buffer, or in a model's own memory.
// Resolved to an address only under the arena's lock.
struct DeviceTensor {
  enum class Space { kAbsent, kScratch, kModel };
  Space space = Space::kAbsent;
  ScratchBuffer buffer = ScratchBuffer::k0;  // which, for kScratch
  uint64_t offset = 0;                       // bytes from the start of the space (the buffer)
  uint64_t bytes = 0;
};

// Where tensor k (LayerTensorNames order) of `layer` is once the layer is decoded into scratch
// buffer ScratchBufferOf(layer): in the scratch, resident in the model's allocation, or absent.
DeviceTensor LayerTensorOf(const GpuModelPlan& plan, int64_t layer, size_t k);
// Where the output head is once decoded (plan.head_buffer), or resident.
DeviceTensor LmHeadOf(const GpuModelPlan& plan);

// A model resident in the arena. Destroying it returns its memory.
class CudaPlacedModel final : public PlacedModel {
 public:
  CudaPlacedModel(CudaBackend* backend, ModelConfig config, bool df11, std::string label,
                  GpuModelPlan plan, ArenaAllocator::Id allocation,
                  std::vector<uint32_t> embedding_positions)
      : backend_(backend),
        config_(std::move(config)),
        df11_(df11),
        label_(std::move(label)),
        plan_(std::move(plan)),
        allocation_(allocation),
        embedding_positions_(std::move(embedding_positions)) {}
  // Returns its memory to the backend (CudaBackend::Release).
  ~CudaPlacedModel() override;

  const ModelConfig& config() const override { return config_; }
  bool is_df11() const override { return df11_; }
  std::string_view device() const override;
  uint64_t unit_bytes() const override { return plan_.layout.unit_bytes; }
  uint64_t plain_bytes() const override { return plan_.layout.plain_bytes; }

  const std::string& label() const { return label_; }
  const GpuModelPlan& plan() const { return plan_; }
  ArenaAllocator::Id allocation() const { return allocation_; }
  // P[0..n_blocks] of the embedding's unit, to find the blocks that hold a row.
  std::span<const uint32_t> embedding_positions() const { return embedding_positions_; }
  const CudaBackend* backend() const { return backend_; }

  // A projection or the output head as rows of a tiled matrix in the allocation.
  struct FusedSource {
    uint64_t offset = 0;  // of the matrix's image
    codec::TiledImage image;
    uint32_t first_row = 0, rows = 0;
    codec::gpu::TiledView View(const char* allocation) const {
      return image.RowsView(allocation + offset, first_row, rows);
    }
  };
  // A projection or the output head as rows x cols weights of a lane-stream unit, from its
  // element `first_element`.
  struct LaneSource {
    size_t unit = 0;
    uint64_t first_element = 0;
    uint32_t rows = 0, cols = 0;
  };
  // The layer's projections that short passes multiply by without decoding them (LayerTensorNames
  // order: q k v o gate up down), tiled or lane-stream (a backend keeps one of the two); the
  // others are decoded as usual.
  struct FusedLayer {
    bool any = false;
    // Whether every projection in a tiled or lane-stream unit has its source here (a row range
    // the fused product does not take has none): only then may short passes skip decoding those
    // units.
    bool complete = true;
    std::array<std::optional<FusedSource>, 7> projections;
    std::array<std::optional<LaneSource>, 7> lanes;
  };
  // Set by Place once the model is uploaded, before anyone else sees it.
  void SetFused(std::vector<std::vector<TiledTensor>> units,
                std::vector<std::optional<LaneImage>> lanes, std::vector<FusedLayer> layers,
                std::optional<FusedSource> head, std::optional<LaneSource> lane_head,
                uint64_t lane_workspace_bytes) {
    tiled_ = std::move(units);
    lanes_ = std::move(lanes);
    fused_layers_ = std::move(layers);
    fused_head_ = std::move(head);
    lane_head_ = std::move(lane_head);
    lane_workspace_bytes_ = lane_workspace_bytes;
  }
  // Unit u's lane-stream image, when it is kept so.
  const std::optional<LaneImage>& lane(size_t u) const {
    static const std::optional<LaneImage> kNone;
    return u < lanes_.size() ? lanes_[u] : kNone;
  }
  size_t lane_units() const {
    return std::count_if(lanes_.begin(), lanes_.end(), [](const auto& l) { return l.has_value(); });
  }
  const std::optional<LaneSource>& lane_head() const { return lane_head_; }
  // The fused lane products' workspace a pass needs (LaneGemv's pieces, 8 columns, the largest
  // launch), 0 without lane-stream units.
  uint64_t lane_workspace_bytes() const { return lane_workspace_bytes_; }
  // Unit u's tiled tensors; empty when it keeps DF11's layout.
  std::span<const TiledTensor> tiled(size_t u) const {
    return u < tiled_.size() ? std::span<const TiledTensor>(tiled_[u])
                             : std::span<const TiledTensor>();
  }
  size_t tiled_units() const {
    return std::count_if(tiled_.begin(), tiled_.end(), [](const auto& t) { return !t.empty(); });
  }
  const FusedLayer* fused_layer(int64_t l) const {
    return l < static_cast<int64_t>(fused_layers_.size()) && fused_layers_[l].any
               ? &fused_layers_[l]
               : nullptr;
  }
  const std::optional<FusedSource>& fused_head() const { return fused_head_; }

  // The RoPE tables of full-attention and sliding-window layers as the kernels take them, made
  // at Place (an error there, such as a rotary dimension the kernels do not take, is kept for
  // Forward to report: the model still places and decodes).
  void SetRope(absl::StatusOr<RopeTable> full, absl::StatusOr<RopeTable> sliding) {
    full_rope_ = std::move(full);
    sliding_rope_ = std::move(sliding);
  }
  const absl::StatusOr<RopeTable>& rope(bool sliding) const {
    return sliding ? sliding_rope_ : full_rope_;
  }

 private:
  CudaBackend* const backend_;
  const ModelConfig config_;
  const bool df11_;
  const std::string label_;
  const GpuModelPlan plan_;
  const ArenaAllocator::Id allocation_;
  const std::vector<uint32_t> embedding_positions_;
  std::vector<std::vector<TiledTensor>> tiled_;
  std::vector<std::optional<LaneImage>> lanes_;
  std::vector<FusedLayer> fused_layers_;
  std::optional<FusedSource> fused_head_;
  std::optional<LaneSource> lane_head_;
  uint64_t lane_workspace_bytes_ = 0;
  absl::StatusOr<RopeTable> full_rope_ = absl::FailedPreconditionError("no RoPE table"),
                            sliding_rope_ = absl::FailedPreconditionError("no RoPE table");
};

// A sequence's pages in the KV pool; returned when the cache is destroyed.
class CudaKvCache final : public KvCache {
 public:
  CudaKvCache(KvPagePool& pool, KvPageTable table, int64_t capacity)
      : KvCache(capacity), pool_(pool), table_(std::move(table)) {}
  ~CudaKvCache() override { pool_.Release(table_); }
  uint64_t bytes() const override { return table_.pages.size() * pool_.page_bytes(); }
  const KvPagePool& pool() const { return pool_; }
  const KvPageTable& table() const { return table_; }
  void Advance(int64_t n) { length_ += n; }

 private:
  KvPagePool& pool_;
  KvPageTable table_;
};

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_BACKENDS_CUDA_CUDA_PLACED_MODEL_H_
