// Synthetic BF16 Hugging Face models (df11 synth, df11 demo and the tests).
#ifndef DF11_TOOLS_DF11_SYNTH_H_
#define DF11_TOOLS_DF11_SYNTH_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace df11::tool {

struct SynthSpec {
  std::string arch = "qwen3";  // qwen3 | qwen2 | llama
  int64_t layers = 4;
  int64_t hidden = 512;
  int64_t intermediate = 1536;
  int64_t heads = 8;
  int64_t kv_heads = 4;
  int64_t head_dim = 0;  // 0: hidden / heads
  int64_t vocab = 8192;
  bool tied = false;
  bool shards = false;  // one safetensors file per layer plus an index
  int64_t seed = 1;
};

// Writes config.json, generation_config.json and the weights of `spec` into `dir` (created).
absl::Status WriteSyntheticModel(const std::string& dir, const SynthSpec& spec);

}  // namespace df11::tool

#endif  // DF11_TOOLS_DF11_SYNTH_H_
