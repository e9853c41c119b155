// The compute backend interface of the engine: what the CPU backend implements now and the CUDA
// backend will implement next. A backend runs a model's forward pass over a batch of sequences,
// each with its own KV cache made by that backend, and owns the scratch that DF11 blocks are
// decoded into (shared by every model it serves).
//
//   std::unique_ptr<Backend> backend = std::make_unique<CpuBackend>(CpuBackend::Options{});
//   DF11_ASSIGN_OR_RETURN(std::unique_ptr<KvCache> cache, backend->NewCache(model->config(), 4096));
//   SequenceStep step{cache.get(), prompt_ids};
//   DF11_RETURN_IF_ERROR(backend->Forward(*model, std::span(&step, 1), logits));
#ifndef DF11_DAEMON_RUNTIME_BACKEND_H_
#define DF11_DAEMON_RUNTIME_BACKEND_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/runtime/model.h"
#include "daemon/runtime/model_config.h"

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

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;

  // A cache for `capacity` positions of a model with `config`. kResourceExhausted when the
  // backend's memory cannot hold it (with the numbers).
  virtual absl::StatusOr<std::unique_ptr<KvCache>> NewCache(const ModelConfig& config,
                                                           int64_t capacity) = 0;

  // Runs `model` over each sequence's new tokens (all sequences batched through every matrix
  // product), appends their keys and values to the caches, and writes the logits of each
  // sequence's last new token to logits[s * vocab_size, (s + 1) * vocab_size). kInvalidArgument for
  // an empty step, a token id outside the vocabulary, a cache without room (with the numbers), a
  // cache from another backend or a short `logits`; kDataLoss from a corrupt DF11 unit. One
  // Forward at a time per backend. A sequence's logits do not depend on the other sequences of
  // the batch, bit for bit, so batching never changes a generated token.
  virtual absl::Status Forward(const Model& model, std::span<const SequenceStep> batch,
                               std::span<float> logits) = 0;

  // Memory accounting; each may be read from any thread while Forward runs.
  // The memory of the device the backend computes on (for the CPU, the machine's RAM).
  virtual uint64_t device_memory_bytes() const = 0;
  // Memory held for decoded DF11 blocks (grows to what the largest model served so far needs;
  // counted once for all models).
  virtual uint64_t scratch_bytes() const = 0;
  // Activations and other per-pass buffers (grown, never shrunk).
  virtual uint64_t workspace_bytes() const = 0;
  // What every KV cache this backend made and that still lives takes.
  virtual uint64_t kv_cache_bytes() const = 0;
  // The KV cache one position of one sequence of a model with `config` takes.
  virtual uint64_t KvBytesPerPosition(const ModelConfig& config) const = 0;
};

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_BACKEND_H_
