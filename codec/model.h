// Model directories in the official DF11 layout (codec/FORMAT.md, "Model layout"): compressing a
// Hugging Face BF16 checkpoint, opening a DF11 directory, and decompressing it back.
//
//   DF11_ASSIGN_OR_RETURN(CompressReport r, CompressModel("Qwen3-8B", "Qwen3-8B-DF11", {}));
//   DF11_ASSIGN_OR_RETURN(Df11Model m, Df11Model::Open("Qwen3-8B-DF11"));
//   for (const Df11Model::UnitEntry& u : m.units()) ...
#ifndef DF11_CODEC_MODEL_H_
#define DF11_CODEC_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codec/architecture.h"
#include "codec/model_directory.h"
#include "codec/safetensors.h"
#include "codec/unit.h"

namespace df11::codec {

// Called as work completes: `done` of `total` bytes of BF16 weights, `item` the unit just finished.
// Calls are serialised; they come from whichever thread finished the work.
using ProgressFn = std::function<void(const std::string& item, uint64_t done, uint64_t total)>;

struct CompressOptions {
  int threads = 0;                          // units encoded at once; 0: one per hardware thread
  std::optional<PatternDict> pattern_dict;  // default: DefaultPatternDict of config.json
  ProgressFn progress;
};

struct CompressReport {
  int units = 0;                     // DF11 units written
  uint64_t unit_bf16_bytes = 0;      // BF16 bytes of the weights inside those units
  uint64_t unit_stored_bytes = 0;    // bytes of their six tensors
  uint64_t passthrough_bytes = 0;    // tensors kept as they were (norms, biases, BF16 units)
  std::vector<std::string> kept_bf16;  // units that cannot be DF11-coded, with the reason
  std::vector<std::string> copied_files;  // tokenizer, generation config, ...
};

// Compresses the checkpoint in `src_dir` (config.json + safetensors, sharded or not) into
// `dst_dir` in the official layout: config.json with dfloat11_config, one file per unit named from
// its path, the other tensors byte-identical in model.safetensors, other files copied. A unit that
// cannot be DF11-coded (Inf/NaN/huge exponents) stays BF16 and is excluded from its pattern.
// Holds at most `threads` units in memory. kNotFound for a missing directory or config.json,
// kInvalidArgument for an unsupported architecture, a bad pattern dict, a unit weight that is not
// 2-D BF16 or a weight claimed by two units, kFailedPrecondition if `dst_dir` already holds
// safetensors files, kDataLoss for corrupt inputs.
absl::StatusOr<CompressReport> CompressModel(const std::string& src_dir, const std::string& dst_dir,
                                             const CompressOptions& options);

// An opened DF11 directory: every safetensors file mapped, every unit validated. Movable; views
// and units stay valid while it lives.
class Df11Model {
 public:
  struct UnitEntry {
    std::string path;                          // "model.layers.0"
    std::string pattern;                       // the pattern_dict key it matched
    std::vector<std::string> weight_names;     // "model.layers.0.self_attn.q_proj.weight", ...
    std::vector<std::vector<int64_t>> shapes;  // of each weight
    std::unique_ptr<std::vector<int64_t>> split_positions;  // owned copy (aligned)
    std::unique_ptr<Unit> unit;
    const SafetensorsFile* file = nullptr;  // the file holding the unit
  };

  // kNotFound if `dir` or its config.json is missing; kFailedPrecondition for a directory that is
  // not DF11 (no dfloat11_config) or is a legacy v0.1 pickle repository (refused, never
  // unpickled), or for threads_per_block != [512] / bytes_per_thread != 8; kInvalidArgument for a
  // pattern that does not compile; kDataLoss for a corrupt file, a unit whose tensors are missing
  // or mistyped, a unit matching no pattern or two, or weights whose shapes cannot be known.
  static absl::StatusOr<Df11Model> Open(const ModelDirectory& dir);
  // ModelDirectory::Read(dir), then the above.
  static absl::StatusOr<Df11Model> Open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const std::string& version() const { return version_; }
  const PatternDict& pattern_dict() const { return pattern_dict_; }
  const std::vector<UnitEntry>& units() const { return units_; }
  // Every tensor that is not one of the units' six: norms, biases, remainder. Sorted by name.
  const std::vector<const TensorView*>& passthrough() const { return passthrough_; }
  const Checkpoint& checkpoint() const { return *checkpoint_; }
  // config.json as read, with dfloat11_config.
  const nlohmann::ordered_json& config() const { return config_; }

 private:
  std::string dir_;
  std::string version_;
  nlohmann::ordered_json config_;
  PatternDict pattern_dict_;
  std::unique_ptr<Checkpoint> checkpoint_;
  std::vector<UnitEntry> units_;
  std::vector<const TensorView*> passthrough_;
};

struct DecompressOptions {
  int threads = 0;  // decoder threads; 0: one per hardware thread
  ProgressFn progress;
};

struct DecompressReport {
  int units = 0;
  int shards = 0;
  uint64_t bf16_bytes = 0;  // bytes of all tensors written
};

// Decodes `model` into a BF16 Hugging Face checkpoint in `dst_dir`: one shard per unit (its
// weights under their original names and shapes, plus the tensors of its file) and one for the
// remainder, with model.safetensors.index.json; config.json without dfloat11_config; other files
// copied. Holds one unit's BF16 output at a time. kFailedPrecondition if `dst_dir` already holds
// safetensors files; kDataLoss from the decoder.
absl::StatusOr<DecompressReport> DecompressModel(const Df11Model& model, const std::string& dst_dir,
                                                 const DecompressOptions& options);

// The six tensors of unit `path` ("model.layers.0") in `file`, checked for presence, dtype and rank
// (not yet validated: see Unit::Validate). Split positions are copied into `split_storage`, which
// must outlive the result. kDataLoss naming the tensor when one is missing or mistyped.
absl::StatusOr<UnitTensors> FindUnitTensors(const SafetensorsFile& file, const std::string& path,
                                            std::vector<int64_t>& split_storage);

// Parses a pattern dict given as JSON ({"regex": ["attr", ...], ...}, order kept).
// kInvalidArgument naming what is wrong.
absl::StatusOr<PatternDict> ParsePatternDict(const std::string& json_text);

}  // namespace df11::codec

#endif  // DF11_CODEC_MODEL_H_
