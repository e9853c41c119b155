#include "daemon/runtime/backends/cuda/cuda_uploader.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codec/base/align.h"
#include "codec/base/status_macros.h"
#include "codec/decoder.h"
#include "codec/gpu_decoder.h"
#include "codec/gpu_layout.h"
#include "codec/lane_unit.h"
#include "codec/tiled_matrix.h"
#include "daemon/runtime/backends/cuda/cuda_decode_queue.h"

namespace df11::runtime {
namespace {

// Placement reports progress after each this many bytes copied.
constexpr uint64_t kReportBytes = 16 << 20;

}  // namespace

CudaUploader::CudaUploader(GpuDevice& device, CudaArena& arena, const Options& options)
    : device_(device), arena_(arena), options_(options), copy_pool_(options.threads) {}

absl::Status CudaUploader::Init(char* workspace, uint64_t slot_bytes) {
  workspace_ = workspace;
  slot_bytes_ = slot_bytes;
  DF11_ASSIGN_OR_RETURN(stream_, DeviceStream::Create(device_));
  DF11_ASSIGN_OR_RETURN(check_, DeviceStream::Create(device_));
  DF11_ASSIGN_OR_RETURN(unit_copied_, DeviceEvent::Create(device_));
  arena_.AddStream(stream_->get());
  arena_.AddStream(check_->get());
  DF11_ASSIGN_OR_RETURN(void* flags, device_.AllocateHost(2 * kChecks * sizeof(uint32_t)));
  flags_ = static_cast<uint32_t*>(flags);
  for (int i = 0; i < options_.staging_buffers; ++i) {
    DF11_ASSIGN_OR_RETURN(void* host, device_.AllocateHost(options_.staging_bytes));
    staging_.push_back(host);
    DF11_ASSIGN_OR_RETURN(std::unique_ptr<DeviceEvent> done, DeviceEvent::Create(device_));
    staging_done_.push_back(std::move(done));
  }
  return absl::OkStatus();
}

CudaUploader::~CudaUploader() {
  if (stream_ != nullptr) device_.StreamSynchronize(stream_->get()).IgnoreError();
  if (check_ != nullptr) device_.StreamSynchronize(check_->get()).IgnoreError();
  for (void* host : staging_) device_.FreeHost(host);
  if (flags_ != nullptr) device_.FreeHost(flags_);
}

std::vector<bool> CudaUploader::TiledUnits(const Model& host, const GpuModelPlan& plan) const {
  std::vector<bool> tiled(host.units().size(), false);
  if (options_.layout != Options::Layout::kTiled) return tiled;
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

absl::StatusOr<CudaUploader::Layouts> CudaUploader::Upload(const Model& host,
                                                           const GpuModelPlan& plan,
                                                           CudaArena::Id allocation,
                                                           const PlaceProgressFn& progress) {
  absl::MutexLock upload_lock(&mu_);
  Layouts kept;
  kept.tiled.resize(host.units().size());
  kept.lanes.resize(host.units().size());
  std::vector<std::vector<TiledTensor>>& tiled = kept.tiled;
  const GpuDevice::Stream stream = stream_->get();
  const auto units = host.units();
  const auto plain = host.plain_tensors();
  uint64_t total = 0;
  for (const codec::UnitSizes& s : plan.unit_sizes) {
    total += s.stream_bytes + s.elements + s.gaps_bytes + (s.blocks() + 1) * sizeof(uint32_t) +
             codec::gpu::kTableEntries * sizeof(uint32_t) + s.lut_bytes;
  }
  for (const auto& [name, bytes] : plain) total += bytes.size();
  // An error of unit u, named with its file and the model's directory.
  auto unit_error = [&](size_t u, const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat("DF11 unit ", units[u]->path, " of ",
                                               host.directory(), ": ", s.message()));
  };
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
        DF11_RETURN_IF_ERROR(device_.EventSynchronize(staging_done_[slot]->get()));
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
        absl::ReaderMutexLock lock(&arena_.mu());
        DF11_RETURN_IF_ERROR(
            device_.CopyAsync(arena_.AddressLocked(allocation) + offset + at, staging, n, stream));
        // Recorded again after each copy from the buffer: waiting for it waits for all of them.
        DF11_RETURN_IF_ERROR(device_.Record(staging_done_[slot]->get(), stream));
      }
      slot_used = std::min(options_.staging_bytes, base::AlignUp(slot_used + n, 256));
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
  const GpuDevice::Stream check = check_->get();
  std::vector<size_t> checking;  // the unit of each pair of slots in use
  auto check_all = [&]() -> absl::Status {
    // The checks' error flags in one copy, after the checks.
    if (!checking.empty()) {
      DF11_RETURN_IF_ERROR(device_.CopyStridedAsync(
          flags_, sizeof(uint32_t), workspace_ + GpuDevice::kDecodeErrorOffset, slot_bytes_,
          sizeof(uint32_t), 2 * checking.size(), check));
    }
    DF11_RETURN_IF_ERROR(device_.StreamSynchronize(check));
    absl::Status first;
    for (size_t k = 0; k < checking.size() && first.ok(); ++k) {
      if (flags_[2 * k] != 0 || flags_[2 * k + 1] != 0) {
        first = unit_error(checking[k], CorruptCodes());
      }
    }
    checking.clear();
    return first;
  };
  auto check_unit = [&](size_t u) -> absl::Status {
    if (checking.size() == kChecks) DF11_RETURN_IF_ERROR(check_all());
    DF11_RETURN_IF_ERROR(device_.Record(unit_copied_->get(), stream));
    DF11_RETURN_IF_ERROR(device_.StreamWait(check, unit_copied_->get()));
    const size_t k = checking.size();
    checking.push_back(u);
    absl::ReaderMutexLock lock(&arena_.mu());
    const codec::gpu::UnitView view = plan.layout.unit_images[u].View(
        arena_.AddressLocked(allocation) + plan.layout.unit_offsets[u], plan.unit_sizes[u], nullptr);
    DF11_RETURN_IF_ERROR(device_.BuildSegmentOffsets(
        std::span(&view, 1), workspace_ + 2 * k * slot_bytes_, slot_bytes_, check));
    return device_.DecodeUnits(
        std::span(&view, 1), workspace_ + (2 * k + 1) * slot_bytes_, slot_bytes_, check);
  };

  // Unit u as tiled matrices, when their images fit in its DF11 image's place (false: they do
  // not, and it keeps DF11's layout). The DF11 decoder checks the stream on the way.
  auto upload_tiled = [&](size_t u) -> absl::StatusOr<bool> {
    const codec::Df11Model::UnitEntry& entry = *units[u];
    std::vector<uint16_t> values(entry.unit->num_elements());
    if (absl::Status s = codec::UnitDecoder(*entry.unit).Decode(values, &tile_pool_); !s.ok()) {
      return unit_error(u, s);
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

  // Unit u in the lane-stream layout, when its image fits in its DF11 image's place (false: it
  // does not, and it keeps DF11's layout). The DF11 decoder checks the stream on the way. In its
  // place: the words, the segment index, the table, then the sign/mantissa bytes and their tail.
  auto upload_lane = [&](size_t u) -> absl::StatusOr<bool> {
    const codec::Df11Model::UnitEntry& entry = *units[u];
    absl::StatusOr<codec::LaneUnit> lane =
        codec::LaneUnit::FromDf11(codec::UnitDecoder(*entry.unit), &tile_pool_);
    if (!lane.ok()) return unit_error(u, lane.status());
    const uint64_t at = plan.layout.unit_offsets[u];
    LaneImage image{.elements = lane->num_elements(), .segments = lane->num_segments()};
    image.words = at;
    image.index = image.words + base::AlignUp(lane->words().size() * sizeof(uint32_t), 16);
    image.table = image.index + base::AlignUp(lane->segment_words().size() * sizeof(uint32_t), 16);
    image.sign_mantissa = image.table + base::AlignUp(lane->table().size() * sizeof(uint32_t), 16);
    const uint64_t end = image.sign_mantissa + lane->sign_mantissa().size();
    if (end - at > plan.layout.unit_images[u].bytes) return false;
    DF11_RETURN_IF_ERROR(copy(lane->words().data(), lane->words().size() * 4, image.words));
    DF11_RETURN_IF_ERROR(
        copy(lane->segment_words().data(), lane->segment_words().size() * 4, image.index));
    DF11_RETURN_IF_ERROR(copy(lane->table().data(), lane->table().size() * 4, image.table));
    DF11_RETURN_IF_ERROR(
        copy(lane->sign_mantissa().data(), lane->sign_mantissa().size(), image.sign_mantissa));
    kept.lanes[u] = image;
    return true;
  };

  auto upload_all = [&]() -> absl::Status {
    {
      absl::ReaderMutexLock lock(&arena_.mu());
      DF11_RETURN_IF_ERROR(device_.MemsetAsync(arena_.AddressLocked(allocation), 0, plan.layout.bytes(),
                                                stream));  // padding is zero
    }
    const std::vector<bool> to_tile = TiledUnits(host, plan);
    for (size_t u = 0; u < units.size(); ++u) {
      const codec::Unit& unit = *units[u]->unit;
      if (to_tile[u]) {
        DF11_ASSIGN_OR_RETURN(const bool placed, upload_tiled(u));
        if (placed) continue;
      }
      if (options_.layout == Options::Layout::kLane) {
        DF11_ASSIGN_OR_RETURN(const bool placed, upload_lane(u));
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
  absl::Status synced = device_.StreamSynchronize(stream);
  if (synced.ok()) synced = device_.StreamSynchronize(check);
  if (status.ok()) status = synced;
  if (!status.ok()) return status;
  if (progress && !cancelled) progress(total, total);
  return kept;
}

}  // namespace df11::runtime
