#include "daemon/runtime/cuda_backend.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <thread>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "codec/base/check.h"
#include "codec/base/status_macros.h"
#include "codec/gpu_decoder.h"
#include "codec/gpu_layout.h"
#include "codec/tiled_matrix.h"
#include "daemon/runtime/decoder_graph.h"

namespace df11::runtime {
namespace {

// Placement reports progress after each this many bytes copied.
constexpr uint64_t kReportBytes = 16 << 20;
// A staging buffer is filled by several threads in pieces of this size.
constexpr uint64_t kFillPiece = 1 << 20;
// Passes of at most this many tokens compute the products that share an input (q, k, v; gate,
// up) as one cuBLAS product where their weights are adjacent: at small batch, separate k and v
// products use a fraction of the GPU (0.30 TB/s on an H100, against 1.9 for gate and up; see
// ../shared/docs/GPU_WORK.md). Longer passes keep them apart, sparing the split's copy.
constexpr int64_t kGroupedMaxRows = 64;
// Decode launches in flight before FinishDecodes must have checked them.
constexpr size_t kDecodeSlots = 64;
// Units whose load-time checks are in flight before their flags are read (two launches each).
constexpr size_t kPlacementChecks = 32;

uint64_t Align(uint64_t bytes, uint64_t to) { return (bytes + to - 1) / to * to; }

// Where weight `name` of `host` is as rows of a tiled matrix of `tiled` (per unit), when it is: a
// whole tensor of a tiled unit, or a range of its rows that starts and ends on a band.
template <typename Source>
std::optional<Source> FindTiled(const Model& host,
                                const std::vector<std::vector<TiledTensor>>& tiled,
                                const std::string& name) {
  if (name.empty()) return std::nullopt;
  const absl::StatusOr<WeightLocation> w = host.Locate(name);
  if (!w.ok() || w->unit < 0 || static_cast<size_t>(w->unit) >= tiled.size() ||
      w->shape.size() != 2) {
    return std::nullopt;
  }
  const uint64_t rows = w->shape[0], cols = w->shape[1];
  for (const TiledTensor& t : tiled[w->unit]) {
    const uint64_t n = uint64_t{t.image.rows} * t.image.cols;
    if (w->offset < t.element_offset || w->offset >= t.element_offset + n) continue;
    const uint64_t first = w->offset - t.element_offset;
    if (cols != t.image.cols || first % cols != 0) return std::nullopt;
    const uint64_t first_row = first / cols;
    if (first_row % codec::gpu::kTileRows != 0 || rows % codec::gpu::kTileRows != 0 ||
        first_row + rows > t.image.rows) {
      return std::nullopt;
    }
    return Source{.offset = t.offset,
                  .image = t.image,
                  .first_row = static_cast<uint32_t>(first_row),
                  .rows = static_cast<uint32_t>(rows)};
  }
  return std::nullopt;
}

// One decode launch's workspace: the larger of the two decoders' for a full launch.
uint64_t SlotBytes(const GpuDevice& device) {
  return Align(std::max(device.DecodeWorkspaceBytes(codec::gpu::kMaxUnitsPerLaunch),
                        device.TiledWorkspaceBytes(codec::gpu::kMaxUnitsPerLaunch)),
               256);
}

}  // namespace

namespace {

// Where tensor k (LayerTensorNames order) of `layer` is once the layer is decoded into scratch
// buffer `buffer`: in the scratch, resident in the model's allocation, or absent.
DeviceTensor LayerTensorOf(const GpuModelPlan& plan, int64_t layer, int buffer, size_t k) {
  const TensorSource& t = plan.layers[layer].tensors[k];
  switch (t.kind) {
    case TensorSource::Kind::kAbsent:
      return DeviceTensor{};
    case TensorSource::Kind::kResident:
      return DeviceTensor{
          .space = DeviceTensor::Space::kModel, .offset = t.offset, .bytes = t.bytes};
    case TensorSource::Kind::kScratch:
      break;
  }
  return DeviceTensor{
      .space = buffer == 0 ? DeviceTensor::Space::kScratch0 : DeviceTensor::Space::kScratch1,
      .offset = t.offset,
      .bytes = t.bytes};
}

// Where the output head is once decoded (plan.head_buffer), or resident.
DeviceTensor LmHeadOf(const GpuModelPlan& plan) {
  const TensorSource& t = plan.head;
  if (t.kind == TensorSource::Kind::kResident) {
    return DeviceTensor{.space = DeviceTensor::Space::kModel, .offset = t.offset, .bytes = t.bytes};
  }
  return DeviceTensor{.space = plan.head_buffer == 0 ? DeviceTensor::Space::kScratch0
                                                     : DeviceTensor::Space::kScratch1,
                      .offset = t.offset,
                      .bytes = t.bytes};
}

}  // namespace

// RAII over the device's opaque handles.
class CudaBackend::Stream {
 public:
  Stream(GpuDevice& device, GpuDevice::Stream handle) : device_(device), handle_(handle) {}
  ~Stream() { device_.DestroyStream(handle_); }
  GpuDevice::Stream get() const { return handle_; }

 private:
  GpuDevice& device_;
  GpuDevice::Stream handle_;
};

class CudaBackend::Event {
 public:
  Event(GpuDevice& device, GpuDevice::Event handle) : device_(device), handle_(handle) {}
  ~Event() { device_.DestroyEvent(handle_); }
  GpuDevice::Event get() const { return handle_; }

 private:
  GpuDevice& device_;
  GpuDevice::Event handle_;
};

// One decode launch's device workspace (error flag and views), and what it decoded.
struct CudaBackend::DecodeSlot {
  enum class What { kLayer, kHead, kEmbedding };
  uint64_t offset = 0;  // in the workspace allocation
  bool pending = false;
  const CudaPlacedModel* model = nullptr;
  What what = What::kLayer;
  int64_t layer = 0;
};

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
  ~CudaPlacedModel() override { backend_->Release(*this); }

  const ModelConfig& config() const override { return config_; }
  bool is_df11() const override { return df11_; }
  std::string_view device() const override { return backend_->device(); }
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
  // The layer's tiled projections (LayerTensorNames order: q k v o gate up down), which short
  // passes multiply by without decoding them; the others are decoded as usual.
  struct FusedLayer {
    bool any = false;
    // Whether every projection in a tiled unit has its source here (a row range that does not
    // start and end on a band has none): only then may short passes skip decoding tiled units.
    bool complete = true;
    std::array<std::optional<FusedSource>, 7> projections;
  };
  // Set by Place once the model is uploaded, before anyone else sees it.
  void SetTiled(std::vector<std::vector<TiledTensor>> units, std::vector<FusedLayer> layers,
                std::optional<FusedSource> head) {
    tiled_ = std::move(units);
    fused_layers_ = std::move(layers);
    fused_head_ = std::move(head);
  }
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
  std::vector<FusedLayer> fused_layers_;
  std::optional<FusedSource> fused_head_;
  absl::StatusOr<RopeTable> full_rope_ = absl::FailedPreconditionError("no RoPE table"),
                            sliding_rope_ = absl::FailedPreconditionError("no RoPE table");
};

namespace {

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

}  // namespace

CudaBackend::CudaBackend(std::unique_ptr<GpuDevice> device, const Options& options)
    : device_(std::move(device)),
      options_(options),
      device_name_(device_->name()),
      arena_(options.budget, options.granule),
      copy_pool_(StagingThreads(options)) {}

int CudaBackend::StagingThreads(const Options& options) {
  if (options.threads > 0) return options.threads;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency() / 2));
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(std::unique_ptr<GpuDevice> device,
                                                                 const Options& options) {
  const std::string name = device->name();
  if (options.granule == 0 || (options.granule & (options.granule - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the arena granule must be a power of two, got ", options.granule));
  }
  if (options.max_pass_tokens == 0) {
    return absl::InvalidArgumentError("a forward pass must take at least one token");
  }
  if (options.staging_buffers < 2 || options.staging_bytes < kFillPiece) {
    return absl::InvalidArgumentError(
        absl::StrCat("placement needs at least two staging buffers of ", kFillPiece, " bytes"));
  }
  if (options.fused_max_rows < 0 || options.fused_max_rows > ForwardOps::kMaxTiledRows) {
    return absl::InvalidArgumentError(absl::StrCat("fused_max_rows of ", options.fused_max_rows,
                                                   "; 0 to ", ForwardOps::kMaxTiledRows));
  }
  const uint64_t slot = SlotBytes(*device);
  const uint64_t workspace =
      Align((kDecodeSlots + 2 * kPlacementChecks) * slot + options.library_workspace_bytes,
            options.granule);
  const uint64_t fixed = workspace + Align(options.kv_pool_bytes, options.granule);
  if (options.budget < fixed + options.granule) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": a budget of ", options.budget,
                     " bytes leaves no room for models after the KV pool (", options.kv_pool_bytes,
                     " bytes) and the workspace (", workspace, " bytes)"));
  }
  if (options.kv_pool_bytes > 0 && options.kv_pool_bytes < options.kv_page_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("a KV pool of ", options.kv_pool_bytes,
                                                   " bytes holds no page of ",
                                                   options.kv_page_bytes, " bytes"));
  }
  std::unique_ptr<CudaBackend> backend(new CudaBackend(std::move(device), options));
  DF11_RETURN_IF_ERROR(backend->Init());
  return backend;
}

absl::Status CudaBackend::Init() {
  uint64_t arena_bytes = 0;
  {
    absl::ReaderMutexLock lock(&mu_);
    arena_bytes = arena_.capacity();
  }
  DF11_ASSIGN_OR_RETURN(base_, device_->Allocate(arena_bytes));
  auto stream = [this]() -> absl::StatusOr<std::unique_ptr<Stream>> {
    DF11_ASSIGN_OR_RETURN(GpuDevice::Stream s, device_->CreateStream());
    return std::make_unique<Stream>(*device_, s);
  };
  DF11_ASSIGN_OR_RETURN(upload_stream_, stream());
  DF11_ASSIGN_OR_RETURN(check_stream_, stream());
  DF11_ASSIGN_OR_RETURN(decode_stream_, stream());
  DF11_ASSIGN_OR_RETURN(compute_stream_, stream());
  auto event = [this]() -> absl::StatusOr<std::unique_ptr<Event>> {
    DF11_ASSIGN_OR_RETURN(GpuDevice::Event e, device_->CreateEvent());
    return std::make_unique<Event>(*device_, e);
  };
  DF11_ASSIGN_OR_RETURN(unit_copied_, event());
  for (int b = 0; b < 2; ++b) {
    DF11_ASSIGN_OR_RETURN(scratch_ready_[b], event());
    DF11_ASSIGN_OR_RETURN(scratch_free_[b], event());
  }
  for (int i = 0; i < options_.staging_buffers; ++i) {
    DF11_ASSIGN_OR_RETURN(void* host, device_->AllocateHost(options_.staging_bytes));
    staging_.push_back(host);
    DF11_ASSIGN_OR_RETURN(GpuDevice::Event e, device_->CreateEvent());
    staging_done_.push_back(std::make_unique<Event>(*device_, e));
  }
  const uint64_t slot_bytes = SlotBytes(*device_);
  slot_bytes_ = slot_bytes;
  {
    absl::MutexLock decode_lock(&decode_mu_);
    for (size_t i = 0; i < kDecodeSlots; ++i)
      slots_.push_back(DecodeSlot{.offset = i * slot_bytes});
    views_.reserve(codec::gpu::kMaxUnitsPerLaunch);
  }
  absl::MutexLock lock(&mu_);
  // The workspace: the decode slots, the placement's check slots, the library's workspace.
  // Allocated first, at offset 0, so compaction never moves it: its address is fixed.
  DF11_ASSIGN_OR_RETURN(workspace_id_,
                        arena_.Allocate((kDecodeSlots + 2 * kPlacementChecks) * slot_bytes +
                                        options_.library_workspace_bytes));
  DF11_CHECK(arena_.offset(workspace_id_) == 0);
  workspace_ = static_cast<char*>(base_);
  placement_workspace_ = workspace_ + kDecodeSlots * slot_bytes;
  if (ForwardOps* ops = device_->forward_ops(); ops != nullptr) {
    DF11_RETURN_IF_ERROR(ops->UseWorkspace(placement_workspace_ + 2 * kPlacementChecks * slot_bytes,
                                           options_.library_workspace_bytes));
  }
  if (options_.kv_pool_bytes > 0) {
    DF11_ASSIGN_OR_RETURN(kv_pool_id_, arena_.Allocate(options_.kv_pool_bytes));
  }
  kv_pool_ = std::make_unique<KvPagePool>(kv_pool_id_ != 0 ? arena_.size(kv_pool_id_) : 0,
                                          options_.kv_page_bytes);
  return absl::OkStatus();
}

CudaBackend::~CudaBackend() {
  {
    absl::MutexLock lock(&mu_);
    DF11_CHECK(models_.empty());
  }
  if (decode_stream_ != nullptr) device_->StreamSynchronize(decode_stream_->get()).IgnoreError();
  if (upload_stream_ != nullptr) device_->StreamSynchronize(upload_stream_->get()).IgnoreError();
  if (check_stream_ != nullptr) device_->StreamSynchronize(check_stream_->get()).IgnoreError();
  if (compute_stream_ != nullptr) {
    device_->StreamSynchronize(compute_stream_->get()).IgnoreError();
  }
  for (void* host : staging_) device_->FreeHost(host);
  staging_done_.clear();
  unit_copied_.reset();
  for (int b = 0; b < 2; ++b) {
    scratch_ready_[b].reset();
    scratch_free_[b].reset();
  }
  compute_stream_.reset();
  decode_stream_.reset();
  check_stream_.reset();
  upload_stream_.reset();
  if (base_ != nullptr) device_->Free(base_);
}

char* CudaBackend::AddressLocked(ArenaAllocator::Id id) const {
  return static_cast<char*>(base_) + arena_.offset(id);
}

absl::StatusOr<ArenaAllocator::Id> CudaBackend::AllocateLocked(uint64_t bytes,
                                                               const std::string& what) {
  absl::StatusOr<ArenaAllocator::Id> id = arena_.Allocate(bytes);
  // The forward pass's buffers, kept between passes, give way when no pass is using them.
  if (!id.ok() && forward_id_ != 0 && !forward_busy_) {
    arena_.Free(forward_id_);
    forward_id_ = 0;
    id = arena_.Allocate(bytes);
  }
  if (!id.ok() && arena_.free_bytes() >= arena_.RoundUp(bytes)) {
    DF11_RETURN_IF_ERROR(CompactLocked());
    id = arena_.Allocate(bytes);
  }
  if (!id.ok()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, " needs ", arena_.RoundUp(bytes), " bytes on ", device_name_, "; the arena of ",
        arena_.capacity(), " bytes has ", arena_.free_bytes(), " free"));
  }
  return id;
}

absl::Status CudaBackend::CompactLocked() {
  // Nothing may read or write the arena while it moves: every stream finishes first, and no
  // new work is enqueued while the lock is held.
  DF11_RETURN_IF_ERROR(device_->StreamSynchronize(upload_stream_->get()));
  DF11_RETURN_IF_ERROR(device_->StreamSynchronize(check_stream_->get()));
  DF11_RETURN_IF_ERROR(device_->StreamSynchronize(decode_stream_->get()));
  DF11_RETURN_IF_ERROR(device_->StreamSynchronize(compute_stream_->get()));
  const std::vector<ArenaAllocator::Move> moves = arena_.Compact();
  char* base = static_cast<char*>(base_);
  absl::Status status;
  for (const ArenaAllocator::Move& m : moves) {
    ArenaAllocator::ForEachChunk(m, [&](uint64_t to, uint64_t from, uint64_t bytes) {
      if (status.ok())
        status = device_->CopyAsync(base + to, base + from, bytes, decode_stream_->get());
    });
  }
  DF11_RETURN_IF_ERROR(status);
  DF11_RETURN_IF_ERROR(device_->StreamSynchronize(decode_stream_->get()));
  ++compactions_;
  return absl::OkStatus();
}

std::array<uint64_t, 2> CudaBackend::ScratchNeedLocked() const {
  std::array<uint64_t, 2> need = {0, 0};
  for (const CudaPlacedModel* m : models_) {
    for (int b = 0; b < 2; ++b) need[b] = std::max(need[b], m->plan().scratch_elements[b]);
  }
  return need;
}

absl::Status CudaBackend::ResizeScratchLocked(std::array<uint64_t, 2> extra) {
  std::array<uint64_t, 2> need = ScratchNeedLocked();
  for (int b = 0; b < 2; ++b) need[b] = std::max(need[b], extra[b]);
  if (need == scratch_elements_) return absl::OkStatus();
  // Scratch holds nothing between passes: the decodes that wrote it have finished.
  DF11_RETURN_IF_ERROR(device_->StreamSynchronize(decode_stream_->get()));
  for (int b = 0; b < 2; ++b) {
    if (need[b] == scratch_elements_[b]) continue;
    if (scratch_[b] != 0) arena_.Free(scratch_[b]);
    scratch_[b] = 0;
    scratch_elements_[b] = 0;
    if (need[b] == 0) continue;
    DF11_ASSIGN_OR_RETURN(scratch_[b], AllocateLocked(need[b] * sizeof(uint16_t),
                                                      absl::StrCat("decode scratch ", b)));
    scratch_elements_[b] = need[b];
  }
  return absl::OkStatus();
}

PlacementEstimate CudaBackend::EstimatePlacement(const ModelEstimate& estimate) const {
  PlacementEstimate e;
  if (estimate.from_headers) {
    const GpuPlacementLayout layout =
        LayOutGpuPlacement(estimate.units, estimate.plain_tensors, options_.granule);
    e.unit_bytes = layout.unit_bytes;
    e.plain_bytes = layout.plain_bytes;
  } else {
    // Sizes from a hub listing: each unit's decoder layout adds at most 1/16 of its stream, plus
    // a table and alignment per unit (one per layer, the embedding and the head); every tensor is
    // aligned to 256 bytes.
    const uint64_t units = static_cast<uint64_t>(estimate.config.num_layers) + 2;
    const uint64_t tensors = units * kLayerTensors + 3;
    e.unit_bytes = estimate.unit_bytes + estimate.unit_bytes / 16 +
                   units * (codec::gpu::kTableEntries * sizeof(uint32_t) + 8 * 256);
    e.plain_bytes =
        Align(estimate.plain_bytes + tensors * 256, options_.granule) + options_.granule;
  }
  const std::array<uint64_t, 2> need = ScratchElementsFromConfig(estimate.config, estimate.df11);
  absl::ReaderMutexLock lock(&mu_);
  for (int b = 0; b < 2; ++b) {
    if (need[b] > scratch_elements_[b]) {
      const uint64_t now = scratch_[b] != 0 ? arena_.size(scratch_[b]) : 0;
      e.shared_growth_bytes += arena_.RoundUp(need[b] * sizeof(uint16_t)) - now;
    }
  }
  return e;
}

absl::StatusOr<std::unique_ptr<PlacedModel>> CudaBackend::Place(std::unique_ptr<Model> host,
                                                                const PlaceProgressFn& progress) {
  if (host == nullptr) return absl::InvalidArgumentError("Place: no model");
  DF11_ASSIGN_OR_RETURN(GpuModelPlan plan, PlanGpuModel(*host, options_.granule));
  std::vector<uint32_t> embedding_positions;
  if (plan.embedding_unit >= 0) {
    const auto p = host->units()[plan.embedding_unit]->unit->positions();
    embedding_positions.assign(p.begin(), p.end());
  }
  // The allocation, the scratch growth and the model's entry in models_ (which keeps the scratch
  // from shrinking under it) in one step. From then on the model owns its allocation: destroying
  // it (on an error below) frees it.
  std::unique_ptr<CudaPlacedModel> placed;
  ArenaAllocator::Id allocation = 0;
  {
    // No pass is in flight while scratch moves: a pass derives scratch addresses layer by layer.
    absl::MutexLock forward_lock(&forward_mu_);
    absl::MutexLock lock(&mu_);
    DF11_ASSIGN_OR_RETURN(
        allocation, AllocateLocked(plan.layout.bytes(), absl::StrCat("model ", host->directory())));
    if (absl::Status s = ResizeScratchLocked(plan.scratch_elements); !s.ok()) {
      arena_.Free(allocation);
      ResizeScratchLocked({0, 0}).IgnoreError();  // back to what the others need
      return s;
    }
    placed = std::make_unique<CudaPlacedModel>(this, host->config(), host->is_df11(),
                                               host->directory(), std::move(plan), allocation,
                                               std::move(embedding_positions));
    models_.insert(placed.get());
  }
  std::vector<std::vector<TiledTensor>> tiled(host->units().size());
  DF11_RETURN_IF_ERROR(Upload(*host, placed->plan(), allocation, progress, tiled));
  // A file truncated or rewritten while it was copied gave the device other bytes than the
  // validated ones (the mapping guard turns reads past a truncation into zeros).
  DF11_RETURN_IF_ERROR(host->CheckFiles());
  using FusedSource = CudaPlacedModel::FusedSource;
  std::vector<CudaPlacedModel::FusedLayer> layers(host->config().num_layers);
  for (int64_t l = 0; l < host->config().num_layers; ++l) {
    const std::vector<std::string> names = LayerTensorNames(host->config(), l);
    for (size_t k = 0; k < layers[l].projections.size(); ++k) {
      layers[l].projections[k] = FindTiled<FusedSource>(*host, tiled, names[k]);
      layers[l].any |= layers[l].projections[k].has_value();
      const absl::StatusOr<WeightLocation> w = host->Locate(names[k]);
      if (!layers[l].projections[k].has_value() && w.ok() && w->unit >= 0 &&
          !tiled[w->unit].empty()) {
        layers[l].complete = false;
      }
    }
  }
  std::optional<FusedSource> head =
      FindTiled<FusedSource>(*host, tiled, LmHeadName(host->config()));
  placed->SetTiled(std::move(tiled), std::move(layers), std::move(head));
  const int64_t rotary_dim = host->config().rotary_dim;
  placed->SetRope(RopeTable::Of(host->rotary(false), rotary_dim),
                  RopeTable::Of(host->rotary(true), rotary_dim));
  return std::unique_ptr<PlacedModel>(std::move(placed));
}

std::vector<bool> CudaBackend::TiledUnits(const Model& host, const GpuModelPlan& plan) const {
  std::vector<bool> tiled(host.units().size(), false);
  if (options_.fused_max_rows == 0 || device_->forward_ops() == nullptr) return tiled;
  // The units that hold a projection or the output head.
  const ModelConfig& c = host.config();
  std::vector<std::string> names = {LmHeadName(c)};
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::vector<std::string> layer = LayerTensorNames(c, l);
    names.insert(names.end(), layer.begin(), layer.begin() + 7);
  }
  for (const std::string& name : names) {
    if (name.empty()) continue;
    if (const absl::StatusOr<WeightLocation> w = host.Locate(name); w.ok() && w->unit >= 0) {
      tiled[w->unit] = true;
    }
  }
  // Of those, the ones made of matrices that tile, but not the embedding's (its rows are decoded
  // on their own).
  for (size_t u = 0; u < tiled.size(); ++u) {
    if (static_cast<int>(u) == plan.embedding_unit) tiled[u] = false;
    for (const std::vector<int64_t>& shape : host.units()[u]->shapes) {
      if (shape.size() != 2 || !codec::TiledMatrix::Supports(shape[0], shape[1])) tiled[u] = false;
    }
  }
  return tiled;
}

absl::Status CudaBackend::Upload(const Model& host, const GpuModelPlan& plan,
                                 ArenaAllocator::Id allocation, const PlaceProgressFn& progress,
                                 std::vector<std::vector<TiledTensor>>& tiled) {
  absl::MutexLock upload_lock(&upload_mu_);
  GpuDevice::Stream stream = upload_stream_->get();
  const auto units = host.units();
  const auto plain = host.plain_tensors();
  uint64_t total = 0;
  for (const codec::UnitSizes& s : plan.unit_sizes) {
    total += s.stream_bytes + s.elements + s.gaps_bytes + (s.blocks() + 1) * sizeof(uint32_t) +
             codec::gpu::kTableEntries * sizeof(uint32_t) + s.lut_bytes;
  }
  for (const auto& [name, bytes] : plain) total += bytes.size();
  uint64_t done = 0, reported = 0;
  size_t slot = 0;
  bool cancelled = false;
  if (progress && !progress(0, total)) return absl::CancelledError("load cancelled");

  // Copies `src` to `offset` in the allocation through the staging buffers: the host fills one
  // (reading the mapped file, from the page cache or the disk) while the copy engine drains the
  // others. Copies are packed into the buffers back to back, so that a unit's small tensors (gaps,
  // positions, tables) share one buffer instead of each waiting for a buffer of its own: a wait
  // for a buffer is a wait for the copy engine to drain up to it, which idles it meanwhile.
  uint64_t slot_used = 0;  // bytes of staging_[slot] already given to copies
  auto copy = [&](const void* src, uint64_t bytes, uint64_t offset) -> absl::Status {
    const auto* from = static_cast<const char*>(src);
    for (uint64_t at = 0; at < bytes;) {
      if (slot_used == options_.staging_bytes) {
        slot = (slot + 1) % staging_.size();
        slot_used = 0;
      }
      if (slot_used == 0)
        DF11_RETURN_IF_ERROR(device_->EventSynchronize(staging_done_[slot]->get()));
      const uint64_t n = std::min<uint64_t>(options_.staging_bytes - slot_used, bytes - at);
      char* staging = static_cast<char*>(staging_[slot]) + slot_used;
      if (n <= kFillPiece) {
        std::memcpy(staging, from + at, n);
      } else {
        copy_pool_.ParallelFor((n + kFillPiece - 1) / kFillPiece, 1, [&](size_t begin, size_t end) {
          const uint64_t first = begin * kFillPiece, last = std::min(n, end * kFillPiece);
          std::memcpy(staging + first, from + at + first, last - first);
        });
      }
      {
        absl::ReaderMutexLock lock(&mu_);
        DF11_RETURN_IF_ERROR(
            device_->CopyAsync(AddressLocked(allocation) + offset + at, staging, n, stream));
        // Recorded again after each copy from the buffer: waiting for it waits for all of them.
        DF11_RETURN_IF_ERROR(device_->Record(staging_done_[slot]->get(), stream));
      }
      slot_used = std::min(options_.staging_bytes, Align(slot_used + n, 256));
      at += n;
      done += n;
      if (progress && done - reported >= kReportBytes) {
        reported = done;
        if (!progress(std::min(done, total), total)) {
          cancelled = true;
          return absl::CancelledError("load cancelled");
        }
      }
    }
    return absl::OkStatus();
  };

  // Each unit, once its bytes are copied, gets its decoder layout built on the device and is
  // decoded once without output, on the check stream while the next unit's bytes copy: a corrupt
  // unit is kDataLoss now, naming it. Each of the two launches has its own slot, whose flag is
  // read when the slots run out and at the end.
  GpuDevice::Stream check = check_stream_->get();
  std::vector<size_t> checking;  // the unit of each pair of slots in use
  auto check_all = [&]() -> absl::Status {
    DF11_RETURN_IF_ERROR(device_->StreamSynchronize(check));
    absl::Status first;
    for (size_t k = 0; k < checking.size(); ++k) {
      for (size_t pass = 0; pass < 2 && first.ok(); ++pass) {
        const absl::Status s =
            device_->CheckDecoded(placement_workspace_ + (2 * k + pass) * slot_bytes_, check);
        if (absl::IsDataLoss(s)) {
          first = absl::DataLossError(absl::StrCat("DF11 unit ", units[checking[k]]->path, " of ",
                                                   host.directory(), ": ", s.message()));
        } else if (!s.ok()) {
          first = s;
        }
      }
    }
    checking.clear();
    return first;
  };
  auto check_unit = [&](size_t u) -> absl::Status {
    if (checking.size() == kPlacementChecks) DF11_RETURN_IF_ERROR(check_all());
    DF11_RETURN_IF_ERROR(device_->Record(unit_copied_->get(), stream));
    DF11_RETURN_IF_ERROR(device_->StreamWait(check, unit_copied_->get()));
    const size_t k = checking.size();
    checking.push_back(u);
    absl::ReaderMutexLock lock(&mu_);
    const codec::gpu::UnitView view = plan.layout.unit_images[u].View(
        AddressLocked(allocation) + plan.layout.unit_offsets[u], plan.unit_sizes[u], nullptr);
    DF11_RETURN_IF_ERROR(device_->BuildSegmentOffsets(
        std::span(&view, 1), placement_workspace_ + 2 * k * slot_bytes_, slot_bytes_, check));
    return device_->DecodeUnits(
        std::span(&view, 1), placement_workspace_ + (2 * k + 1) * slot_bytes_, slot_bytes_, check);
  };

  // Unit u as tiled matrices, when their images fit in its DF11 image's place (false: they do
  // not, and it keeps DF11's layout). The DF11 decoder checks the stream on the way.
  auto upload_tiled = [&](size_t u) -> absl::StatusOr<bool> {
    const codec::Df11Model::UnitEntry& entry = *units[u];
    std::vector<uint16_t> values(entry.unit->num_elements());
    if (absl::Status s = codec::UnitDecoder(*entry.unit).Decode(values, &tile_pool_); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("DF11 unit ", entry.path, " of ", host.directory(),
                                                 ": ", s.message()));
    }
    std::vector<codec::TiledMatrix> matrices;
    uint64_t element = 0, bytes = 0;
    for (const std::vector<int64_t>& shape : entry.shapes) {
      const uint64_t n = uint64_t(shape[0]) * uint64_t(shape[1]);
      DF11_ASSIGN_OR_RETURN(codec::TiledMatrix m,
                            codec::TiledMatrix::Build(std::span(values).subspan(element, n),
                                                      shape[0], shape[1], &tile_pool_));
      bytes += m.image().bytes;
      element += n;
      matrices.push_back(std::move(m));
    }
    if (bytes > plan.layout.unit_images[u].bytes) return false;
    std::vector<char> image;
    uint64_t at = plan.layout.unit_offsets[u];
    element = 0;
    for (const codec::TiledMatrix& m : matrices) {
      const codec::TiledImage i = m.image();
      image.resize(i.bytes);
      m.CopyImage(image.data());
      DF11_RETURN_IF_ERROR(copy(image.data(), i.bytes, at));
      tiled[u].push_back(TiledTensor{.element_offset = element, .offset = at, .image = i});
      element += m.num_elements();
      at += i.bytes;
    }
    return true;
  };

  auto upload_all = [&]() -> absl::Status {
    {
      absl::ReaderMutexLock lock(&mu_);
      DF11_RETURN_IF_ERROR(device_->MemsetAsync(AddressLocked(allocation), 0, plan.layout.bytes(),
                                                stream));  // padding is zero
    }
    const std::vector<bool> to_tile = TiledUnits(host, plan);
    for (size_t u = 0; u < units.size(); ++u) {
      const codec::Unit& unit = *units[u]->unit;
      if (to_tile[u]) {
        DF11_ASSIGN_OR_RETURN(const bool placed, upload_tiled(u));
        if (placed) continue;
      }
      const codec::UnitTensors& t = unit.tensors();
      const codec::GpuUnitImage& image = plan.layout.unit_images[u];
      const uint64_t at = plan.layout.unit_offsets[u];
      const std::vector<uint32_t> table = codec::BuildDecodeTable(unit);
      DF11_RETURN_IF_ERROR(
          copy(t.encoded_exponent.data(), t.encoded_exponent.size(), at + image.stream));
      DF11_RETURN_IF_ERROR(
          copy(t.sign_mantissa.data(), t.sign_mantissa.size(), at + image.sign_mantissa));
      DF11_RETURN_IF_ERROR(copy(t.gaps.data(), t.gaps.size(), at + image.gaps));
      DF11_RETURN_IF_ERROR(
          copy(unit.positions().data(), unit.positions().size_bytes(), at + image.positions));
      DF11_RETURN_IF_ERROR(copy(table.data(), table.size() * sizeof(uint32_t), at + image.table));
      DF11_RETURN_IF_ERROR(copy(t.luts.data(), t.luts.size(), at + image.luts));
      DF11_RETURN_IF_ERROR(check_unit(u));
    }
    for (size_t i = 0; i < plain.size(); ++i) {
      DF11_RETURN_IF_ERROR(
          copy(plain[i].second.data(), plain[i].second.size(), plan.layout.plain_offsets[i]));
    }
    return check_all();
  };
  absl::Status status = upload_all();
  // No copy or check may still be in flight into memory that is freed on an error.
  absl::Status synced = device_->StreamSynchronize(stream);
  if (synced.ok()) synced = device_->StreamSynchronize(check);
  if (status.ok()) status = synced;
  if (status.ok() && progress && !cancelled) progress(total, total);
  return status;
}

void CudaBackend::Release(CudaPlacedModel& model) {
  // As in Place: scratch shrinks only between passes.
  absl::MutexLock forward_lock(&forward_mu_);
  absl::MutexLock decode_lock(&decode_mu_);
  absl::MutexLock lock(&mu_);
  // A decode of this model may still be running.
  device_->StreamSynchronize(decode_stream_->get()).IgnoreError();
  for (DecodeSlot& slot : slots_) {
    if (slot.model == &model) slot.pending = false;
  }
  models_.erase(&model);
  arena_.Free(model.allocation());
  ResizeScratchLocked({0, 0}).IgnoreError();  // shrinking never fails: its ranges were just freed
}

absl::StatusOr<std::unique_ptr<KvCache>> CudaBackend::NewCache(const ModelConfig& config,
                                                               int64_t capacity) {
  if (kv_pool_->pages() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(device_name_, " has no KV pool (memory.kv_cache is 0)"));
  }
  DF11_ASSIGN_OR_RETURN(KvPageTable table, kv_pool_->Reserve(KvBytesPerPosition(config), capacity));
  return std::make_unique<CudaKvCache>(*kv_pool_, std::move(table), capacity);
}

absl::Status CudaBackend::Forward(const PlacedModel& model, std::span<const SequenceStep> batch,
                                  std::span<float> logits) {
  const CudaPlacedModel* m = Mine(model);
  if (m == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Forward: the model is placed on ", std::string(model.device()), ", not ", device_name_));
  }
  ForwardOps* ops = device_->forward_ops();
  if (ops == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "generation on ", device_name_,
        " is not available yet: the CUDA backend holds this model and decodes its blocks, but its "
        "forward-pass kernels are not built; serve the model from a node with devices: [cpu]"));
  }
  const ModelConfig& c = m->config();
  const int64_t V = c.vocab_size;
  const int64_t S = static_cast<int64_t>(batch.size());
  if (batch.empty()) return absl::InvalidArgumentError("Forward: empty batch");
  if (logits.size() < static_cast<size_t>(S * V)) {
    return absl::InvalidArgumentError(absl::StrCat("Forward: logits hold ", logits.size(),
                                                   " values; ", S, " sequences need ", S * V));
  }
  int64_t rows = 0;
  for (const SequenceStep& s : batch) {
    const auto* cache = dynamic_cast<const CudaKvCache*>(s.cache);
    if (cache == nullptr || &cache->pool() != kv_pool_.get()) {
      return absl::InvalidArgumentError("Forward: a KV cache made by another backend");
    }
    if (s.tokens.empty()) return absl::InvalidArgumentError("Forward: a sequence without tokens");
    if (s.cache->length() + static_cast<int64_t>(s.tokens.size()) > s.cache->capacity()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the KV cache holds ", s.cache->capacity(), " positions; ",
                       s.cache->length(), " are used and ", s.tokens.size(), " more were given"));
    }
    for (int32_t t : s.tokens) {
      if (t < 0 || t >= V) {
        return absl::InvalidArgumentError(
            absl::StrCat("token id ", t, " is outside the vocabulary of ", V));
      }
    }
    rows += static_cast<int64_t>(s.tokens.size());
  }
  absl::MutexLock forward_lock(&forward_mu_);
  const int64_t limit = static_cast<int64_t>(options_.max_pass_tokens);
  if (rows <= limit) return ForwardPass(*m, *ops, batch, logits);
  // Long prompts in passes of at most `limit` tokens, each sequence's tokens in order: a pass
  // writes its keys and values before the next reads them. A sequence's logits are those of the
  // pass that holds its last token.
  std::vector<size_t> done(batch.size(), 0);
  std::vector<SequenceStep> pass;
  std::vector<size_t> owner;
  std::vector<float> pass_logits;
  while (true) {
    pass.clear();
    owner.clear();
    int64_t room = limit;
    for (size_t i = 0; i < batch.size() && room > 0; ++i) {
      const size_t left = batch[i].tokens.size() - done[i];
      if (left == 0) continue;
      const size_t take = std::min<size_t>(left, static_cast<size_t>(room));
      pass.push_back({batch[i].cache, batch[i].tokens.subspan(done[i], take)});
      owner.push_back(i);
      room -= static_cast<int64_t>(take);
    }
    if (pass.empty()) return absl::OkStatus();
    pass_logits.resize(pass.size() * V);
    DF11_RETURN_IF_ERROR(ForwardPass(*m, *ops, pass, pass_logits));
    for (size_t k = 0; k < pass.size(); ++k) {
      const size_t i = owner[k];
      done[i] += pass[k].tokens.size();
      if (done[i] == batch[i].tokens.size()) {
        std::copy_n(pass_logits.begin() + k * V, V, logits.begin() + i * V);
      }
    }
  }
}

// The CUDA backend's DecoderOps: one pass of one model, its operations enqueued on the compute
// stream with the device's ForwardOps. Activations are BF16 in the pass's buffers, except the
// fp32 residual stream (kResidual) and the projections into it (kBranch). Layer l + 1 decodes
// on the decode stream while layer l computes, into the other scratch buffer; in a pass of at most
// fused_max_rows tokens, tiled projections are multiplied by without decoding them.
//
// Each operation derives the device addresses it uses under mu_ held shared (compaction, which
// takes it exclusively, waits for every stream first), so an address never outlives the lock
// that made it.
class CudaBackend::Pass final : public DecoderOps {
 public:
  Pass(CudaBackend& backend, const CudaPlacedModel& m, ForwardOps& ops,
       std::span<const SequenceStep> batch, std::span<const int32_t> tokens,
       std::span<const uint32_t> pages, std::span<const int32_t> row_first_page,
       std::span<const int32_t> row_position, uint64_t positions_per_page,
       const ForwardBuffers& buffers, std::span<float> logits)
      : b_(backend),
        m_(m),
        c_(m.config()),
        ops_(ops),
        batch_(batch),
        tokens_(tokens),
        pages_(pages),
        row_first_page_(row_first_page),
        row_position_(row_position),
        positions_per_page_(positions_per_page),
        buffers_(buffers),
        logits_(logits),
        rows_(static_cast<int64_t>(tokens.size())),
        stream_(backend.compute_stream_->get()),
        short_pass_(rows_ <= backend.options_.fused_max_rows) {}

  // The KV metadata, then the embedding rows of the tokens (a launch's worth at a time), gathered
  // into kNormed and widened into the residual stream with the config's scale.
  absl::Status Embed() override {
    {
      absl::ReaderMutexLock lock(&b_.mu_);
      char* base = Base();
      DF11_RETURN_IF_ERROR(
          b_.device_->CopyAsync(base + buffers_.pages, pages_.data(), pages_.size_bytes(), stream_));
      DF11_RETURN_IF_ERROR(b_.device_->CopyAsync(base + buffers_.row_first_page,
                                                 row_first_page_.data(),
                                                 row_first_page_.size_bytes(), stream_));
      DF11_RETURN_IF_ERROR(b_.device_->CopyAsync(base + buffers_.row_position,
                                                 row_position_.data(), row_position_.size_bytes(),
                                                 stream_));
    }
    const int64_t H = c_.hidden_size;
    const int64_t per_call = std::max<int64_t>(1, b_.EmbeddingRowsPerCall(m_));
    std::vector<DeviceTensor> embedded(std::min(per_call, rows_));
    for (int64_t first = 0; first < rows_; first += per_call) {
      const int64_t n = std::min(per_call, rows_ - first);
      DF11_RETURN_IF_ERROR(b_.DecodeEmbeddingRows(m_, tokens_.subspan(first, n), embedded));
      absl::ReaderMutexLock lock(&b_.mu_);
      DF11_RETURN_IF_ERROR(b_.device_->StreamWait(stream_, b_.scratch_ready_[1]->get()));
      for (int64_t k = 0; k < n; ++k) {
        DF11_RETURN_IF_ERROR(b_.device_->CopyAsync(Bf16(Activations::kNormed) + (first + k) * H,
                                                   Tensor(embedded[k]), H * 2, stream_));
      }
      DF11_RETURN_IF_ERROR(b_.device_->Record(b_.scratch_free_[1]->get(), stream_));
    }
    absl::ReaderMutexLock lock(&b_.mu_);
    return ops_.Widen(Bf16(Activations::kNormed), rows_ * H, c_.embedding_scale,
                      F32(Activations::kResidual), stream_);
  }

  // Layer l computes from scratch buffer l % 2 while layer l + 1 decodes into the other.
  absl::Status BeginLayer(int64_t l) override {
    if (l == 0) DF11_RETURN_IF_ERROR(b_.DecodeLayerUnits(m_, 0, 0, SkipTiled(0)));
    if (l + 1 < c_.num_layers) {
      DF11_RETURN_IF_ERROR(b_.DecodeLayerUnits(m_, l + 1, 1 - Buffer(l), SkipTiled(l + 1)));
    }
    layer_ = l;
    tiled_ = short_pass_ ? m_.fused_layer(l) : nullptr;
    absl::ReaderMutexLock lock(&b_.mu_);
    return b_.device_->StreamWait(stream_, b_.scratch_ready_[Buffer(l)]->get());
  }

  absl::Status Norm(Activations in, LayerWeight weight, Activations out) override {
    if (!IsF32(in)) return Unsupported("a norm of BF16 rows of the hidden size");
    absl::ReaderMutexLock lock(&b_.mu_);
    return ops_.FloatRmsNorm(F32(in), Weight(weight), rows_, c_.hidden_size, Eps(),
                             c_.norm_weight_offset, Address(out), IsF32(out), stream_);
  }

  absl::Status Project(Activations in, std::span<const Product> products) override {
    if (IsF32(in)) return Unsupported("a product of fp32 rows");
    absl::ReaderMutexLock lock(&b_.mu_);
    const bool y_fp32 = IsF32(products.front().out);
    for (const Product& p : products) {
      if (IsF32(p.out) != y_fp32) return Unsupported("products of one input into mixed types");
    }
    const uint16_t* x = Bf16(in);
    const char* allocation = b_.AddressLocked(m_.allocation());
    auto is_tiled = [&](const Product& p) {
      return tiled_ != nullptr && tiled_->projections[Index(p.weight)].has_value();
    };
    auto tiled_product = [&](const Product& p) {
      return ForwardOps::TiledProduct{.w = tiled_->projections[Index(p.weight)]->View(allocation),
                                      .bias = Weight(BiasOf(p.weight)),
                                      .y = Address(p.out)};
    };
    // Every weight tiled: one launch for all of them.
    if (std::all_of(products.begin(), products.end(), is_tiled)) {
      absl::InlinedVector<ForwardOps::TiledProduct, 3> tiled;
      for (const Product& p : products) tiled.push_back(tiled_product(p));
      return ops_.TiledLinear(x, rows_, tiled, y_fp32, stream_);
    }
    // Adjacent weights in a short pass: one product, split into the outputs.
    if (products.size() > 1 && Adjacent(products.front().weight) && rows_ <= kGroupedMaxRows &&
        std::none_of(products.begin(), products.end(), is_tiled)) {
      int64_t width = 0;
      absl::InlinedVector<ForwardOps::ColumnRange, 3> split;
      for (const Product& p : products) {
        split.push_back({width, Width(p.out), static_cast<uint16_t*>(Address(p.out))});
        width += Width(p.out);
      }
      const LayerWeight first = products.front().weight;
      uint16_t* grouped = reinterpret_cast<uint16_t*>(Base() + buffers_.grouped);
      DF11_RETURN_IF_ERROR(ops_.Linear(x, Weight(first), Weight(BiasOf(first)), rows_, Width(in),
                                       width, grouped, false, stream_));
      return ops_.SplitColumns(grouped, rows_, width, split, stream_);
    }
    for (const Product& p : products) {
      if (is_tiled(p)) {
        const ForwardOps::TiledProduct one[] = {tiled_product(p)};
        DF11_RETURN_IF_ERROR(ops_.TiledLinear(x, rows_, one, y_fp32, stream_));
      } else {
        DF11_RETURN_IF_ERROR(ops_.Linear(x, Weight(p.weight), Weight(BiasOf(p.weight)), rows_,
                                         Width(in), Width(p.out), Address(p.out), y_fp32,
                                         stream_));
      }
    }
    return absl::OkStatus();
  }

  absl::Status PrepareHeads() override {
    const int64_t nh = c_.num_heads, nkv = c_.num_kv_heads, d = c_.head_dim;
    const bool sliding = c_.SlidingWindow(layer_) > 0;
    const absl::StatusOr<RopeTable>& rope = m_.rope(sliding);
    if (!rope.ok()) return rope.status();
    absl::ReaderMutexLock lock(&b_.mu_);
    uint16_t *q = Bf16(Activations::kQuery), *k = Bf16(Activations::kKey);
    const float offset = c_.norm_weight_offset;
    if (const uint16_t* q_norm = Weight(LayerWeight::kQNorm); q_norm != nullptr) {
      DF11_RETURN_IF_ERROR(ops_.RmsNorm(q, q_norm, rows_ * nh, d, Eps(), offset, q, stream_));
      DF11_RETURN_IF_ERROR(ops_.RmsNorm(k, Weight(LayerWeight::kKNorm), rows_ * nkv, d, Eps(),
                                        offset, k, stream_));
    }
    const PagedKv kv = Kv();
    DF11_RETURN_IF_ERROR(ops_.Rope(q, rows_, nh, d, kv.row_position, *rope, stream_));
    return ops_.Rope(k, rows_, nkv, d, kv.row_position, *rope, stream_);
  }

  // Keys and values go into the pages first: a sliding layer's pages hold every position, and
  // attention reads only the window.
  absl::Status Attend() override {
    absl::ReaderMutexLock lock(&b_.mu_);
    const PagedKv kv = Kv();
    DF11_RETURN_IF_ERROR(
        ops_.WriteKv(Bf16(Activations::kKey), Bf16(Activations::kValue), rows_, kv, stream_));
    const AttentionShape shape{.heads = c_.num_heads,
                               .kv_heads = c_.num_kv_heads,
                               .head_dim = c_.head_dim,
                               .window = c_.SlidingWindow(layer_),
                               .scale = c_.attention_scale,
                               .softcap = c_.attention_softcap};
    return ops_.Attention(Bf16(Activations::kQuery), rows_, shape, kv,
                          Bf16(Activations::kAttention), stream_);
  }

  absl::Status AddBranchAndNorm(LayerWeight norm, Activations out) override {
    DF11_RETURN_IF_ERROR(AddBranch());
    return Norm(Activations::kResidual, norm, out);
  }

  absl::Status GatedDown() override {
    {
      absl::ReaderMutexLock lock(&b_.mu_);
      uint16_t* gate = Bf16(Activations::kGate);
      DF11_RETURN_IF_ERROR(ops_.GatedActivation(gate, Bf16(Activations::kUp),
                                                rows_ * c_.intermediate_size, c_.activation, gate,
                                                stream_));
    }
    const Product down[] = {{LayerWeight::kDown, Activations::kBranch}};
    return Project(Activations::kGate, down);
  }

  absl::Status AddBranch() override {
    absl::ReaderMutexLock lock(&b_.mu_);
    return ops_.Add(F32(Activations::kResidual), F32(Activations::kBranch),
                    rows_ * c_.hidden_size, stream_);
  }

  // The layer's reads of its scratch buffer are enqueued: the next decode into it may follow.
  absl::Status EndLayer(int64_t l) override {
    absl::ReaderMutexLock lock(&b_.mu_);
    return b_.device_->Record(b_.scratch_free_[Buffer(l)]->get(), stream_);
  }

  // Each sequence's last row: the final norm, then the output head, into fp32 logits copied to
  // the host; then every decode of the pass is checked.
  absl::Status Logits() override {
    const int64_t H = c_.hidden_size, V = c_.vocab_size;
    const int64_t S = static_cast<int64_t>(batch_.size());
    const bool tiled_head = short_pass_ && m_.fused_head().has_value();
    if (!tiled_head) DF11_RETURN_IF_ERROR(b_.DecodeLmHead(m_));
    {
      absl::ReaderMutexLock lock(&b_.mu_);
      const int head_buffer = m_.plan().head_buffer;
      DF11_RETURN_IF_ERROR(b_.device_->StreamWait(stream_, b_.scratch_ready_[head_buffer]->get()));
      float* last_x = reinterpret_cast<float*>(Base() + buffers_.last_x);
      uint16_t* last = reinterpret_cast<uint16_t*>(Base() + buffers_.last);
      int64_t r = 0;
      for (int64_t s = 0; s < S; ++s) {
        r += static_cast<int64_t>(batch_[s].tokens.size());
        DF11_RETURN_IF_ERROR(b_.device_->CopyAsync(
            last_x + s * H, F32(Activations::kResidual) + (r - 1) * H, H * 4, stream_));
      }
      const uint16_t* final_norm = Tensor(DeviceTensor{.space = DeviceTensor::Space::kModel,
                                                       .offset = m_.plan().final_norm.offset,
                                                       .bytes = m_.plan().final_norm.bytes});
      DF11_RETURN_IF_ERROR(ops_.FloatRmsNorm(last_x, final_norm, S, H, Eps(),
                                             c_.norm_weight_offset, last, false, stream_));
      auto* out = reinterpret_cast<float*>(Base() + buffers_.logits);
      if (tiled_head) {
        const ForwardOps::TiledProduct head[] = {
            {.w = m_.fused_head()->View(b_.AddressLocked(m_.allocation())), .y = out}};
        DF11_RETURN_IF_ERROR(ops_.TiledLinear(last, S, head, true, stream_));
      } else {
        DF11_RETURN_IF_ERROR(
            ops_.Linear(last, Tensor(LmHeadOf(m_.plan())), nullptr, S, H, V, out, true, stream_));
      }
      if (c_.final_logit_softcap > 0) {
        DF11_RETURN_IF_ERROR(ops_.SoftCap(out, S * V, c_.final_logit_softcap, stream_));
      }
      DF11_RETURN_IF_ERROR(b_.device_->Record(b_.scratch_free_[head_buffer]->get(), stream_));
      DF11_RETURN_IF_ERROR(b_.device_->CopyAsync(logits_.data(), out, S * V * 4, stream_));
    }
    DF11_RETURN_IF_ERROR(b_.device_->StreamSynchronize(stream_));
    return b_.FinishDecodes();
  }

 private:
  static int Buffer(int64_t layer) { return static_cast<int>(layer % 2); }
  static size_t Index(LayerWeight w) { return static_cast<size_t>(w); }
  float Eps() const { return static_cast<float>(c_.rms_norm_eps); }
  // In a short pass, a layer whose tiled units all have their sources here decodes none of them.
  bool SkipTiled(int64_t l) const {
    const CudaPlacedModel::FusedLayer* f = short_pass_ ? m_.fused_layer(l) : nullptr;
    return f != nullptr && f->complete;
  }
  // q, k and v (gate and up) stored side by side, so that one product computes them.
  bool Adjacent(LayerWeight first) const {
    const LayerPlan& layer = m_.plan().layers[layer_];
    return first == LayerWeight::kQ ? layer.qkv_adjacent
                                    : first == LayerWeight::kGate && layer.gate_up_adjacent;
  }

  static bool IsF32(Activations a) {
    return a == Activations::kResidual || a == Activations::kBranch;
  }
  int64_t Width(Activations a) const {
    switch (a) {
      case Activations::kQuery:
      case Activations::kAttention: return c_.num_heads * c_.head_dim;
      case Activations::kKey:
      case Activations::kValue: return c_.num_kv_heads * c_.head_dim;
      case Activations::kGate:
      case Activations::kUp: return c_.intermediate_size;
      default: return c_.hidden_size;
    }
  }
  uint64_t Offset(Activations a) const {
    switch (a) {
      case Activations::kResidual: return buffers_.x;
      case Activations::kNormed: return buffers_.h;
      case Activations::kQuery: return buffers_.q;
      case Activations::kKey: return buffers_.k;
      case Activations::kValue: return buffers_.v;
      case Activations::kAttention: return buffers_.attn;
      case Activations::kGate: return buffers_.gate;
      case Activations::kUp: return buffers_.up;
      case Activations::kBranch: return buffers_.tmp;
    }
    return 0;
  }
  char* Base() const ABSL_SHARED_LOCKS_REQUIRED(b_.mu_) { return b_.AddressLocked(buffers_.id); }
  void* Address(Activations a) const ABSL_SHARED_LOCKS_REQUIRED(b_.mu_) {
    return Base() + Offset(a);
  }
  uint16_t* Bf16(Activations a) const ABSL_SHARED_LOCKS_REQUIRED(b_.mu_) {
    return static_cast<uint16_t*>(Address(a));
  }
  float* F32(Activations a) const ABSL_SHARED_LOCKS_REQUIRED(b_.mu_) {
    return static_cast<float*>(Address(a));
  }
  const uint16_t* Tensor(const DeviceTensor& t) const ABSL_SHARED_LOCKS_REQUIRED(b_.mu_) {
    if (t.space == DeviceTensor::Space::kAbsent) return nullptr;
    const ArenaAllocator::Id id = t.space == DeviceTensor::Space::kModel      ? m_.allocation()
                                  : t.space == DeviceTensor::Space::kScratch0 ? b_.scratch_[0]
                                                                              : b_.scratch_[1];
    return reinterpret_cast<const uint16_t*>(b_.AddressLocked(id) + t.offset);
  }
  // The current layer's weight (nullptr when it has none), decoded or resident.
  const uint16_t* Weight(LayerWeight w) const ABSL_SHARED_LOCKS_REQUIRED(b_.mu_) {
    return Tensor(LayerTensorOf(m_.plan(), layer_, Buffer(layer_), Index(w)));
  }
  PagedKv Kv() const ABSL_SHARED_LOCKS_REQUIRED(b_.mu_) {
    return PagedKv{
        .pool = b_.AddressLocked(b_.kv_pool_id_),
        .page_bytes = b_.kv_pool_->page_bytes(),
        .positions_per_page = static_cast<int64_t>(positions_per_page_),
        .layer = layer_,
        .kv_heads = c_.num_kv_heads,
        .head_dim = c_.head_dim,
        .pages = reinterpret_cast<const uint32_t*>(Base() + buffers_.pages),
        .row_first_page = reinterpret_cast<const int32_t*>(Base() + buffers_.row_first_page),
        .row_position = reinterpret_cast<const int32_t*>(Base() + buffers_.row_position)};
  }
  absl::Status Unsupported(const char* what) const {
    return absl::InternalError(absl::StrCat("the CUDA backend has no ", what));
  }

  CudaBackend& b_;
  const CudaPlacedModel& m_;
  const ModelConfig& c_;
  ForwardOps& ops_;
  const std::span<const SequenceStep> batch_;
  const std::span<const int32_t> tokens_;
  const std::span<const uint32_t> pages_;
  const std::span<const int32_t> row_first_page_, row_position_;
  const uint64_t positions_per_page_;
  const ForwardBuffers& buffers_;
  const std::span<float> logits_;
  const int64_t rows_;
  const GpuDevice::Stream stream_;
  const bool short_pass_;
  int64_t layer_ = 0;
  const CudaPlacedModel::FusedLayer* tiled_ = nullptr;  // the current layer's, in short passes
};

absl::Status CudaBackend::ForwardPass(const CudaPlacedModel& m, ForwardOps& ops,
                                      std::span<const SequenceStep> batch,
                                      std::span<float> logits) {
  const ModelConfig& c = m.config();
  const int64_t H = c.hidden_size, V = c.vocab_size, I = c.intermediate_size;
  const int64_t nh = c.num_heads, nkv = c.num_kv_heads, d = c.head_dim;
  const int64_t S = static_cast<int64_t>(batch.size());
  // Per row: its position and its sequence's first page in `pages`.
  std::vector<uint32_t> pages;
  std::vector<int32_t> row_first_page, row_position, tokens;
  uint64_t positions_per_page = 0;
  for (const SequenceStep& s : batch) {
    const auto* cache = static_cast<const CudaKvCache*>(s.cache);
    positions_per_page = cache->table().positions_per_page;
    for (size_t t = 0; t < s.tokens.size(); ++t) {
      row_first_page.push_back(static_cast<int32_t>(pages.size()));
      row_position.push_back(static_cast<int32_t>(s.cache->length() + t));
    }
    pages.insert(pages.end(), cache->table().pages.begin(), cache->table().pages.end());
    tokens.insert(tokens.end(), s.tokens.begin(), s.tokens.end());
  }
  const int64_t rows = static_cast<int64_t>(tokens.size());

  // The pass's buffers, one arena allocation: activations, logits and the KV metadata.
  ForwardBuffers b;
  uint64_t bytes = 0;
  auto take = [&bytes](uint64_t& at, uint64_t n) {
    at = bytes;
    bytes += (n + 255) / 256 * 256;
  };
  take(b.x, rows * H * 4);
  take(b.h, rows * H * 2);
  take(b.tmp, rows * H * 4);
  take(b.q, rows * nh * d * 2);
  take(b.k, rows * nkv * d * 2);
  take(b.v, rows * nkv * d * 2);
  take(b.attn, rows * nh * d * 2);
  take(b.gate, rows * I * 2);
  take(b.up, rows * I * 2);
  if (rows <= kGroupedMaxRows) take(b.grouped, rows * std::max(nh * d + 2 * nkv * d, 2 * I) * 2);
  take(b.last, S * H * 2);
  take(b.last_x, S * H * 4);
  take(b.logits, S * V * 4);
  take(b.pages, pages.size() * 4);
  take(b.row_first_page, rows * 4);
  take(b.row_position, rows * 4);
  // The buffers stay allocated from pass to pass (no arena work on the per-token path); they grow
  // when a pass needs more.
  {
    absl::MutexLock lock(&mu_);
    if (forward_id_ != 0 && arena_.size(forward_id_) < bytes) {
      arena_.Free(forward_id_);
      forward_id_ = 0;
    }
    if (forward_id_ == 0) {
      DF11_ASSIGN_OR_RETURN(forward_id_, AllocateLocked(bytes, "the forward pass's buffers"));
    }
    b.id = forward_id_;
    forward_busy_ = true;
  }
  absl::Status status;
  {
    Pass pass(*this, m, ops, batch, tokens, pages, row_first_page, row_position,
              positions_per_page, b, logits);
    status = RunDecoder(c, pass);
  }
  // Every launch that reads the buffers has finished before another allocation may take them.
  absl::Status synced = device_->StreamSynchronize(compute_stream_->get());
  // The tiled products' error flag, read (and cleared) on every path, so that a pass that stopped
  // early leaves nothing to the next.
  if (rows <= options_.fused_max_rows && m.tiled_units() > 0) {
    if (absl::Status s = ops.CheckTiled(compute_stream_->get()); !s.ok() && synced.ok()) {
      synced = absl::Status(s.code(), absl::StrCat("a forward pass of ", m.label(), " on ",
                                                   device_name_, ": ", s.message()));
    }
  }
  {
    absl::MutexLock lock(&mu_);
    forward_busy_ = false;
  }
  DF11_RETURN_IF_ERROR(status);
  DF11_RETURN_IF_ERROR(synced);
  for (const SequenceStep& s : batch) {
    static_cast<CudaKvCache*>(s.cache)->Advance(static_cast<int64_t>(s.tokens.size()));
  }
  return absl::OkStatus();
}

size_t CudaBackend::tiled_units(const PlacedModel& model) const {
  const CudaPlacedModel* m = Mine(model);
  return m == nullptr ? 0 : m->tiled_units();
}

bool CudaBackend::fused(const PlacedModel& model, int64_t layer) const {
  const CudaPlacedModel* m = Mine(model);
  if (m == nullptr) return false;
  return layer < 0 ? m->fused_head().has_value() : m->fused_layer(layer) != nullptr;
}

BackendMemory CudaBackend::Memory() const {
  BackendMemory m;
  if (absl::StatusOr<GpuDevice::MemoryInfo> info = device_->GetMemoryInfo(); info.ok()) {
    m.device_total = info->total;
    m.device_free = info->free;
  }
  absl::ReaderMutexLock lock(&mu_);
  m.arena = arena_.capacity();
  for (ArenaAllocator::Id id : scratch_) m.scratch += id != 0 ? arena_.size(id) : 0;
  m.workspace = arena_.size(workspace_id_) + (forward_id_ != 0 ? arena_.size(forward_id_) : 0);
  m.kv_pool = kv_pool_id_ != 0 ? arena_.size(kv_pool_id_) : 0;
  m.kv_cache = kv_pool_->used_bytes();
  m.kv_pool_free = m.kv_pool - m.kv_cache;
  return m;
}

uint64_t CudaBackend::KvBytesPerPosition(const ModelConfig& config) const {
  return 2 * static_cast<uint64_t>(config.num_layers * config.num_kv_heads * config.head_dim) *
         sizeof(uint16_t);
}

const CudaPlacedModel* CudaBackend::Mine(const PlacedModel& model) const {
  const auto* m = dynamic_cast<const CudaPlacedModel*>(&model);
  return m != nullptr && m->backend() == this ? m : nullptr;
}

absl::StatusOr<CudaBackend::DecodeSlot*> CudaBackend::NextSlotLocked() {
  DecodeSlot& slot = slots_[next_slot_];
  if (slot.pending) DF11_RETURN_IF_ERROR(FinishDecodesLocked());
  return &slot;
}

absl::Status CudaBackend::LaunchLocked(DecodeSlot& slot, const DecodeSlot& what, int buffer,
                                       bool tiled) {
  GpuDevice::Stream stream = decode_stream_->get();
  // Not before the forward pass has finished reading what the buffer held; then mark it decoded.
  DF11_RETURN_IF_ERROR(device_->StreamWait(stream, scratch_free_[buffer]->get()));
  if (tiled) {
    DF11_RETURN_IF_ERROR(
        device_->DecodeTiled(tiled_views_, workspace_ + slot.offset, slot_bytes_, stream));
  } else {
    DF11_RETURN_IF_ERROR(
        device_->DecodeUnits(views_, workspace_ + slot.offset, slot_bytes_, stream));
  }
  DF11_RETURN_IF_ERROR(device_->Record(scratch_ready_[buffer]->get(), stream));
  slot.pending = true;
  slot.model = what.model;
  slot.what = what.what;
  slot.layer = what.layer;
  next_slot_ = (next_slot_ + 1) % slots_.size();
  return absl::OkStatus();
}

absl::Status CudaBackend::DecodeStepLocked(const CudaPlacedModel& m, const DecodeStep& step,
                                           int buffer, bool skip_tiled, const DecodeSlot& what) {
  for (const bool tiled : {false, true}) {
    if (tiled && skip_tiled) continue;
    const auto in_layout = [&](int u) { return m.tiled(u).empty() != tiled; };
    if (std::none_of(step.units.begin(), step.units.end(), in_layout)) continue;
    DF11_ASSIGN_OR_RETURN(DecodeSlot * slot, NextSlotLocked());
    absl::ReaderMutexLock lock(&mu_);
    if (step.scratch_elements > scratch_elements_[buffer]) {
      return absl::InvalidArgumentError(absl::StrCat("decoding ", step.scratch_elements,
                                                     " elements into scratch buffer ", buffer,
                                                     ", which holds ", scratch_elements_[buffer]));
    }
    const GpuPlacementLayout& layout = m.plan().layout;
    const char* base = AddressLocked(m.allocation());
    auto* out = reinterpret_cast<uint16_t*>(AddressLocked(scratch_[buffer]));
    views_.clear();
    tiled_views_.clear();
    for (size_t i = 0; i < step.units.size(); ++i) {
      const int u = step.units[i];
      if (!in_layout(u)) continue;
      uint16_t* unit_out = out + step.scratch_offsets[i];
      if (!tiled) {
        views_.push_back(layout.unit_images[u].View(base + layout.unit_offsets[u],
                                                    m.plan().unit_sizes[u], unit_out));
        continue;
      }
      for (const TiledTensor& t : m.tiled(u)) {
        tiled_views_.push_back({.matrix = t.image.View(base + t.offset),
                                .out = unit_out + t.element_offset,
                                .ld = t.image.cols});
      }
    }
    if (tiled_views_.size() > codec::gpu::kMaxUnitsPerLaunch) {
      return absl::InvalidArgumentError(absl::StrCat(tiled_views_.size(),
                                                     " tiled matrices in one decode; at most ",
                                                     codec::gpu::kMaxUnitsPerLaunch));
    }
    DF11_RETURN_IF_ERROR(LaunchLocked(*slot, what, buffer, tiled));
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::FinishDecodes() {
  absl::MutexLock lock(&decode_mu_);
  return FinishDecodesLocked();
}

absl::Status CudaBackend::FinishDecodesLocked() {
  DF11_RETURN_IF_ERROR(device_->StreamSynchronize(decode_stream_->get()));
  absl::Status first;
  for (DecodeSlot& slot : slots_) {
    if (!slot.pending) continue;
    slot.pending = false;
    const absl::Status s = device_->CheckDecoded(workspace_ + slot.offset, decode_stream_->get());
    if (s.ok() || !first.ok()) continue;
    const std::string what = slot.what == DecodeSlot::What::kLayer
                                 ? absl::StrCat("layer ", slot.layer)
                             : slot.what == DecodeSlot::What::kHead ? std::string("the output head")
                                                                    : std::string("embedding rows");
    first = absl::Status(s.code(), absl::StrCat("decoding ", what, " of ", slot.model->label(),
                                                " on ", device_name_, ": ", s.message()));
  }
  return first;
}

absl::Status CudaBackend::DecodeLayer(const PlacedModel& model, int64_t layer, int buffer) {
  const CudaPlacedModel* m = Mine(model);
  if (m == nullptr) return absl::InvalidArgumentError("DecodeLayer: a model of another backend");
  return DecodeLayerUnits(*m, layer, buffer, /*skip_tiled=*/false);
}

absl::Status CudaBackend::DecodeLayerUnits(const CudaPlacedModel& m, int64_t layer, int buffer,
                                           bool skip_tiled) {
  if (layer < 0 || layer >= static_cast<int64_t>(m.plan().layers.size()) || buffer < 0 ||
      buffer > 1) {
    return absl::InvalidArgumentError(absl::StrCat("DecodeLayer: layer ", layer, " of ",
                                                   m.plan().layers.size(), ", buffer ", buffer));
  }
  const DecodeStep& step = m.plan().layers[layer].decode;
  if (step.units.empty()) return absl::OkStatus();
  absl::MutexLock decode_lock(&decode_mu_);
  return DecodeStepLocked(
      m, step, buffer, skip_tiled,
      DecodeSlot{.model = &m, .what = DecodeSlot::What::kLayer, .layer = layer});
}

absl::Status CudaBackend::DecodeLmHead(const PlacedModel& model) {
  const CudaPlacedModel* m = Mine(model);
  if (m == nullptr) return absl::InvalidArgumentError("DecodeLmHead: a model of another backend");
  const GpuModelPlan& plan = m->plan();
  if (plan.head_decode.units.empty()) return absl::OkStatus();
  absl::MutexLock decode_lock(&decode_mu_);
  return DecodeStepLocked(*m, plan.head_decode, plan.head_buffer, /*skip_tiled=*/false,
                          DecodeSlot{.model = m, .what = DecodeSlot::What::kHead});
}

int64_t CudaBackend::EmbeddingRowsPerCall(const PlacedModel& model) const {
  const CudaPlacedModel* m = Mine(model);
  if (m == nullptr) return 0;
  if (m->plan().embedding_unit < 0) return std::numeric_limits<int64_t>::max();
  absl::ReaderMutexLock lock(&mu_);
  return static_cast<int64_t>(std::min<uint64_t>(
      codec::gpu::kMaxUnitsPerLaunch, scratch_elements_[1] / m->plan().embedding_row_span));
}

absl::Status CudaBackend::DecodeEmbeddingRows(const PlacedModel& model,
                                              std::span<const int32_t> tokens,
                                              std::span<DeviceTensor> rows) {
  const CudaPlacedModel* m = Mine(model);
  if (m == nullptr)
    return absl::InvalidArgumentError("DecodeEmbeddingRows: a model of another backend");
  const GpuModelPlan& plan = m->plan();
  const int64_t hidden = m->config().hidden_size, vocab = m->config().vocab_size;
  if (rows.size() < tokens.size()) {
    return absl::InvalidArgumentError(absl::StrCat("DecodeEmbeddingRows: ", tokens.size(),
                                                   " tokens, room for ", rows.size(), " rows"));
  }
  for (int32_t t : tokens) {
    if (t < 0 || t >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", t, " is outside the vocabulary of ", vocab));
    }
  }
  const uint64_t row_bytes = static_cast<uint64_t>(hidden) * sizeof(uint16_t);
  if (plan.embedding_unit < 0) {
    for (size_t k = 0; k < tokens.size(); ++k) {
      rows[k] = DeviceTensor{.space = DeviceTensor::Space::kModel,
                             .offset = plan.embedding.offset + uint64_t(tokens[k]) * row_bytes,
                             .bytes = row_bytes};
    }
    return absl::OkStatus();
  }
  if (static_cast<int64_t>(tokens.size()) > EmbeddingRowsPerCall(model)) {
    return absl::InvalidArgumentError(absl::StrCat("DecodeEmbeddingRows: ", tokens.size(),
                                                   " tokens; at most ", EmbeddingRowsPerCall(model),
                                                   " per call"));
  }
  if (tokens.empty()) return absl::OkStatus();
  absl::MutexLock decode_lock(&decode_mu_);
  DF11_ASSIGN_OR_RETURN(DecodeSlot * slot, NextSlotLocked());
  absl::ReaderMutexLock lock(&mu_);
  const int u = plan.embedding_unit;
  const std::span<const uint32_t> p = m->embedding_positions();
  const char* base = AddressLocked(m->allocation()) + plan.layout.unit_offsets[u];
  auto* out = reinterpret_cast<uint16_t*>(AddressLocked(scratch_[1]));
  uint64_t cursor = 0;
  views_.clear();
  for (size_t k = 0; k < tokens.size(); ++k) {
    // The blocks [b0, b1) that hold the row's elements [start, end).
    const uint64_t start = plan.embedding_offset + uint64_t(tokens[k]) * hidden;
    const uint64_t end = start + hidden;
    const size_t b0 = std::upper_bound(p.begin(), p.end(), start) - p.begin() - 1;
    const size_t b1 = std::lower_bound(p.begin(), p.end(), end) - p.begin();
    codec::gpu::UnitView view =
        plan.layout.unit_images[u].View(base, plan.unit_sizes[u], out + cursor);
    view.first_block = static_cast<uint32_t>(b0);
    view.n_blocks = static_cast<uint32_t>(b1 - b0);
    view.out_first_element = p[b0];
    views_.push_back(view);
    rows[k] = DeviceTensor{.space = DeviceTensor::Space::kScratch1,
                           .offset = (cursor + start - p[b0]) * sizeof(uint16_t),
                           .bytes = row_bytes};
    cursor += p[b1] - p[b0];
  }
  DF11_CHECK(cursor <= scratch_elements_[1]);
  return LaunchLocked(*slot, DecodeSlot{.model = m, .what = DecodeSlot::What::kEmbedding}, 1,
                      /*tiled=*/false);
}

DeviceTensor CudaBackend::LayerTensor(const PlacedModel& model, int64_t layer, int buffer,
                                      size_t k) const {
  const CudaPlacedModel* m = Mine(model);
  if (m == nullptr || layer < 0 || layer >= static_cast<int64_t>(m->plan().layers.size()) ||
      buffer < 0 || buffer > 1 || k >= kLayerTensors) {
    return DeviceTensor{};
  }
  return LayerTensorOf(m->plan(), layer, buffer, k);
}

DeviceTensor CudaBackend::LmHead(const PlacedModel& model) const {
  const CudaPlacedModel* m = Mine(model);
  return m == nullptr ? DeviceTensor{} : LmHeadOf(m->plan());
}

absl::Status CudaBackend::Read(const PlacedModel& model, const DeviceTensor& tensor,
                               std::span<std::byte> out) {
  const CudaPlacedModel* m = Mine(model);
  if (m == nullptr) return absl::InvalidArgumentError("Read: a model of another backend");
  if (tensor.space == DeviceTensor::Space::kAbsent) {
    return absl::InvalidArgumentError("Read: an absent tensor");
  }
  if (out.size() != tensor.bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("Read: a tensor of ", tensor.bytes, " bytes into ", out.size()));
  }
  DF11_RETURN_IF_ERROR(FinishDecodes());
  absl::MutexLock decode_lock(&decode_mu_);
  absl::ReaderMutexLock lock(&mu_);
  ArenaAllocator::Id id = m->allocation();
  if (tensor.space != DeviceTensor::Space::kModel) {
    id = scratch_[tensor.space == DeviceTensor::Space::kScratch0 ? 0 : 1];
  }
  if (id == 0 || tensor.offset + tensor.bytes > arena_.size(id)) {
    return absl::OutOfRangeError(absl::StrCat("Read: bytes [", tensor.offset, ", ",
                                              tensor.offset + tensor.bytes,
                                              ") are outside the buffer"));
  }
  DF11_RETURN_IF_ERROR(device_->CopyAsync(out.data(), AddressLocked(id) + tensor.offset,
                                          tensor.bytes, decode_stream_->get()));
  return device_->StreamSynchronize(decode_stream_->get());
}

uint64_t CudaBackend::arena_allocated_bytes() const {
  absl::ReaderMutexLock lock(&mu_);
  return arena_.allocated_bytes();
}

size_t CudaBackend::arena_allocations() const {
  absl::ReaderMutexLock lock(&mu_);
  return arena_.allocations();
}

absl::Status CudaBackend::CompactForTest() {
  absl::MutexLock lock(&mu_);
  return CompactLocked();
}

uint64_t CudaBackend::compactions() const {
  absl::ReaderMutexLock lock(&mu_);
  return compactions_;
}

}  // namespace df11::runtime
