// A model folder's description files, read once per load: config.json (with its dfloat11_config
// when the model is DF11) and generation_config.json, each within a size cap. Everything that
// reads a model (the estimate, the engine's Model, the codec's Df11Model and compressor) takes a
// ModelDirectory, so no one opens these files again; the typed views (codec::ArchitectureInfo,
// runtime::ModelConfig) are derived from the parsed objects held here.
//
//   DF11_ASSIGN_OR_RETURN(codec::ModelDirectory dir, codec::ModelDirectory::Read("Qwen3-8B-DF11"));
//   if (dir.is_df11()) { DF11_ASSIGN_OR_RETURN(codec::Df11Model m, codec::Df11Model::Open(dir)); }
#ifndef DF11_CODEC_MODEL_DIRECTORY_H_
#define DF11_CODEC_MODEL_DIRECTORY_H_

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace df11::codec {

class ModelDirectory {
 public:
  // kNotFound when `path` is not a directory or has no config.json; kInvalidArgument when
  // config.json or generation_config.json is larger than base::kMaxModelConfigBytes, is not a
  // regular file, or is not a JSON object (the message names the file).
  static absl::StatusOr<ModelDirectory> Read(const std::string& path);

  const std::string& path() const { return path_; }
  // config.json, in the file's key order (a conversion writes it back).
  const nlohmann::ordered_json& config() const { return config_; }
  // generation_config.json; an empty object when the folder has none.
  const nlohmann::ordered_json& generation_config() const { return generation_config_; }
  // Whether config.json has a dfloat11_config section (a DF11 model, or one that claims to be).
  bool is_df11() const;

 private:
  std::string path_;
  nlohmann::ordered_json config_;
  nlohmann::ordered_json generation_config_ = nlohmann::ordered_json::object();
};

}  // namespace df11::codec

#endif  // DF11_CODEC_MODEL_DIRECTORY_H_
