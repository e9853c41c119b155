#include "tests/runtime/emulated_gpu_device.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codec/base/status_macros.h"
#include "codec/gpu_decoder.h"
#include "codec/lane_unit.h"
#include "codec/tiled_matrix.h"

namespace df11::testing {
namespace {

// As the real workspace: the error flag first, then the views.
constexpr uint64_t kViewsOffset = 16;

bool Overlap(const void* a, const void* b, uint64_t bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + bytes && y < x + bytes;
}

}  // namespace

// The kernels' steps (EmulatedForwardOps), each operation enqueued on its stream with copies of its
// arguments (the spans of host arrays among them), so that it runs in stream order like a kernel.
class EmulatedGpuDevice::StreamOps final : public runtime::ForwardOps {
 public:
  explicit StreamOps(EmulatedGpuDevice& device) : device_(device) {}

  absl::Status UseWorkspace(void* device, uint64_t bytes) override {
    return kernels_.UseWorkspace(device, bytes);
  }
  absl::Status Linear(const uint16_t* x, const uint16_t* w, const uint16_t* bias, int64_t rows,
                      int64_t in, int64_t out, void* y, bool y_fp32, Stream stream) override {
    return Later(stream, [=, this] {
      return kernels_.Linear(x, w, bias, rows, in, out, y, y_fp32, nullptr);
    });
  }
  absl::Status RmsNorm(const uint16_t* x, const uint16_t* w, int64_t rows, int64_t n, float eps,
                       float offset, uint16_t* y, Stream stream) override {
    return Later(stream,
                 [=, this] { return kernels_.RmsNorm(x, w, rows, n, eps, offset, y, nullptr); });
  }
  absl::Status FloatRmsNorm(const float* x, const uint16_t* w, int64_t rows, int64_t n, float eps,
                            float offset, void* y, bool y_fp32, Stream stream) override {
    return Later(stream, [=, this] {
      return kernels_.FloatRmsNorm(x, w, rows, n, eps, offset, y, y_fp32, nullptr);
    });
  }
  absl::Status AddRmsNorm(float* x, const float* y, const uint16_t* w, int64_t rows, int64_t n,
                          float eps, float offset, uint16_t* out, Stream stream) override {
    return Later(stream, [=, this] {
      return kernels_.AddRmsNorm(x, y, w, rows, n, eps, offset, out, nullptr);
    });
  }
  absl::Status Rope(uint16_t* x, int64_t rows, int64_t heads, int64_t head_dim,
                    const int32_t* row_position, const runtime::RopeTable& table,
                    Stream stream) override {
    return Later(stream, [=, this] {
      return kernels_.Rope(x, rows, heads, head_dim, row_position, table, nullptr);
    });
  }
  absl::Status WriteKv(const uint16_t* k, const uint16_t* v, int64_t rows,
                       const runtime::PagedKv& kv, Stream stream) override {
    return Later(stream, [=, this] { return kernels_.WriteKv(k, v, rows, kv, nullptr); });
  }
  absl::Status PrepareHeadsAndStoreKv(uint16_t* q, uint16_t* k, const uint16_t* v, int64_t rows,
                                      int64_t heads, const uint16_t* q_norm,
                                      const uint16_t* k_norm, float eps, float offset,
                                      const runtime::RopeTable& table, const runtime::PagedKv& kv,
                                      Stream stream) override {
    return Later(stream, [=, this] {
      return kernels_.PrepareHeadsAndStoreKv(q, k, v, rows, heads, q_norm, k_norm, eps, offset,
                                             table, kv, nullptr);
    });
  }
  absl::Status PlanAttention(const runtime::DecodeBatch& batch,
                             const runtime::AttentionShape& shape, int64_t positions_per_page,
                             Stream stream) override {
    return Later(stream, [=, this] {
      return kernels_.PlanAttention(batch, shape, positions_per_page, nullptr);
    });
  }
  absl::Status Attention(const uint16_t* q, int64_t rows, const runtime::AttentionShape& shape,
                         const runtime::PagedKv& kv, uint16_t* out, Stream stream) override {
    return Later(stream,
                 [=, this] { return kernels_.Attention(q, rows, shape, kv, out, nullptr); });
  }
  absl::Status GatedActivation(const uint16_t* gate, const uint16_t* up, int64_t n,
                               runtime::Activation activation, uint16_t* y,
                               Stream stream) override {
    return Later(stream, [=, this] {
      return kernels_.GatedActivation(gate, up, n, activation, y, nullptr);
    });
  }
  absl::Status Add(float* x, const float* y, int64_t n, Stream stream) override {
    return Later(stream, [=, this] { return kernels_.Add(x, y, n, nullptr); });
  }
  absl::Status Widen(const uint16_t* in, int64_t n, float scale, float* out,
                     Stream stream) override {
    return Later(stream, [=, this] { return kernels_.Widen(in, n, scale, out, nullptr); });
  }
  absl::Status SoftCap(float* x, int64_t n, float cap, Stream stream) override {
    return Later(stream, [=, this] { return kernels_.SoftCap(x, n, cap, nullptr); });
  }
  absl::Status GatherRows(const char* base, const uint64_t* offsets, int64_t n, int64_t row_bytes,
                          void* out, Stream stream) override {
    return Later(stream, [=, this] {
      return kernels_.GatherRows(base, offsets, n, row_bytes, out, nullptr);
    });
  }
  absl::Status SplitColumns(const uint16_t* in, int64_t rows, int64_t in_width,
                            std::span<const ColumnRange> pieces, Stream stream) override {
    std::vector<ColumnRange> copy(pieces.begin(), pieces.end());
    return Later(stream,
                 [=, this] { return kernels_.SplitColumns(in, rows, in_width, copy, nullptr); });
  }
  absl::Status TiledLinear(const uint16_t* x, int64_t rows, std::span<const TiledProduct> products,
                           bool y_fp32, Stream stream) override {
    std::vector<TiledProduct> copy(products.begin(), products.end());
    return Later(stream,
                 [=, this] { return kernels_.TiledLinear(x, rows, copy, y_fp32, nullptr); });
  }
  absl::Status LaneLinear(const uint16_t* x, int64_t rows,
                          std::span<const codec::gpu::LaneProduct> products, bool y_fp32,
                          void* workspace, uint64_t workspace_bytes, Stream stream) override {
    std::vector<codec::gpu::LaneProduct> copy(products.begin(), products.end());
    return Later(stream, [=, this] {
      return kernels_.LaneLinear(x, rows, copy, y_fp32, workspace, workspace_bytes, nullptr);
    });
  }
  absl::Status CheckTiled(Stream stream) override {
    if (absl::Status s = device_.StreamSynchronize(stream); !s.ok()) return s;
    if (absl::Status s = TakeError(); !s.ok()) return s;
    return kernels_.CheckTiled(nullptr);
  }

 private:
  // A kernel's launch errors come back at once; its run's errors (here, an operation's status)
  // come back at the next synchronization, as CheckTiled's.
  absl::Status Later(Stream stream, std::function<absl::Status()> op) {
    device_.Enqueue(stream, [this, op = std::move(op)] {
      absl::Status s = op();
      if (!s.ok()) {
        std::lock_guard lock(mu_);
        if (error_.ok()) error_ = std::move(s);
      }
    });
    return absl::OkStatus();
  }
  absl::Status TakeError() {
    std::lock_guard lock(mu_);
    return std::exchange(error_, absl::OkStatus());
  }

  EmulatedGpuDevice& device_;
  EmulatedForwardOps kernels_;
  std::mutex mu_;
  absl::Status error_;
};

EmulatedGpuDevice::EmulatedGpuDevice(uint64_t total_bytes)
    : total_(total_bytes), forward_ops_(std::make_unique<StreamOps>(*this)) {}

EmulatedGpuDevice::~EmulatedGpuDevice() {
  // Its owner (the backend) must have returned everything by now: a leak is a bug.
  if (!device_.empty() || !host_.empty() || handles_ != 0) {
    std::fprintf(stderr,
                 "EmulatedGpuDevice destroyed with %zu device and %zu host allocations and %d "
                 "streams or events still held\n",
                 device_.size(), host_.size(), handles_);
    std::abort();
  }
}

absl::StatusOr<runtime::GpuDevice::MemoryInfo> EmulatedGpuDevice::GetMemoryInfo() {
  std::lock_guard lock(mu_);
  return MemoryInfo{.free = total_ - allocated_, .total = total_};
}

absl::StatusOr<void*> EmulatedGpuDevice::Allocate(uint64_t bytes) {
  std::lock_guard lock(mu_);
  if (bytes > total_ - allocated_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cudaMalloc of ", bytes, " bytes: ", total_ - allocated_, " of ", total_, " bytes free"));
  }
  void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (p == nullptr) return absl::ResourceExhaustedError("host memory for the emulated device");
  std::memset(p, 0xA5, bytes);  // not zero: the backend must clear what it relies on
  device_[p] = bytes;
  allocated_ += bytes;
  return p;
}

void EmulatedGpuDevice::Free(void* device) {
  std::lock_guard lock(mu_);
  auto it = device_.find(device);
  if (it == device_.end()) std::abort();  // freeing what was not allocated: a bug
  allocated_ -= it->second;
  device_.erase(it);
  std::free(device);
}

absl::StatusOr<void*> EmulatedGpuDevice::AllocateHost(uint64_t bytes) {
  std::lock_guard lock(mu_);
  void* p = std::malloc(bytes);
  if (p == nullptr) return absl::ResourceExhaustedError("host memory");
  host_[p] = bytes;
  return p;
}

void EmulatedGpuDevice::FreeHost(void* host) {
  std::lock_guard lock(mu_);
  if (host_.erase(host) != 1) std::abort();
  std::free(host);
}

void EmulatedGpuDevice::Run(StreamState& s) {
  std::unique_lock lock(s.mu);
  while (true) {
    s.cv.wait(lock, [&] { return !s.work.empty() || s.stop; });
    if (s.work.empty()) return;  // stopped, and nothing left
    std::function<void()> work = std::move(s.work.front());
    s.work.pop_front();
    lock.unlock();
    work();
    lock.lock();
    ++s.done;
    s.cv.notify_all();
  }
}

void EmulatedGpuDevice::Enqueue(Stream stream, std::function<void()> work) {
  ++enqueued_;
  if (stream == nullptr) {
    work();
    return;
  }
  auto& s = *static_cast<StreamState*>(stream);
  std::lock_guard lock(s.mu);
  s.work.push_back(std::move(work));
  ++s.enqueued;
  s.cv.notify_all();
}

void EmulatedGpuDevice::WaitFor(StreamState& s, uint64_t point) {
  std::unique_lock lock(s.mu);
  s.cv.wait(lock, [&] { return s.done >= point; });
}

absl::StatusOr<runtime::GpuDevice::Stream> EmulatedGpuDevice::CreateStream() {
  auto* s = new StreamState;
  s->thread = std::thread([s] { Run(*s); });
  std::lock_guard lock(mu_);
  ++handles_;
  return static_cast<Stream>(s);
}

void EmulatedGpuDevice::DestroyStream(Stream stream) {
  auto* s = static_cast<StreamState*>(stream);
  {
    std::lock_guard lock(s->mu);
    s->stop = true;
    s->cv.notify_all();
  }
  s->thread.join();  // after the work enqueued before, as cudaStreamDestroy lets it finish
  delete s;
  std::lock_guard lock(mu_);
  --handles_;
}

absl::StatusOr<runtime::GpuDevice::Event> EmulatedGpuDevice::CreateEvent() {
  std::lock_guard lock(mu_);
  ++handles_;
  return static_cast<Event>(new EventState);
}

void EmulatedGpuDevice::DestroyEvent(Event event) {
  delete static_cast<EventState*>(event);
  std::lock_guard lock(mu_);
  --handles_;
}

absl::StatusOr<runtime::GpuDevice::Event> EmulatedGpuDevice::CreateTimingEvent() {
  std::lock_guard lock(mu_);
  ++handles_;
  return static_cast<Event>(new EventState{.timing = true});
}

absl::StatusOr<double> EmulatedGpuDevice::ElapsedSeconds(Event start, Event end) {
  const auto& a = *static_cast<EventState*>(start);
  const auto& b = *static_cast<EventState*>(end);
  if (!a.timing || !b.timing) return absl::InvalidArgumentError("not a timing event");
  return b.reached->load() - a.reached->load();
}

runtime::GpuDevice::Counters EmulatedGpuDevice::counters() const {
  return Counters{.launches = enqueued_.load(),
                  .event_ops = event_ops_.load(),
                  .host_syncs = host_syncs_.load()};
}

absl::Status EmulatedGpuDevice::Record(Event event, Stream stream) {
  ++event_ops_;
  auto& e = *static_cast<EventState*>(event);
  if (e.timing) {
    // A fresh clock cell per record: a later record does not change an earlier measurement.
    e.reached = std::make_shared<std::atomic<double>>(0.0);
    Enqueue(stream, [reached = e.reached] {
      reached->store(std::chrono::duration<double>(
                         std::chrono::steady_clock::now().time_since_epoch())
                         .count());
    });
    --enqueued_;  // the clock read is not a launch
  }
  auto& s = *static_cast<StreamState*>(stream);
  std::lock_guard lock(s.mu);
  e.stream = &s;
  e.point = s.enqueued;
  return absl::OkStatus();
}

absl::Status EmulatedGpuDevice::StreamWait(Stream stream, Event event) {
  ++event_ops_;
  const EventState e = *static_cast<EventState*>(event);  // the point recorded by now
  if (e.stream == nullptr) return absl::OkStatus();  // never recorded: nothing to wait for
  Enqueue(stream, [e] { WaitFor(*e.stream, e.point); });
  --enqueued_;  // a wait is not a launch
  return absl::OkStatus();
}

absl::Status EmulatedGpuDevice::EventSynchronize(Event event) {
  ++host_syncs_;
  const EventState e = *static_cast<EventState*>(event);
  if (e.stream != nullptr) WaitFor(*e.stream, e.point);
  return absl::OkStatus();
}

absl::Status EmulatedGpuDevice::StreamSynchronize(Stream stream) {
  ++host_syncs_;
  auto& s = *static_cast<StreamState*>(stream);
  uint64_t point = 0;
  {
    std::lock_guard lock(s.mu);
    point = s.enqueued;
  }
  WaitFor(s, point);
  return absl::OkStatus();
}

EmulatedGpuDevice::Memory EmulatedGpuDevice::Kind(const void* p) const {
  std::lock_guard lock(mu_);
  for (const auto* m : {&device_, &host_}) {
    auto it = m->upper_bound(p);
    if (it == m->begin()) continue;
    --it;
    const auto* base = static_cast<const char*>(it->first);
    if (static_cast<const char*>(p) < base + it->second) {
      return m == &device_ ? Memory::kDevice : Memory::kPinned;
    }
  }
  return Memory::kPageable;
}

absl::Status EmulatedGpuDevice::CopyAsync(void* dst, const void* src, uint64_t bytes,
                                          Stream stream) {
  if (Overlap(dst, src, bytes)) {
    return absl::InternalError(absl::StrCat("a copy of ", bytes, " bytes onto itself"));
  }
  if (bytes == 0) return absl::OkStatus();
  if (Kind(src) == Memory::kPageable) {
    // Staged at once: the caller may reuse its memory on return.
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(src),
                                                      static_cast<const char*>(src) + bytes);
    Enqueue(stream, [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
  } else {
    Enqueue(stream, [dst, src, bytes] { std::memcpy(dst, src, bytes); });
  }
  // Into pageable memory: returns once the copy is done.
  if (Kind(dst) == Memory::kPageable && stream != nullptr) return StreamSynchronize(stream);
  return absl::OkStatus();
}

absl::Status EmulatedGpuDevice::CopyStridedAsync(void* dst, uint64_t dst_pitch, const void* src,
                                                 uint64_t src_pitch, uint64_t width,
                                                 uint64_t rows, Stream stream) {
  if (width > dst_pitch || width > src_pitch) {
    return absl::InvalidArgumentError("a strided copy wider than its pitch");
  }
  if (rows == 0 || width == 0) return absl::OkStatus();
  // As CopyAsync: the rows are read when the copy runs (the sources here are device memory).
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  Enqueue(stream, [=] {
    for (uint64_t r = 0; r < rows; ++r) std::memcpy(d + r * dst_pitch, s + r * src_pitch, width);
  });
  if (Kind(dst) == Memory::kPageable && stream != nullptr) return StreamSynchronize(stream);
  return absl::OkStatus();
}

absl::Status EmulatedGpuDevice::MemsetAsync(void* dst, uint8_t value, uint64_t bytes,
                                            Stream stream) {
  Enqueue(stream, [dst, value, bytes] { std::memset(dst, value, bytes); });
  return absl::OkStatus();
}

uint64_t EmulatedGpuDevice::DecodeWorkspaceBytes(size_t views) const {
  return kViewsOffset + views * sizeof(codec::gpu::UnitView);
}

absl::Status EmulatedGpuDevice::CheckLaunch(std::span<const codec::gpu::UnitView> views,
                                            uint64_t workspace_bytes) const {
  if (views.empty() || views.size() > codec::gpu::kMaxUnitsPerLaunch) {
    return absl::InvalidArgumentError(absl::StrCat("a launch of ", views.size(), " views"));
  }
  if (workspace_bytes < DecodeWorkspaceBytes(views.size())) {
    return absl::InvalidArgumentError("a launch with a small workspace");
  }
  return absl::OkStatus();
}

absl::Status EmulatedGpuDevice::BuildSegmentOffsets(std::span<const codec::gpu::UnitView> views,
                                                    void* workspace, uint64_t workspace_bytes,
                                                    Stream stream) {
  namespace gpu = codec::gpu;
  if (absl::Status s = CheckLaunch(views, workspace_bytes); !s.ok()) return s;
  {
    std::lock_guard lock(mu_);
    ++launches_;
  }
  // The views are staged at the call, as the launch copies them into the workspace.
  std::vector<gpu::UnitView> staged(views.begin(), views.end());
  Enqueue(stream, [staged = std::move(staged), workspace] {
    auto* error = static_cast<uint32_t*>(workspace);
    *error = 0;
    std::memcpy(static_cast<char*>(workspace) + kViewsOffset, staged.data(),
                staged.size() * sizeof(gpu::UnitView));
    uint32_t counts[gpu::kSegmentsPerBlock];
    for (const gpu::UnitView& u : staged) {
      for (uint32_t b = u.first_block; b < u.first_block + u.n_blocks; ++b) {
        for (uint32_t t = 0; t < gpu::kSegmentsPerBlock; ++t) {
          counts[t] = gpu::CountSegment(u, u.table, u.luts, b, t);
        }
        uint16_t* offsets =
            const_cast<uint16_t*>(u.segment_offsets) + uint64_t{b} * gpu::kSegmentsPerBlock;
        if (!gpu::FinishBlockOffsets(u, b, counts, offsets)) *error = 1;
      }
    }
  });
  return absl::OkStatus();
}

absl::Status EmulatedGpuDevice::DecodeUnits(std::span<const codec::gpu::UnitView> views,
                                            void* workspace, uint64_t workspace_bytes,
                                            Stream stream) {
  namespace gpu = codec::gpu;
  if (absl::Status s = CheckLaunch(views, workspace_bytes); !s.ok()) return s;
  {
    std::lock_guard lock(mu_);
    ++launches_;
  }
  std::vector<gpu::UnitView> staged(views.begin(), views.end());
  const bool fail = fail_decodes_;
  Enqueue(stream, [staged = std::move(staged), workspace, fail] {
    auto* error = static_cast<uint32_t*>(workspace);
    *error = 0;
    std::memcpy(static_cast<char*>(workspace) + kViewsOffset, staged.data(),
                staged.size() * sizeof(gpu::UnitView));
    // Each CTA: its unit's table and LUT rows in "shared memory", the block's exponents staged,
    // every thread's segment, a barrier, every thread's slice of the join.
    std::vector<uint8_t> exps(gpu::kMaxBlockElements);
    for (const gpu::UnitView& u : staged) {
      for (uint32_t b = u.first_block; b < u.first_block + u.n_blocks; ++b) {
        for (uint32_t t = 0; t < gpu::kSegmentsPerBlock; ++t) {
          if (!gpu::DecodeSegment(u, u.table, u.luts, b, t, exps.data())) *error = 1;
        }
        if (u.out == nullptr) continue;  // a check-only decode
        for (uint32_t t = 0; t < gpu::kSegmentsPerBlock; ++t) {
          gpu::JoinSlice(u, b, exps.data(), t, gpu::kSegmentsPerBlock);
        }
      }
    }
    if (fail) *error = 1;
  });
  return absl::OkStatus();
}

absl::Status EmulatedGpuDevice::DecodeTiled(std::span<const codec::gpu::TiledDecodeView> views,
                                            void* workspace, uint64_t workspace_bytes,
                                            Stream stream) {
  if (views.empty() || views.size() > codec::gpu::kMaxUnitsPerLaunch) {
    return absl::InvalidArgumentError(absl::StrCat("a tiled launch of ", views.size(), " views"));
  }
  if (workspace_bytes < TiledWorkspaceBytes(views.size())) {
    return absl::InvalidArgumentError("a tiled launch with a small workspace");
  }
  for (const codec::gpu::TiledDecodeView& v : views) {
    // As the kernel's launch: pairs of values are written as 32-bit words.
    if (reinterpret_cast<uintptr_t>(v.out) % 4 != 0 || v.ld % 2 != 0 || v.ld < v.matrix.cols) {
      return absl::InvalidArgumentError(
          "DecodeTiled: the output must be 4-byte aligned with an even ld of at least the columns");
    }
  }
  {
    std::lock_guard lock(mu_);
    ++tiled_launches_;
  }
  std::vector<codec::gpu::TiledDecodeView> staged(views.begin(), views.end());
  const bool fail = fail_decodes_;
  Enqueue(stream, [staged = std::move(staged), workspace, fail] {
    auto* error = static_cast<uint32_t*>(workspace);
    *error = 0;
    for (const codec::gpu::TiledDecodeView& v : staged) {
      if (!codec::DecodeTiledView(v.matrix, v.out, v.ld)) *error = 1;
    }
    if (fail) *error = 1;
  });
  return absl::OkStatus();
}

absl::Status EmulatedGpuDevice::DecodeLanes(std::span<const codec::gpu::LaneView> views,
                                            void* workspace, uint64_t workspace_bytes,
                                            Stream stream) {
  DF11_RETURN_IF_ERROR(codec::CheckLaneDecodeLaunch(views, workspace_bytes));
  {
    std::lock_guard lock(mu_);
    ++lane_launches_;
  }
  std::vector<codec::gpu::LaneView> staged(views.begin(), views.end());
  const bool fail = fail_decodes_;
  Enqueue(stream, [staged = std::move(staged), workspace, fail] {
    auto* error = static_cast<uint32_t*>(workspace);
    *error = 0;
    for (const codec::gpu::LaneView& v : staged) {
      if (!codec::DecodeLaneView(v)) *error = 1;
    }
    if (fail) *error = 1;
  });
  return absl::OkStatus();
}

uint64_t EmulatedGpuDevice::lane_decode_launches() const {
  std::lock_guard lock(mu_);
  return lane_launches_;
}

uint64_t EmulatedGpuDevice::TiledWorkspaceBytes(size_t views) const {
  return kViewsOffset + views * sizeof(codec::gpu::TiledDecodeView);
}

uint64_t EmulatedGpuDevice::tiled_decode_launches() const {
  std::lock_guard lock(mu_);
  return tiled_launches_;
}

uint64_t EmulatedGpuDevice::decode_launches() const {
  std::lock_guard lock(mu_);
  return launches_;
}

}  // namespace df11::testing
