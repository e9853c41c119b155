#include "daemon/runtime/model_config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "codec/base/status_macros.h"
#include "nlohmann/json.hpp"

namespace df11::runtime {
namespace {

using Json = nlohmann::json;

absl::StatusOr<int64_t> PositiveInt(const Json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end() || !it->is_number_integer() || it->get<int64_t>() <= 0 ||
      it->get<int64_t>() > (int64_t{1} << 24)) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json: `", field, "` must be a positive integer"));
  }
  return it->get<int64_t>();
}

double NumberOr(const Json& j, const char* field, double fallback) {
  auto it = j.find(field);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

bool BoolOr(const Json& j, const char* field, bool fallback) {
  auto it = j.find(field);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

// An int or a list of ints (eos_token_id).
void AddIds(const Json& j, const char* field, std::vector<int32_t>& ids) {
  auto it = j.find(field);
  if (it == j.end()) return;
  auto add = [&ids](const Json& v) {
    if (!v.is_number_integer()) return;
    const int32_t id = v.get<int32_t>();
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  if (it->is_array()) {
    for (const Json& v : *it) add(v);
  } else {
    add(*it);
  }
}

absl::Status ParseRope(const Json& config, RopeConfig& rope) {
  // transformers v5 writes `rope_parameters` (theta included); v4 writes `rope_theta` and an
  // optional `rope_scaling`.
  Json params = config.contains("rope_parameters") && config["rope_parameters"].is_object()
                    ? config["rope_parameters"]
                    : (config.contains("rope_scaling") && config["rope_scaling"].is_object()
                           ? config["rope_scaling"]
                           : Json::object());
  rope.theta = NumberOr(params, "rope_theta", NumberOr(config, "rope_theta", 10000.0));
  std::string type = "default";
  if (params.contains("rope_type") && params["rope_type"].is_string()) {
    type = params["rope_type"].get<std::string>();
  } else if (params.contains("type") && params["type"].is_string()) {
    type = params["type"].get<std::string>();
  }
  if (type == "default") {
    rope.type = RopeConfig::Type::kDefault;
  } else if (type == "linear") {
    rope.type = RopeConfig::Type::kLinear;
    rope.factor = NumberOr(params, "factor", 1.0);
  } else if (type == "llama3") {
    rope.type = RopeConfig::Type::kLlama3;
    rope.factor = NumberOr(params, "factor", 8.0);
    rope.low_freq_factor = NumberOr(params, "low_freq_factor", 1.0);
    rope.high_freq_factor = NumberOr(params, "high_freq_factor", 4.0);
    rope.original_max_position_embeddings = static_cast<int64_t>(
        NumberOr(params, "original_max_position_embeddings",
                 NumberOr(config, "max_position_embeddings", 8192)));
    if (rope.high_freq_factor <= rope.low_freq_factor) {
      return absl::InvalidArgumentError(
          "config.json: llama3 rope scaling needs high_freq_factor > low_freq_factor");
    }
  } else {
    return absl::FailedPreconditionError(absl::StrCat(
        "config.json: rope type `", type, "` is not supported; supported: default, linear, llama3"));
  }
  if (rope.theta <= 0 || rope.factor <= 0) {
    return absl::InvalidArgumentError("config.json: rope theta and factor must be positive");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path.string()));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

absl::StatusOr<ModelConfig> ParseModelConfig(const std::string& config_json,
                                             const std::string& generation_config_json) {
  const Json config = Json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) return absl::InvalidArgumentError("config.json is not a JSON object");
  ModelConfig c;
  auto archs = config.find("architectures");
  if (archs == config.end() || !archs->is_array() || archs->empty() || !(*archs)[0].is_string()) {
    return absl::InvalidArgumentError("config.json: `architectures` must name the model class");
  }
  c.architecture_name = (*archs)[0].get<std::string>();
  if (c.architecture_name == "LlamaForCausalLM") {
    c.architecture = Architecture::kLlama;
  } else if (c.architecture_name == "Qwen2ForCausalLM") {
    c.architecture = Architecture::kQwen2;
  } else if (c.architecture_name == "Qwen3ForCausalLM") {
    c.architecture = Architecture::kQwen3;
  } else {
    return absl::FailedPreconditionError(absl::StrCat(
        "architecture ", c.architecture_name,
        " is not supported; supported: LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM"));
  }
  DF11_ASSIGN_OR_RETURN(c.hidden_size, PositiveInt(config, "hidden_size"));
  DF11_ASSIGN_OR_RETURN(c.intermediate_size, PositiveInt(config, "intermediate_size"));
  DF11_ASSIGN_OR_RETURN(c.num_layers, PositiveInt(config, "num_hidden_layers"));
  DF11_ASSIGN_OR_RETURN(c.num_heads, PositiveInt(config, "num_attention_heads"));
  DF11_ASSIGN_OR_RETURN(c.vocab_size, PositiveInt(config, "vocab_size"));
  c.num_kv_heads = c.num_heads;
  if (config.contains("num_key_value_heads") && !config["num_key_value_heads"].is_null()) {
    DF11_ASSIGN_OR_RETURN(c.num_kv_heads, PositiveInt(config, "num_key_value_heads"));
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("config.json: num_attention_heads ", c.num_heads,
                                                   " is not a multiple of num_key_value_heads ",
                                                   c.num_kv_heads));
  }
  if (config.contains("head_dim") && !config["head_dim"].is_null()) {
    DF11_ASSIGN_OR_RETURN(c.head_dim, PositiveInt(config, "head_dim"));
  } else {
    if (c.hidden_size % c.num_heads != 0) {
      return absl::InvalidArgumentError("config.json: hidden_size is not a multiple of the heads");
    }
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.head_dim % 2 != 0) return absl::InvalidArgumentError("config.json: head_dim must be even");
  c.max_position_embeddings = static_cast<int64_t>(NumberOr(config, "max_position_embeddings", 4096));
  c.rms_norm_eps = NumberOr(config, "rms_norm_eps", 1e-6);
  c.tie_word_embeddings = BoolOr(config, "tie_word_embeddings", false);
  c.attention_bias = c.architecture == Architecture::kQwen2 || BoolOr(config, "attention_bias", false);
  c.mlp_bias = c.architecture == Architecture::kLlama && BoolOr(config, "mlp_bias", false);
  if (config.contains("hidden_act") && config["hidden_act"] != "silu") {
    return absl::FailedPreconditionError("config.json: only hidden_act `silu` is supported");
  }
  DF11_RETURN_IF_ERROR(ParseRope(config, c.rope));
  if (config.contains("bos_token_id") && config["bos_token_id"].is_number_integer()) {
    c.bos_token_id = config["bos_token_id"].get<int32_t>();
  }
  AddIds(config, "eos_token_id", c.eos_token_ids);
  if (!generation_config_json.empty()) {
    const Json g = Json::parse(generation_config_json, nullptr, /*allow_exceptions=*/false);
    if (!g.is_object()) {
      return absl::InvalidArgumentError("generation_config.json is not a JSON object");
    }
    AddIds(g, "eos_token_id", c.eos_token_ids);
    if (g.contains("bos_token_id") && g["bos_token_id"].is_number_integer()) {
      c.bos_token_id = g["bos_token_id"].get<int32_t>();
    }
    c.do_sample = BoolOr(g, "do_sample", false);
    c.temperature = NumberOr(g, "temperature", 1.0);
    c.top_p = NumberOr(g, "top_p", 1.0);
    c.top_k = static_cast<int64_t>(NumberOr(g, "top_k", 0));
    c.repetition_penalty = NumberOr(g, "repetition_penalty", 1.0);
  }
  return c;
}

absl::StatusOr<ModelConfig> ReadModelConfig(const std::string& dir) {
  DF11_ASSIGN_OR_RETURN(std::string config, ReadFile(std::filesystem::path(dir) / "config.json"));
  absl::StatusOr<std::string> generation =
      ReadFile(std::filesystem::path(dir) / "generation_config.json");
  return ParseModelConfig(config, generation.ok() ? *generation : std::string());
}

}  // namespace df11::runtime
