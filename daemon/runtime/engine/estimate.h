// What a model directory would take once loaded, from its config.json and the headers of its
// safetensors files only: no tensor data is read. The byte counts are those of the official
// files: Model::unit_bytes() and Model::plain_bytes() once loaded without re-encoding (tested);
// a model re-encoded at load for the CPU (codec::InterleavedUnit) holds a little less.
//
//   DF11_ASSIGN_OR_RETURN(ModelEstimate e, EstimateModel("Qwen3-8B-DF11"));
//   if (e.resident_bytes() > free) ...
#ifndef DF11_DAEMON_RUNTIME_ENGINE_ESTIMATE_H_
#define DF11_DAEMON_RUNTIME_ENGINE_ESTIMATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codec/gpu_layout.h"
#include "daemon/runtime/engine/model_config.h"

namespace df11::runtime {

struct ModelEstimate {
  ModelConfig config;
  bool df11 = false;
  uint64_t unit_bytes = 0;   // the six tensors of every DF11 unit
  uint64_t plain_bytes = 0;  // every other tensor the model keeps
  uint64_t resident_bytes() const { return unit_bytes + plain_bytes; }
  // Read from the headers, for backends that lay the model out their own way: the sizes of each
  // DF11 unit, and the bytes of each plain tensor. Both empty when the byte counts above are an
  // upper bound from a hub listing (from_headers false).
  bool from_headers = false;
  std::vector<codec::UnitSizes> units;
  std::vector<uint64_t> plain_tensors;
};

// Errors: those of ParseModelConfig and codec::Checkpoint::Open (kNotFound for a directory
// without safetensors files, kDataLoss for a malformed header).
absl::StatusOr<ModelEstimate> EstimateModel(const codec::ModelDirectory& dir);
// codec::ModelDirectory::Read(dir), then the above.
absl::StatusOr<ModelEstimate> EstimateModel(const std::string& dir);

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_ENGINE_ESTIMATE_H_
