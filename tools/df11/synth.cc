// df11 synth: a synthetic BF16 Hugging Face model with the tensor names, shapes and config of a
// real Qwen3, Qwen2 or Llama checkpoint, for tests, benchmarks and the demo.
#include "tools/df11/synth.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "codec/safetensors.h"
#include "codec/synthetic.h"
#include "codec/thread_pool.h"
#include "nlohmann/json.hpp"
#include "tools/df11/cli.h"
#include "tools/df11/commands.h"

namespace df11::tool {
namespace {

constexpr char kHelp[] = R"(Usage: df11 synth DIR [options]

Writes a BF16 model with random weights (N(0, 0.02^2) for linear and embedding weights, ones for
norms) and the config.json, tensor names and shapes of a Hugging Face checkpoint. Defaults give a
small Qwen3-shaped model (21 M parameters, 42 MB).

  --arch qwen3|qwen2|llama   architecture (default qwen3)
  --layers N                 decoder layers (default 4)
  --hidden N                 hidden size (default 512)
  --intermediate N           MLP size (default 1536)
  --heads N                  attention heads (default 8)
  --kv-heads N               key/value heads (default 4)
  --head-dim N               head size (default hidden / heads)
  --vocab N                  vocabulary size (default 8192)
  --tied                     tie the embeddings (no lm_head tensor)
  --shards                   one safetensors shard per layer, with model.safetensors.index.json
  --seed N                   random seed (default 1)
)";

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  bool ones = false;  // a norm
};

absl::Status WriteJson(const fs::path& path, const Json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out.flush()) return absl::InternalError(absl::StrCat("cannot write ", path.string()));
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteSyntheticModel(const std::string& dir, const SynthSpec& spec) {
  const int64_t head_dim = spec.head_dim > 0 ? spec.head_dim : spec.hidden / spec.heads;
  const int64_t q = spec.heads * head_dim, kv = spec.kv_heads * head_dim;
  const int64_t h = spec.hidden, m = spec.intermediate;
  // Shard groups: embeddings, each layer, then the final norm and head.
  std::vector<std::vector<Tensor>> groups;
  groups.push_back({{"model.embed_tokens.weight", {spec.vocab, h}}});
  for (int64_t i = 0; i < spec.layers; ++i) {
    const std::string p = absl::StrCat("model.layers.", i, ".");
    std::vector<Tensor> g = {
        {p + "input_layernorm.weight", {h}, true},
        {p + "post_attention_layernorm.weight", {h}, true},
        {p + "self_attn.q_proj.weight", {q, h}},
        {p + "self_attn.k_proj.weight", {kv, h}},
        {p + "self_attn.v_proj.weight", {kv, h}},
        {p + "self_attn.o_proj.weight", {h, q}},
        {p + "mlp.gate_proj.weight", {m, h}},
        {p + "mlp.up_proj.weight", {m, h}},
        {p + "mlp.down_proj.weight", {h, m}},
    };
    if (spec.arch == "qwen2") {
      g.push_back({p + "self_attn.q_proj.bias", {q}});
      g.push_back({p + "self_attn.k_proj.bias", {kv}});
      g.push_back({p + "self_attn.v_proj.bias", {kv}});
    }
    if (spec.arch == "qwen3") {
      g.push_back({p + "self_attn.q_norm.weight", {head_dim}, true});
      g.push_back({p + "self_attn.k_norm.weight", {head_dim}, true});
    }
    groups.push_back(std::move(g));
  }
  groups.push_back({{"model.norm.weight", {h}, true}});
  if (!spec.tied) groups.back().push_back({"lm_head.weight", {spec.vocab, h}});
  if (!spec.shards) {
    std::vector<Tensor> all;
    for (auto& g : groups) all.insert(all.end(), g.begin(), g.end());
    groups = {all};
  }

  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  Json weight_map = Json::object();
  uint64_t seed = static_cast<uint64_t>(spec.seed), total = 0;
  codec::ThreadPool pool(0);
  for (size_t s = 0; s < groups.size(); ++s) {
    const std::string file = groups.size() == 1 ? "model.safetensors"
                                                : absl::StrFormat("model-%05d-of-%05d.safetensors",
                                                                  s + 1, groups.size());
    // Each random tensor has the next seed, as if drawn in order; they are drawn in parallel.
    const std::vector<Tensor>& group = groups[s];
    std::vector<uint64_t> seeds(group.size());
    for (size_t i = 0; i < group.size(); ++i) seeds[i] = group[i].ones ? 0 : seed++;
    std::vector<std::vector<uint16_t>> data(group.size());
    pool.ParallelFor(group.size(), 1, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        int64_t n = 1;
        for (int64_t d : group[i].shape) n *= d;
        data[i] = group[i].ones ? std::vector<uint16_t>(n, codec::FloatToBf16(1.0f))
                                : codec::NormalBf16(seeds[i], 0.02f, n);
      }
    });
    codec::SafetensorsWriter writer;
    for (size_t i = 0; i < group.size(); ++i) {
      const Tensor& t = group[i];
      absl::Status st =
          writer.Add(t.name, codec::DType::kBF16, t.shape, std::as_bytes(std::span(data[i])));
      if (!st.ok()) return st;
      weight_map[t.name] = file;
      total += 2 * data[i].size();
    }
    writer.SetMetadata({{"format", "pt"}});
    if (absl::Status st = writer.WriteFile((fs::path(dir) / file).string()); !st.ok()) return st;
  }
  if (groups.size() > 1) {
    Json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    if (absl::Status st = WriteJson(fs::path(dir) / "model.safetensors.index.json", index); !st.ok()) {
      return st;
    }
  }
  const char* cls = spec.arch == "qwen3"   ? "Qwen3ForCausalLM"
                    : spec.arch == "qwen2" ? "Qwen2ForCausalLM"
                                           : "LlamaForCausalLM";
  Json config = {{"architectures", {cls}},
                 {"model_type", spec.arch},
                 {"hidden_size", h},
                 {"intermediate_size", m},
                 {"num_hidden_layers", spec.layers},
                 {"num_attention_heads", spec.heads},
                 {"num_key_value_heads", spec.kv_heads},
                 {"head_dim", head_dim},
                 {"vocab_size", spec.vocab},
                 {"max_position_embeddings", 4096},
                 {"rms_norm_eps", 1e-6},
                 {"rope_theta", 1000000.0},
                 {"tie_word_embeddings", spec.tied},
                 {"bos_token_id", 1},
                 {"eos_token_id", 2},
                 {"torch_dtype", "bfloat16"}};
  if (absl::Status st = WriteJson(fs::path(dir) / "config.json", config); !st.ok()) return st;
  return WriteJson(fs::path(dir) / "generation_config.json",
                   {{"bos_token_id", 1}, {"eos_token_id", 2}, {"do_sample", false}});
}

int RunSynth(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args = Args::Parse(
      argv,
      {"arch", "layers", "hidden", "intermediate", "heads", "kv-heads", "head-dim", "vocab", "seed"},
      {"tied", "shards", "help"});
  if (!args.ok()) return UsageError("synth", std::string(args.status().message()));
  if (args->Has("help")) return std::fputs(kHelp, stdout), kExitOk;
  if (args->positional().size() != 1) return UsageError("synth", "expected DIR");
  SynthSpec spec;
  spec.arch = args->Get("arch").value_or("qwen3");
  if (spec.arch != "qwen3" && spec.arch != "qwen2" && spec.arch != "llama") {
    return UsageError("synth", "--arch must be qwen3, qwen2 or llama");
  }
  struct IntFlag {
    const char* name;
    int64_t* value;
    int64_t max;
  };
  for (IntFlag f : {IntFlag{"layers", &spec.layers, 1000}, IntFlag{"hidden", &spec.hidden, 65536},
                    IntFlag{"intermediate", &spec.intermediate, 262144},
                    IntFlag{"heads", &spec.heads, 1024}, IntFlag{"kv-heads", &spec.kv_heads, 1024},
                    IntFlag{"head-dim", &spec.head_dim, 4096}, IntFlag{"vocab", &spec.vocab, 1 << 20},
                    IntFlag{"seed", &spec.seed, INT64_MAX}}) {
    absl::StatusOr<int64_t> v = args->GetInt(f.name, *f.value, f.name == std::string("head-dim") ? 0 : 1, f.max);
    if (!v.ok()) return UsageError("synth", std::string(v.status().message()));
    *f.value = *v;
  }
  if (spec.head_dim == 0 && spec.hidden % spec.heads != 0) {
    return UsageError("synth", "--hidden must be a multiple of --heads (or give --head-dim)");
  }
  if (spec.heads % spec.kv_heads != 0) return UsageError("synth", "--heads must be a multiple of --kv-heads");
  spec.tied = args->Has("tied");
  spec.shards = args->Has("shards");
  if (absl::Status s = WriteSyntheticModel(args->positional()[0], spec); !s.ok()) {
    return Fail("synth", s);
  }
  std::printf("%s\n", args->positional()[0].c_str());
  return kExitOk;
}

}  // namespace df11::tool
