// A model opened and validated on the host, in the engine's per-block shape: DF11 units stay
// compressed and are decoded one block at a time into caller-owned scratch; a plain BF16
// checkpoint is used in place (mapped). It is what a backend places (Backend::Place), and the CPU
// backend's resident model itself. On CPUs with AVX-512 VBMI2 each DF11 unit is re-encoded at
// load for the CPU (codec::InterleavedUnit, smaller and decoded about twice as fast) and the pages
// of its official bitstream are returned to the page cache.
//
//   DF11_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Load("Qwen3-8B-DF11"));
//   std::vector<uint16_t> scratch(model->layer_scratch_elements());
//   codec::ThreadPool pool(8);
//   DF11_ASSIGN_OR_RETURN(LayerWeights w, model->Layer(3, scratch, &pool));
#ifndef DF11_DAEMON_RUNTIME_ENGINE_MODEL_H_
#define DF11_DAEMON_RUNTIME_ENGINE_MODEL_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codec/decoder.h"
#include "codec/interleaved.h"
#include "codec/model.h"
#include "codec/safetensors.h"
#include "codec/thread_pool.h"
#include "daemon/runtime/engine/model_config.h"
#include "daemon/runtime/engine/placed_model.h"
#include "daemon/runtime/engine/rotary_embedding.h"

namespace df11::runtime {

// A BF16 matrix [out, in] row-major: in memory (`data`), or, not decoded, the elements from
// `offset` on of a DF11 unit (`unit`), for consumers that decode as they go; where the unit was
// re-encoded for AVX-512 (codec::InterleavedUnit), `interleaved` and the matrix's region in it.
struct MatrixRef {
  const uint16_t* data = nullptr;
  const codec::UnitDecoder* unit = nullptr;
  size_t offset = 0;
  const codec::InterleavedUnit* interleaved = nullptr;
  size_t region = 0;
};

// BF16 views of one decoder layer. Pointers into a DF11 model's scratch stay valid until the
// scratch is reused; optional tensors are nullptr when absent.
struct LayerWeights {
  MatrixRef q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj;
  const uint16_t* input_norm = nullptr;  // before attention
  const uint16_t* mlp_norm = nullptr;    // before the MLP (Llama's post_attention_layernorm)
  const uint16_t* q_norm = nullptr;      // Qwen3, Gemma 3
  const uint16_t* k_norm = nullptr;      // Qwen3, Gemma 3
  const uint16_t* q_bias = nullptr;      // Qwen2, attention_bias
  const uint16_t* k_bias = nullptr;
  const uint16_t* v_bias = nullptr;
  const uint16_t* o_bias = nullptr;     // Llama attention_bias
  const uint16_t* gate_bias = nullptr;  // Llama mlp_bias
  const uint16_t* up_bias = nullptr;
  const uint16_t* down_bias = nullptr;
  const uint16_t* attention_output_norm = nullptr;  // Gemma 3 (ModelConfig::output_norms)
  const uint16_t* mlp_output_norm = nullptr;
};

// The names of decoder layer i's tensors in LayerWeights order (q, k, v, o, gate, up, down
// projections, then the norms and biases); "" for a tensor the config does not use. With
// ModelConfig::fused_projections, q/k/v and gate/up name row ranges of the stored qkv_proj and
// gate_up_proj tensors, which a Model resolves (Locate, Layer) like stored tensors.
std::vector<std::string> LayerTensorNames(const ModelConfig& config, int64_t i);
inline constexpr size_t kLayerTensors = 20;
// Whether a checkpoint's tensor (or DF11 unit) belongs to the text model the engine runs: all do,
// except the other towers of a multimodal checkpoint (ModelConfig::text_tower_only).
bool InTextModel(const ModelConfig& config, std::string_view name);
// The embedding's name, and the output head's (the embedding's when tied).
std::string EmbeddingName(const ModelConfig& config);
std::string LmHeadName(const ModelConfig& config);

// Where a weight is stored: in a DF11 unit (an index into Model::units(), with the weight's first
// element in it), or as a plain tensor. Borrowed from the Model.
struct WeightLocation {
  int unit = -1;                     // -1: a plain tensor
  size_t offset = 0;                 // first element in the unit
  std::span<const std::byte> plain;  // the plain tensor's bytes
  std::span<const int64_t> shape;
  // A plain weight that is a row range of a stored tensor (fused projections): that tensor's
  // name (as plain_tensors() lists it) and the range's first byte in it. Else the weight's name.
  std::string_view stored_name;
  uint64_t stored_byte_offset = 0;
};

class Model final : public PlacedModel {
 public:
  // Loads a DF11 directory (config.json with dfloat11_config) or a BF16 Hugging Face checkpoint.
  // Checks every tensor the architecture needs: present once, BF16, with the shape the config
  // implies. Errors: those of ParseModelConfig, codec::Df11Model::Open and codec::Checkpoint::Open;
  // kDataLoss naming a missing, mistyped or misshapen tensor.
  // With `interleave` (and InterleavedUnit::Supported()), DF11 units are re-encoded, which
  // decodes every unit once: a corrupt bitstream is then kDataLoss here rather than at the first
  // forward pass through it.
  struct LoadOptions {
    bool interleave = true;
  };
  static absl::StatusOr<std::unique_ptr<Model>> Load(const codec::ModelDirectory& dir,
                                                     const LoadOptions& options);
  // codec::ModelDirectory::Read(dir), then the above.
  static absl::StatusOr<std::unique_ptr<Model>> Load(const std::string& dir,
                                                     const LoadOptions& options);
  static absl::StatusOr<std::unique_ptr<Model>> Load(const std::string& dir) {
    return Load(dir, LoadOptions{});
  }

  const ModelConfig& config() const override { return config_; }
  // The directory it was loaded from.
  const std::string& directory() const { return directory_; }
  bool is_df11() const override { return df11_ != nullptr; }
  std::string_view device() const override { return "cpu"; }

  // Scratch (BF16 elements) that Layer and LmHead need: the largest set of DF11 units one layer
  // decodes, and the output head's unit. 0 for BF16 checkpoints. Shared by all models of an
  // engine (a backend keeps two layer scratches, so the next layer decodes while one computes).
  size_t layer_scratch_elements() const { return layer_scratch_elements_; }
  size_t head_scratch_elements() const { return head_scratch_elements_; }
  // True when some layer's norm or bias is in a DF11 unit (a custom pattern_dict): then even
  // Layer(..., decode_matrices = false) decodes into scratch.
  bool vectors_in_units() const { return vectors_in_units_; }
  // Resident bytes: compressed units (DF11, or their re-encoding) plus plain tensors (DF11
  // passthrough tensors, or every tensor of a BF16 checkpoint).
  uint64_t unit_bytes() const override { return unit_bytes_; }
  uint64_t plain_bytes() const override { return plain_bytes_; }
  // The checkpoint is mapped: each of its files must be as it was loaded.
  absl::Status CheckFiles() const override;
  absl::Status CheckReads() const override;

  // For backends that copy the model into their own memory: the DF11 units of the text model
  // (none for a BF16 checkpoint), in a fixed order; every plain tensor by name (the whole
  // checkpoint for BF16, the passthrough tensors for DF11); and where a tensor the architecture
  // reads is stored (kNotFound for another name).
  std::span<const codec::Df11Model::UnitEntry* const> units() const { return units_; }
  std::vector<std::pair<std::string, std::span<const std::byte>>> plain_tensors() const;
  absl::StatusOr<WeightLocation> Locate(const std::string& name) const;

  // Decoder layer i, decoding its DF11 units into `scratch` on `pool`; with `decode_matrices`
  // false, matrices in DF11 units are left compressed (MatrixRef::unit) and only other tensors in
  // units, if any, are decoded. kDataLoss from the decoder.
  absl::StatusOr<LayerWeights> Layer(int64_t i, std::span<uint16_t> scratch,
                                     codec::ThreadPool* pool, bool decode_matrices = true) const;
  // The embedding rows of `tokens` in fp32 into out[k * hidden, (k + 1) * hidden). A DF11
  // embedding decodes only the blocks that hold those rows. Token ids must be in the vocabulary
  // (Backend::Forward checked them); kDataLoss from the decoder.
  absl::Status EmbedTokens(std::span<const int32_t> tokens, float* out) const;
  // The output head [vocab, hidden] (the embedding when tied), decoded into `scratch` if DF11
  // unless `decode` is false.
  absl::StatusOr<MatrixRef> LmHead(std::span<uint16_t> scratch, codec::ThreadPool* pool,
                                   bool decode = true) const;
  const uint16_t* final_norm() const { return final_norm_; }
  // The RoPE of full-attention layers and of sliding-window ones, computed at load.
  const RotaryEmbedding& rotary(bool sliding) const {
    return sliding ? *sliding_rotary_ : *full_rotary_;
  }
  // Tensors of a multimodal checkpoint that are not loaded (its other towers): how many, and
  // their bytes as stored. Zero for a text model.
  size_t skipped_tensors() const { return skipped_tensors_; }
  uint64_t skipped_bytes() const { return skipped_bytes_; }

 private:
  // Where a weight lives: a plain tensor, or a piece of a DF11 unit.
  struct Source {
    const uint16_t* data = nullptr;                       // plain BF16 tensor (aligned)
    std::span<const std::byte> bytes;                     // plain tensor as stored
    const codec::Df11Model::UnitEntry* unit = nullptr;    // or a unit ...
    const codec::UnitDecoder* decoder = nullptr;          // ... with its decoder ...
    size_t offset = 0;                                    // ... and the piece's first element
    const codec::InterleavedUnit* interleaved = nullptr;  // the unit re-encoded, if it is ...
    size_t region = 0;                                    // ... and the piece's region in it
    std::vector<int64_t> shape;
    // A row range of stored tensor `stored_name` (fused projections), starting at byte
    // `stored_byte_offset` of a plain one; empty for a stored tensor.
    std::string stored_name;
    uint64_t stored_byte_offset = 0;
  };
  Model() = default;
  absl::Status Index(bool interleave);
  // Adds a Source for each piece of a fused tensor (FusedPieces) that Index found.
  absl::Status AddFusedPieces();
  absl::StatusOr<const Source*> Find(const std::string& name, std::vector<int64_t> shape) const;
  // Resolves up to kLayerTensors `sources` (null entries give an empty MatrixRef), decoding the
  // units they need into `scratch`, except for those whose `keep_compressed` entry is true.
  absl::Status Resolve(std::span<const Source* const> sources,
                       std::span<const bool> keep_compressed, std::span<MatrixRef> out,
                       std::span<uint16_t> scratch, codec::ThreadPool* pool) const;

  ModelConfig config_;
  std::string directory_;
  std::unique_ptr<codec::Df11Model> df11_;
  std::unique_ptr<codec::Checkpoint> checkpoint_;
  std::map<std::string, Source> sources_;
  // Each layer's tensors in LayerTensorNames order (null where the architecture has none) and the
  // output head, found at load: a pass looks nothing up by name.
  std::vector<std::array<const Source*, kLayerTensors>> layer_sources_;
  const Source* head_source_ = nullptr;
  std::vector<const codec::Df11Model::UnitEntry*> units_;  // those InTextModel
  std::map<const codec::Df11Model::UnitEntry*, codec::UnitDecoder> decoders_;
  std::map<const codec::Df11Model::UnitEntry*, codec::InterleavedUnit> interleaved_;
  std::vector<std::vector<uint16_t>> aligned_copies_;  // tensors whose mapping is misaligned
  const uint16_t* final_norm_ = nullptr;
  std::unique_ptr<const RotaryEmbedding> full_rotary_, sliding_rotary_;
  bool vectors_in_units_ = false;
  size_t layer_scratch_elements_ = 0;
  size_t head_scratch_elements_ = 0;
  uint64_t unit_bytes_ = 0;
  uint64_t plain_bytes_ = 0;
  size_t skipped_tensors_ = 0;
  uint64_t skipped_bytes_ = 0;
};

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_ENGINE_MODEL_H_
