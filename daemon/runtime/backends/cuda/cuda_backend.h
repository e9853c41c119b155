// The CUDA backend: many models resident in one GPU's memory, DF11 units kept compressed and
// decoded on the GPU, per layer, into scratch shared by every model. Written against GpuDevice
// (gpu_device.h), so it is CUDA-free and its host logic runs in tests on an emulated device.
//
// It is four rooms, each a class of its own, and this class joins them into a Backend:
//   - CudaArena (cuda_arena.h): the device memory, taken once as one arena and carved into
//     models, decode scratch, workspace, the KV pool and the forward pass's buffers; compaction;
//     the accounting by kind. Its lock guards every device address.
//   - CudaUploader (cuda_uploader.h): a model's files into its allocation through page-locked
//     staging buffers, each unit checked on the GPU (or tiled on the host) as it lands.
//   - CudaDecodeQueue (cuda_decode_queue.h): decodes of layers, the output head and embedding
//     rows into the two scratch buffers on a stream of their own, with their error flags.
//   - CudaModelRunner (cuda_model_runner.h): forward passes through the decoder graph on a
//     compute stream, overlapping layer l + 1's decode with layer l's compute.
// Locks, outermost first: the runner's (one pass at a time; placement and release take it so that
// scratch never moves under a pass), the decode queue's, the arena's.
//
// Rooms for what is coming: CUDA graphs and fused kernels go to the runner; the host-memory tier
// and replicas between GPUs are placements (this class and the uploader); the GPU-built resident
// layout of issue "one GPU layout" is the uploader's (building) and the decode queue's (decoding).
//
//   DF11_ASSIGN_OR_RETURN(std::unique_ptr<GpuDevice> device, cuda::OpenDevice(0));
//   DF11_ASSIGN_OR_RETURN(auto backend, CudaBackend::Create(std::move(device), {.budget = ...}));
//   DF11_ASSIGN_OR_RETURN(auto host, Model::Load(dir, backend->HostLoadOptions()));
//   DF11_ASSIGN_OR_RETURN(auto model, backend->Place(std::move(host), on_progress));
//   DF11_RETURN_IF_ERROR(backend->Forward(*model, steps, logits));
#ifndef DF11_DAEMON_RUNTIME_BACKENDS_CUDA_CUDA_BACKEND_H_
#define DF11_DAEMON_RUNTIME_BACKENDS_CUDA_CUDA_BACKEND_H_

#include <array>
#include <cstdint>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "codec/thread_pool.h"
#include "codec/tiled_matrix.h"
#include "daemon/runtime/engine/backend.h"
#include "daemon/runtime/backends/cuda/cuda_arena.h"
#include "daemon/runtime/backends/cuda/cuda_decode_queue.h"
#include "daemon/runtime/backends/cuda/cuda_model_runner.h"
#include "daemon/runtime/backends/cuda/cuda_placed_model.h"
#include "daemon/runtime/backends/cuda/cuda_uploader.h"
#include "daemon/runtime/backends/cuda/forward_ops.h"
#include "daemon/runtime/backends/cuda/gpu_device.h"
#include "daemon/runtime/backends/cuda/gpu_placement.h"
#include "daemon/runtime/backends/cuda/kv_page_pool.h"

namespace df11::runtime {

class CudaBackend final : public Backend {
 public:
  // How DF11 units are kept on the GPU besides DF11's own layout: kTiled, the projections and an
  // untied head as tiled matrices (codec::TiledMatrix) for the fused product of short passes,
  // every other unit in DF11's layout for the first GPU decoder; or kLane, every unit in the
  // lane-stream layout (codec::LaneUnit, decoder v3), which the decode into scratch, the fused
  // product of short passes and embedding rows all read. One of the two goes once a GPU has
  // measured both (df11 gemv-bench, engine-bench).
  enum class GpuLayout { kTiled, kLane };

  struct Options {
    uint64_t budget = 0;         // the arena taken from the device at start
    uint64_t kv_pool_bytes = 0;  // of the budget: the KV pool
    uint64_t kv_page_bytes = 2 << 20;
    uint64_t granule = 2 << 20;         // arena allocations are multiples of it
    uint64_t staging_bytes = 32 << 20;  // each page-locked staging buffer
    int staging_buffers = 4;
    // Host threads filling the staging buffers; 0: half the CPUs. The fill is bound by host memory
    // bandwidth, which half the CPUs of an H200 machine already reach (50 GB/s with 8 or 16 of
    // its 16); with all of them the load ran at 0.62 of the host-to-device copy, with half 0.79
    // (docs/PERFORMANCE.md).
    int threads = 0;
    // cuBLAS's 32 MiB (NVIDIA's advice for Hopper), after FlashInfer's 17 MiB and 8 KiB of the
    // tiled products' (device/forward_ops.cu).
    uint64_t library_workspace_bytes = (49 << 20) + (8 << 10);
    // Tokens of one forward pass at most: a longer prompt runs in several passes, so that a pass's
    // buffers (about 100 KB per token for an 8B model) stay small next to the arena.
    uint64_t max_pass_tokens = 2048;
    // Forward passes of at most this many tokens (0 to ForwardOps::kMaxTiledRows) multiply by
    // the projections and the output head without decoding them: those units are kept as tiled
    // matrices (codec::TiledMatrix, built on the host at Place) and the fused decode + product
    // reads them (codec/gpu_tiled.h); longer passes decode them into scratch for cuBLAS as
    // usual. 0 keeps every unit in DF11's layout, which loads faster (no host decode and
    // re-encode).
    int64_t fused_max_rows = ForwardOps::kMaxTiledRows;
    GpuLayout layout = GpuLayout::kTiled;
  };

  // The threads that fill the staging buffers under `options` (Options::threads resolved).
  static int StagingThreads(const Options& options);

  // Takes the arena from `device` and carves the KV pool and workspace from it.
  // kInvalidArgument for options that do not fit (the numbers); kResourceExhausted when the
  // device cannot give the budget (the driver's numbers); kInternal for a device error.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(std::unique_ptr<GpuDevice> device,
                                                             const Options& options);
  // Every placed model must have been destroyed.
  ~CudaBackend() override;

  std::string_view name() const override { return "cuda"; }
  std::string_view device() const override { return device_name_; }
  // DF11 units keep their official layout on the host; the GPU layout is built at Place.
  Model::LoadOptions HostLoadOptions() const override { return {.interleave = false}; }
  bool ReadsFilesAtPlace() const override { return true; }
  // Exact when `estimate` was read from headers (the same layout as Place); from a hub listing,
  // an upper bound. The scratch growth assumes one unit per layer (ScratchElementsFromConfig).
  PlacementEstimate EstimatePlacement(const ModelEstimate& estimate) const override;
  absl::StatusOr<std::unique_ptr<PlacedModel>> Place(std::unique_ptr<Model> model,
                                                     const PlaceProgressFn& progress) override;
  // Pages of the KV pool for `capacity` positions, taken now.
  absl::StatusOr<std::unique_ptr<KvCache>> NewCache(const ModelConfig& config,
                                                    int64_t capacity) override;
  // One step of every sequence of `batch` (Backend::Forward). kFailedPrecondition when the
  // device has no ForwardOps; kResourceExhausted when the arena has no room for the step's
  // buffers; kDataLoss naming the model and layer for a corrupt unit.
  absl::Status Forward(const PlacedModel& model, std::span<const SequenceStep> batch,
                       std::span<float> logits) override;
  BackendMemory Memory() const override;
  // Keys and values of every layer in BF16.
  uint64_t KvBytesPerPosition(const ModelConfig& config) const override;
  // The device's counters, and the runner's profile.
  DeviceWork Work() const override;
  void SetProfiling(bool on) override { runner_->SetProfiling(on); }

  // Decoding into scratch. One caller at a time (the engine loop); each call enqueues on the
  // decode stream and returns. `model` must have been placed by this backend.
  // Layer `layer` into its scratch buffer; then LayerTensor gives each tensor.
  absl::Status DecodeLayer(const PlacedModel& model, int64_t layer);
  // The output head into its buffer (plan.head_buffer); then LmHead gives it.
  absl::Status DecodeLmHead(const PlacedModel& model);
  // The embedding rows of `tokens` (at most EmbeddingRowsPerCall(model)): rows[k] becomes token
  // k's row, hidden_size BF16 values, in kEmbeddingBuffer for a DF11 embedding (only the blocks
  // holding the rows are decoded), else where it is resident. kInvalidArgument for a token
  // outside the vocabulary, too many tokens or too few rows.
  absl::Status DecodeEmbeddingRows(const PlacedModel& model, std::span<const int32_t> tokens,
                                   std::span<DeviceTensor> rows);
  int64_t EmbeddingRowsPerCall(const PlacedModel& model) const;
  // Waits for the decode stream; kDataLoss naming the model and what was decoded when a unit
  // decoded since the last call is corrupt.
  absl::Status FinishDecodes();

  // Tensor k (LayerTensorNames order) of `layer` once decoded; the output head.
  DeviceTensor LayerTensor(const PlacedModel& model, int64_t layer, size_t k) const;
  DeviceTensor LmHead(const PlacedModel& model) const;
  // Copies `tensor` (of `model`) to host memory `out` (tensor.bytes bytes), after FinishDecodes.
  absl::Status Read(const PlacedModel& model, const DeviceTensor& tensor, std::span<std::byte> out);

  // Units of `model` resident as tiled matrices (Options::fused_max_rows) and in the lane-stream
  // layout (Options::layout), and whether layer `layer` (-1: the output head) multiplies by any
  // of them in short passes.
  size_t tiled_units(const PlacedModel& model) const;
  size_t lane_units(const PlacedModel& model) const;
  bool fused(const PlacedModel& model, int64_t layer) const;

  // For tests: the arena's bookkeeping, and compaction on demand.
  uint64_t arena_allocated_bytes() const;
  size_t arena_allocations() const;
  absl::Status CompactForTest();
  uint64_t compactions() const;

 private:
  friend class CudaPlacedModel;

  CudaBackend(std::unique_ptr<GpuDevice> device, const Options& options);
  absl::Status Init();
  // Frees a placed model's memory (its destructor).
  void Release(CudaPlacedModel& model) ABSL_LOCKS_EXCLUDED(runner_->mu(), arena_->mu());
  // What the resident models need of the two scratch buffers.
  std::array<uint64_t, 2> ScratchNeedLocked() const ABSL_SHARED_LOCKS_REQUIRED(arena_->mu());
  const CudaPlacedModel* Mine(const PlacedModel& model) const;

  const std::unique_ptr<GpuDevice> device_;
  const Options options_;
  const std::string device_name_;
  // Declared in the order they are made; destroyed in reverse, so the rooms' streams have
  // finished before the arena's memory goes back.
  std::unique_ptr<CudaArena> arena_;
  std::unique_ptr<KvPagePool> kv_pool_;
  std::unique_ptr<CudaDecodeQueue> queue_;
  std::unique_ptr<CudaUploader> uploader_;
  std::unique_ptr<CudaModelRunner> runner_;
  std::set<CudaPlacedModel*> models_ ABSL_GUARDED_BY(arena_->mu());
};

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_BACKENDS_CUDA_CUDA_BACKEND_H_
