// The compute backend interface of the engine, implemented by the CPU backend (cpu_backend.h) and
// the CUDA backend (cuda_backend.h). A backend places models in its memory (Place: the host opens
// and validates the files, the backend copies what it keeps), runs a placed model's forward pass
// over a batch of sequences, each with its own KV cache made by that backend, and owns the
// scratch that DF11 blocks are decoded into (shared by every model it serves). It reports every
// byte it holds (Memory).
//
//   std::unique_ptr<Backend> backend = std::make_unique<CpuBackend>(CpuBackend::Options{});
//   DF11_ASSIGN_OR_RETURN(auto host, Model::Load(dir, backend->HostLoadOptions()));
//   DF11_ASSIGN_OR_RETURN(auto model, backend->Place(std::move(host), {}));
//   DF11_ASSIGN_OR_RETURN(auto cache, backend->NewCache(model->config(), 4096));
//   SequenceStep step{cache.get(), prompt_ids};
//   DF11_RETURN_IF_ERROR(backend->Forward(*model, std::span(&step, 1), logits));
#ifndef DF11_DAEMON_RUNTIME_ENGINE_BACKEND_H_
#define DF11_DAEMON_RUNTIME_ENGINE_BACKEND_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/runtime/engine/estimate.h"
#include "daemon/runtime/engine/model.h"
#include "daemon/runtime/engine/model_config.h"
#include "daemon/runtime/engine/placed_model.h"

namespace df11::runtime {

// The keys and values of one sequence, in the memory of the backend that made it.
class KvCache {
 public:
  virtual ~KvCache() = default;
  // Positions held, and the most it can hold.
  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }
  // Memory the cache takes.
  virtual uint64_t bytes() const = 0;
  // Forgets every position (the sequence starts over).
  void Clear() { length_ = 0; }

 protected:
  explicit KvCache(int64_t capacity) : capacity_(capacity) {}
  int64_t capacity_;
  int64_t length_ = 0;
};

// New tokens of one sequence for one forward pass; they are appended to `cache`.
struct SequenceStep {
  KvCache* cache;
  std::span<const int32_t> tokens;
};

// Called as Place copies weights: `done` of `total` bytes. Returning false cancels the placement.
using PlaceProgressFn = std::function<bool(uint64_t done, uint64_t total)>;

// What a model of a given estimate would take once placed.
struct PlacementEstimate {
  uint64_t unit_bytes = 0;   // PlacedModel::unit_bytes() at most
  uint64_t plain_bytes = 0;  // PlacedModel::plain_bytes() at most
  // Shared buffers that must grow for it (decode scratch sized by the largest block).
  uint64_t shared_growth_bytes = 0;
  uint64_t total() const { return unit_bytes + plain_bytes + shared_growth_bytes; }
};

// Every byte a backend holds, by kind. For a backend with an arena (the CUDA backend), the kinds
// below plus the models' resident bytes and the arena's unallocated bytes sum to `arena`.
struct BackendMemory {
  uint64_t device_total = 0;  // the device's memory (for the CPU, the machine's RAM)
  uint64_t device_free = 0;   // free on the device now, from the driver (the CPU: free pages)
  uint64_t arena = 0;         // held from the device up front; 0 when memory is taken as needed
  uint64_t scratch = 0;       // decoded DF11 blocks, shared by all models
  uint64_t workspace = 0;     // activations, launch parameters, library workspace
  uint64_t kv_cache = 0;      // KV cache held by live caches
  uint64_t kv_pool_free = 0;  // a preallocated KV pool's pages that no cache holds
  uint64_t kv_pool = 0;       // the preallocated KV pool (0: caches are allocated as made)
};

// The device work a backend has issued since it was made (none on the CPU), to count what a
// forward step costs: launches (kernels, copies, memsets; a library's product counts one), event
// operations (records, waits) and the host's waits for the device; the host's time from each
// pass's start until its last launch was issued (near the pass's whole time when the device waits
// for the host, not the host for the device); and, while profiling is on, the device time of each
// decoder operation.
struct DeviceWork {
  uint64_t launches = 0;
  uint64_t event_ops = 0;
  uint64_t host_syncs = 0;
  double enqueue_seconds = 0;
  struct OpTime {
    double seconds = 0;
    uint64_t calls = 0;
  };
  std::map<std::string, OpTime> ops;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // The device it computes on: "cpu" or "cuda:N".
  virtual std::string_view device() const = 0;

  // How Model::Load should open a model for this backend.
  virtual Model::LoadOptions HostLoadOptions() const = 0;
  // True when Place reads the weights from the files itself, overlapping the reads with its
  // copies (the CUDA backend): a loader then need not bring the files into the page cache first.
  virtual bool ReadsFilesAtPlace() const = 0;
  // What Place would hold for a model of `estimate`, at most. Pure.
  virtual PlacementEstimate EstimatePlacement(const ModelEstimate& estimate) const = 0;
  // Places `model` (opened with HostLoadOptions) in this backend's memory and returns it,
  // calling `progress` (may be empty) as bytes are copied. The result is freed by destroying it,
  // which must happen before the backend is destroyed. kResourceExhausted when the backend's
  // memory cannot hold it (with the numbers), kCancelled when `progress` returned false, kDataLoss
  // for a unit found corrupt while transcoding, kInternal for a device error. Thread-safe.
  virtual absl::StatusOr<std::unique_ptr<PlacedModel>> Place(std::unique_ptr<Model> model,
                                                             const PlaceProgressFn& progress) = 0;

  // A cache for `capacity` positions of a model with `config`. kResourceExhausted when the
  // backend's memory cannot hold it (with the numbers).
  virtual absl::StatusOr<std::unique_ptr<KvCache>> NewCache(const ModelConfig& config,
                                                           int64_t capacity) = 0;

  // Runs `model` over each sequence's new tokens (all sequences batched through every matrix
  // product), appends their keys and values to the caches, and writes the logits of each
  // sequence's last new token to logits[s * vocab_size, (s + 1) * vocab_size). kInvalidArgument for
  // an empty step, a token id outside the vocabulary, a cache without room (with the numbers), a
  // model or cache from another backend or a short `logits`; kDataLoss from a corrupt DF11 unit.
  // One Forward at a time per backend. A sequence's logits do not depend on the other sequences
  // of the batch, bit for bit, so batching never changes a generated token.
  virtual absl::Status Forward(const PlacedModel& model, std::span<const SequenceStep> batch,
                               std::span<float> logits) = 0;

  // Every byte the backend holds now; may be read from any thread while Forward runs.
  virtual BackendMemory Memory() const = 0;
  // The KV cache one position of one sequence of a model with `config` takes.
  virtual uint64_t KvBytesPerPosition(const ModelConfig& config) const = 0;

  // The device work so far (DeviceWork). Profiling times every decoder operation on the device
  // (two events each, so it slows a step a little); off by default.
  virtual DeviceWork Work() const { return {}; }
  virtual void SetProfiling(bool on) {}
};

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_ENGINE_BACKEND_H_
