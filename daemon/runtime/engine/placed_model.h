// A model's weights as one backend holds them: what Backend::Place returns and Backend::Forward
// reads. The host opens and validates a model's files (Model::Load); the backend then copies what
// it keeps into its own memory. The CPU backend computes on the host Model itself, which is its
// own PlacedModel; the CUDA backend keeps the weights in device memory and drops the host copy.
//
//   DF11_ASSIGN_OR_RETURN(auto host, Model::Load(dir, backend.HostLoadOptions()));
//   DF11_ASSIGN_OR_RETURN(std::unique_ptr<PlacedModel> model, backend.Place(std::move(host), {}));
//   registry accounts model->unit_bytes() and model->plain_bytes() on model->device()
#ifndef DF11_DAEMON_RUNTIME_ENGINE_PLACED_MODEL_H_
#define DF11_DAEMON_RUNTIME_ENGINE_PLACED_MODEL_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "daemon/runtime/engine/model_config.h"

namespace df11::runtime {

class PlacedModel {
 public:
  virtual ~PlacedModel() = default;

  virtual const ModelConfig& config() const = 0;
  // DF11-compressed weights (else a BF16 checkpoint).
  virtual bool is_df11() const = 0;
  // The device whose memory holds the weights: "cpu" or "cuda:N".
  virtual std::string_view device() const = 0;
  // Bytes held on that device, by kind: the compressed units in the backend's resident layout
  // (with what that layout adds to them), and everything else the model holds there (plain
  // tensors, alignment). Fixed once placed; every byte of the model is in one of the two.
  virtual uint64_t unit_bytes() const = 0;
  virtual uint64_t plain_bytes() const = 0;
  uint64_t resident_bytes() const { return unit_bytes() + plain_bytes(); }
  // OK, or kDataLoss when files the model still reads (a mapped checkpoint) were modified in
  // place since it was loaded (codec::SafetensorsFile::CheckUnchanged). Models that hold their
  // own copy of the weights (on a GPU) are always OK.
  virtual absl::Status CheckFiles() const { return absl::OkStatus(); }
  // The part of CheckFiles that needs no system call: kDataLoss when a read of those files past
  // a truncation was turned into zeros. Cheap enough for every request's end.
  virtual absl::Status CheckReads() const { return absl::OkStatus(); }
};

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_ENGINE_PLACED_MODEL_H_
