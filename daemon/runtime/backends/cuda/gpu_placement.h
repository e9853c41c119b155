// How the CUDA backend lays a model out in GPU memory, and what each step of a forward pass
// decodes where. Host logic only (no CUDA), shared by the backend's placement and its estimate,
// and tested on the CPU.
//
// A model takes one arena allocation: each DF11 unit's device image (codec::GpuUnitImage: the
// official tensors plus the decoder's layout), then each plain tensor, every piece on a 256-byte
// boundary, the whole rounded up to the arena's granule. Plain tensors go each layer's q, k and v
// (weights, then biases) and gate and up first, one after the other, so that the products that
// share an input can run as one; the DF11 units of the supported architectures hold them in that
// order already. A forward pass decodes, per layer, every
// unit the layer's tensors are in, with one launch, into one of two scratch buffers shared by all
// models (layer i into ScratchBufferOf(i), so the next layer decodes while one computes); the
// output head's unit goes into the buffer after the last layer's, and embedding rows into
// kEmbeddingBuffer (before layer 0, which uses the other). Plain tensors are read where they are
// resident.
//
//   DF11_ASSIGN_OR_RETURN(GpuModelPlan plan, PlanGpuModel(*host, granule));
//   ... allocate plan.layout.bytes, upload, scratch of plan.scratch_elements[b] per buffer ...
#ifndef DF11_DAEMON_RUNTIME_BACKENDS_CUDA_GPU_PLACEMENT_H_
#define DF11_DAEMON_RUNTIME_BACKENDS_CUDA_GPU_PLACEMENT_H_

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "codec/gpu_layout.h"
#include "daemon/runtime/backends/cuda/scratch_buffer.h"
#include "daemon/runtime/engine/model.h"
#include "daemon/runtime/engine/model_config.h"

namespace df11::runtime {

// Where the pieces of a model go in its allocation, from sizes alone.
struct GpuPlacementLayout {
  std::vector<codec::GpuUnitImage> unit_images;
  std::vector<uint64_t> unit_offsets;   // of each unit's image
  std::vector<uint64_t> plain_offsets;  // of each plain tensor
  uint64_t unit_bytes = 0;              // the units' images
  uint64_t plain_bytes = 0;  // the rest of the allocation: plain tensors, alignment, rounding
  uint64_t bytes() const { return unit_bytes + plain_bytes; }
};

// Lays out `units` and `plain` tensors (their bytes) in that order; bytes() is a multiple of
// `granule`.
GpuPlacementLayout LayOutGpuPlacement(std::span<const codec::UnitSizes> units,
                                      std::span<const uint64_t> plain, uint64_t granule);

// Where a tensor is during a forward pass.
struct TensorSource {
  enum class Kind { kAbsent, kResident, kScratch };
  Kind kind = Kind::kAbsent;
  uint64_t offset = 0;  // bytes: from the model's allocation (kResident) or the scratch buffer
  uint64_t bytes = 0;
};

// One decode launch: units (indices into Model::units()) and where each lands in the scratch
// buffer (element offsets, consecutive).
struct DecodeStep {
  std::vector<int> units;
  std::vector<uint64_t> scratch_offsets;
  uint64_t scratch_elements = 0;
};

struct LayerPlan {
  DecodeStep decode;  // empty for a layer without units (BF16)
  std::array<TensorSource, kLayerTensors> tensors;
  // Whether q, k and v (gate and up) lie one after the other where they are read, their biases
  // likewise or absent: then one product computes them together.
  bool qkv_adjacent = false;
  bool gate_up_adjacent = false;
};

struct GpuModelPlan {
  GpuPlacementLayout layout;
  std::vector<codec::UnitSizes> unit_sizes;  // of Model::units(), in order
  std::vector<LayerPlan> layers;
  ScratchBuffer head_buffer = ScratchBuffer::k0;  // where the output head decodes
  DecodeStep head_decode;
  TensorSource head;  // in buffer head_buffer after head_decode, or resident
  // The embedding: rows of unit `embedding_unit` from element `embedding_offset` on, or
  // resident at `embedding.offset` when embedding_unit is -1.
  int embedding_unit = -1;
  uint64_t embedding_offset = 0;
  TensorSource embedding;
  TensorSource final_norm;  // resident (Model::Load requires it plain)
  // Elements a row's decode may span: the hidden size plus the largest block of the embedding's
  // unit twice (a row starts and ends inside blocks).
  uint64_t embedding_row_span = 0;
  // Scratch this model needs in each of the two buffers, in BF16 elements.
  std::array<uint64_t, 2> scratch_elements = {0, 0};
};

// Plans `model` (opened on the host) for the GPU. kInvalidArgument when a unit is too large for
// the decoder (2^32 elements or stream bytes) or a layer has more units than one launch takes.
absl::StatusOr<GpuModelPlan> PlanGpuModel(const Model& model, uint64_t granule);

// The scratch (BF16 elements per buffer) a model of `config` needs with the default pattern of
// units (one per decoder layer, the embedding and the head): what an estimate assumes before the
// files are opened.
std::array<uint64_t, 2> ScratchElementsFromConfig(const ModelConfig& config, bool df11);

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_BACKENDS_CUDA_GPU_PLACEMENT_H_
