// Copies a model's files into its arena allocation: each unit's official tensors from the mapped
// files through page-locked staging buffers, the host filling one while the copy engine drains the
// others, with progress in bytes. Each DF11 unit then gets its decoder layout built on the GPU
// (codec::gpu::BuildSegmentOffsets) and is decoded once without output on a second stream while
// the next unit copies, so that a corrupt unit is kDataLoss at load, naming it. With
// fused_max_rows, a unit of matrices only (projections, an untied output head) is instead decoded
// on the host (checking it) and re-encoded as tiled matrices (codec::TiledMatrix) in the place its
// DF11 image would take; a unit whose tiled images would not fit there keeps DF11's layout. One
// upload at a time (they share the copy engine anyway).
#ifndef DF11_DAEMON_RUNTIME_BACKENDS_CUDA_CUDA_UPLOADER_H_
#define DF11_DAEMON_RUNTIME_BACKENDS_CUDA_CUDA_UPLOADER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "codec/thread_pool.h"
#include "daemon/runtime/engine/backend.h"
#include "daemon/runtime/backends/cuda/cuda_arena.h"
#include "daemon/runtime/backends/cuda/cuda_placed_model.h"
#include "daemon/runtime/backends/cuda/gpu_device.h"
#include "daemon/runtime/backends/cuda/gpu_handles.h"
#include "daemon/runtime/backends/cuda/gpu_placement.h"
#include "daemon/runtime/engine/model.h"

namespace df11::runtime {

class CudaUploader {
 public:
  struct Options {
    uint64_t staging_bytes = 32 << 20;  // each page-locked staging buffer
    int staging_buffers = 4;
    int threads = 1;  // host threads filling the staging buffers
    // The resident layout of DF11 units besides DF11's own: the units of projections and of an
    // untied output head as tiled matrices, or every unit in the lane-stream layout; each only
    // where it fits in the unit's DF11 place (CudaBackend::Options).
    enum class Layout { kDf11, kTiled, kLane };
    Layout layout = Layout::kTiled;
  };
  // What Upload kept in other layouts than DF11's, per unit.
  struct Layouts {
    std::vector<std::vector<TiledTensor>> tiled;  // empty: not tiled
    std::vector<std::optional<LaneImage>> lanes;  // none: not lane-stream
    // Whether unit u is one a short pass may multiply by without decoding it.
    bool fused(size_t u) const {
      return (u < tiled.size() && !tiled[u].empty()) || (u < lanes.size() && lanes[u].has_value());
    }
  };
  // Units whose load-time checks are in flight before their flags are read (two launches each).
  static constexpr size_t kChecks = 32;
  // A staging buffer is filled by several threads in pieces of this size (its smallest size).
  static constexpr uint64_t kFillPiece = 1 << 20;

  CudaUploader(GpuDevice& device, CudaArena& arena, const Options& options);
  // `workspace`: 2 * kChecks slots of `slot_bytes` (CudaDecodeQueue::SlotBytes), fixed.
  absl::Status Init(char* workspace, uint64_t slot_bytes);
  ~CudaUploader();

  // Copies `host` into `allocation` laid out as `plan`, calling `progress` (may be empty) every
  // few MB; returns the units kept in another layout than DF11's. kCancelled when `progress`
  // returned false; kDataLoss naming a corrupt unit.
  absl::StatusOr<Layouts> Upload(const Model& host, const GpuModelPlan& plan,
                                 CudaArena::Id allocation, const PlaceProgressFn& progress)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Per unit of `host`, whether to tile it: it holds a projection or the output head, every
  // tensor in it is a matrix TiledMatrix supports, and it is not the embedding's unit (whose rows
  // are decoded on their own).
  std::vector<bool> TiledUnits(const Model& host, const GpuModelPlan& plan) const;

  GpuDevice& device_;
  CudaArena& arena_;
  const Options options_;
  char* workspace_ = nullptr;
  uint64_t slot_bytes_ = 0;
  uint32_t* flags_ = nullptr;  // page-locked: the checks' error flags

  absl::Mutex mu_;  // one upload at a time
  std::unique_ptr<DeviceStream> stream_;  // the copies
  std::unique_ptr<DeviceStream> check_;   // each unit's layout pass and check, after its copies
  std::unique_ptr<DeviceEvent> unit_copied_;
  std::vector<void*> staging_;
  std::vector<std::unique_ptr<DeviceEvent>> staging_done_;
  codec::ThreadPool copy_pool_;  // fills staging buffers
  // Decodes and re-encodes the units tiled at load: compute-bound, so every CPU (the staging's
  // share is for memory bandwidth).
  codec::ThreadPool tile_pool_{0};
};

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_BACKENDS_CUDA_CUDA_UPLOADER_H_
