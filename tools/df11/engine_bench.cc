// df11 engine-bench: engine speed (CPU, or a CUDA GPU) with DF11 weights against the same engine
// with BF16 weights, in one run: prefill and decode tokens per second, and the memory each model
// takes.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "codec/base/status_macros.h"
#include "daemon/runtime/engine/model.h"
#include "nlohmann/json.hpp"
#include "tools/df11/cli.h"
#include "tools/df11/commands.h"
#include "tools/df11/device_backend.h"
#include "tools/df11/device_rates.h"

namespace df11::tool {
namespace {

constexpr char kHelp[] = R"(Usage: df11 engine-bench [--df11 DIR] [--bf16 DIR] [options]

Runs the engine on a DF11 model and on the same model in BF16 (either may be left out) with
random prompt tokens and reports, per configuration, the median of --runs of:
  prefill   a forward pass over --prompt-tokens tokens per sequence   tokens/s
  decode    --tokens steps of every sequence, batched, after that     tokens/s (all sequences)
Configurations: bf16; df11 (the next block decoded while the current one computes); and, on the
CPU, df11-sequential (each block decoded, then computed). They run in alternation, so a change in the
machine's speed hits all of them alike; the ratios df11/bf16 are the result to quote. Memory: each
model's resident bytes (DF11: compressed units + passthrough tensors), the backend's scratch, the
KV cache, and the process's peak RSS. On a GPU also, per decode step: kernel launches and copies,
event operations and host waits (the device's counters), and each decoder operation's device time
from 8 more steps timed with events (profile_us_per_step). And the step against the GPU's
ceilings, measured in the same run once the models are unloaded (device_rates): the rate of a
kernel that only reads a buffer much larger than L2, and cuBLAS's BF16 product rate at 8192^3.
roofline_step_us is the bytes a decode step must read (the model's resident bytes, an untied
embedding table's included though a step reads a few of its rows, and the KV positions attended
at the timed steps' mean length) at that read rate, step_vs_roofline that over the step's time;
attention_tflops counts 4 x head_dim FLOPs per head and position attended over the profiled
attention time, and attention_share is that time's share of the profiled step.

  --prompt-tokens N   prompt length (default 128)
  --tokens N          decoded tokens per sequence and run (default 16)
  --batch N           sequences decoded together (default 1)
  --runs N            runs per configuration (default 3)
  --device D          cpu (default) or cuda:N (the CUDA backend: both models resident in one
                      arena of --budget of the GPU's memory, of which --kv-cache is the KV pool)
  --budget SIZE       with cuda:N: df11d's memory.budget spelling (default 90%)
  --kv-cache SIZE     with cuda:N: df11d's memory.kv_cache spelling (default 10%; batch B needs
                      B x (prompt + tokens) positions)
  --fused-max-rows N  with cuda:N: df11d's memory.fused_max_rows (default 8: decode steps of up
                      to 8 sequences multiply by the compressed projections directly; 0: every
                      step decodes them into scratch first)
  --gpu-layout L      with cuda:N: df11d's memory.gpu_layout, tiled (default) or lane
  --threads N         CPU threads (default: one per CPU)
  --json              one JSON object instead of text
)";

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

uint64_t PeakRssBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

struct Config {
  std::string name;
  const runtime::PlacedModel* model;
  runtime::Backend* backend;
  std::vector<double> prefill_tps, decode_tps;
  uint64_t kv_bytes = 0;
  // Per decode step, from the backend's counters over the last run's steps (a GPU's; zero on the
  // CPU), and the device time of each decoder operation per step from a profiled run.
  double launches_per_step = 0, event_ops_per_step = 0, host_syncs_per_step = 0;
  // The host's time per step until the step's last launch was issued (the last run's), beside
  // the step's time (the runs' median).
  double enqueue_us_per_step = 0, step_us = 0;
  std::map<std::string, runtime::DeviceWork::OpTime> profile;
  int64_t profiled_steps = 0;
  // Kept for the report (a GPU's models are unloaded before it).
  uint64_t resident_bytes = 0, scratch_bytes = 0;
};

// The key and value positions one decode step of `batch` sequences of `positions` positions
// attends to, summed over the layers (a sliding layer's at most its window).
double PositionsAttended(const runtime::ModelConfig& mc, int64_t batch, double positions) {
  double sum = 0;
  for (int64_t l = 0; l < mc.num_layers; ++l) {
    const int64_t window = mc.SlidingWindow(l);
    sum += window > 0 ? std::min<double>(positions, window) : positions;
  }
  return batch * sum;
}

// `batch` sequences of one prompt, with room for `tokens` more each: their caches, their last
// logits, and the steps that feed each its argmax.
struct Sequences {
  size_t vocab = 0;
  std::vector<std::unique_ptr<runtime::KvCache>> caches;
  std::vector<float> logits;
  std::vector<int32_t> next;
  std::vector<runtime::SequenceStep> steps;
};

absl::StatusOr<Sequences> NewSequences(Config& c, size_t prompt_tokens, int64_t tokens,
                                       int64_t batch) {
  const runtime::ModelConfig& mc = c.model->config();
  Sequences s;
  s.vocab = static_cast<size_t>(mc.vocab_size);
  for (int64_t b = 0; b < batch; ++b) {
    DF11_ASSIGN_OR_RETURN(s.caches.emplace_back(),
                          c.backend->NewCache(mc, static_cast<int64_t>(prompt_tokens) + tokens));
  }
  s.logits.resize(batch * s.vocab);
  s.next.resize(batch);
  s.steps.resize(batch);
  return s;
}

// Each sequence's prefill of `prompt`, on its own.
absl::Status Prefill(Config& c, const std::vector<int32_t>& prompt, Sequences& s) {
  const size_t V = s.vocab;
  for (size_t b = 0; b < s.caches.size(); ++b) {
    runtime::SequenceStep step{s.caches[b].get(), prompt};
    DF11_RETURN_IF_ERROR(
        c.backend->Forward(*c.model, std::span(&step, 1), std::span(s.logits).subspan(b * V, V)));
  }
  return absl::OkStatus();
}

// One decode step of every sequence in one batch, each fed the argmax of its last logits.
absl::Status DecodeStep(Config& c, Sequences& s) {
  for (size_t b = 0; b < s.caches.size(); ++b) {
    const auto row = s.logits.begin() + b * s.vocab;
    s.next[b] = static_cast<int32_t>(std::max_element(row, row + s.vocab) - row);
    s.steps[b] = runtime::SequenceStep{s.caches[b].get(), std::span(&s.next[b], 1)};
  }
  return c.backend->Forward(*c.model, s.steps, s.logits);
}

// `batch` sequences: each prompt's prefill on its own, then `tokens` decode steps of all of them
// in one batch.
absl::Status RunOnce(Config& c, const std::vector<int32_t>& prompt, int64_t tokens, int64_t batch) {
  DF11_ASSIGN_OR_RETURN(Sequences s, NewSequences(c, prompt.size(), tokens, batch));
  c.kv_bytes = 0;
  for (const auto& cache : s.caches) c.kv_bytes += cache->bytes();
  auto start = Clock::now();
  DF11_RETURN_IF_ERROR(Prefill(c, prompt, s));
  c.prefill_tps.push_back(batch * prompt.size() /
                          std::chrono::duration<double>(Clock::now() - start).count());
  const runtime::DeviceWork before = c.backend->Work();
  start = Clock::now();
  for (int64_t i = 0; i < tokens; ++i) DF11_RETURN_IF_ERROR(DecodeStep(c, s));
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  c.decode_tps.push_back(batch * tokens / seconds);
  const runtime::DeviceWork after = c.backend->Work();
  c.enqueue_us_per_step = 1e6 * (after.enqueue_seconds - before.enqueue_seconds) / tokens;
  c.launches_per_step = double(after.launches - before.launches) / tokens;
  c.event_ops_per_step = double(after.event_ops - before.event_ops) / tokens;
  c.host_syncs_per_step = double(after.host_syncs - before.host_syncs) / tokens;
  return absl::OkStatus();
}

// A few decode steps with the backend's profiling on: each decoder operation's device time per
// step (a separate run: the profile's events slow the steps a little).
absl::Status Profile(Config& c, const std::vector<int32_t>& prompt, int64_t batch) {
  constexpr int64_t kSteps = 8;
  DF11_ASSIGN_OR_RETURN(Sequences s, NewSequences(c, prompt.size(), kSteps, batch));
  DF11_RETURN_IF_ERROR(Prefill(c, prompt, s));
  const std::map<std::string, runtime::DeviceWork::OpTime> before = c.backend->Work().ops;
  c.backend->SetProfiling(true);
  absl::Status status;
  for (int64_t i = 0; i < kSteps && status.ok(); ++i) status = DecodeStep(c, s);
  c.backend->SetProfiling(false);
  DF11_RETURN_IF_ERROR(status);
  c.profile.clear();
  for (auto [name, t] : c.backend->Work().ops) {
    if (auto it = before.find(name); it != before.end()) {
      t.seconds -= it->second.seconds;
      t.calls -= it->second.calls;
    }
    if (t.calls > 0) c.profile[name] = t;
  }
  c.profiled_steps = kSteps;
  return absl::OkStatus();
}

}  // namespace

int RunEngineBench(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args =
      Args::Parse(argv,
                  {"df11", "bf16", "prompt-tokens", "tokens", "runs", "threads", "device", "batch",
                   "budget", "kv-cache", "fused-max-rows", "gpu-layout"},
                  {"json", "help"});
  if (!args.ok()) return UsageError("engine-bench", std::string(args.status().message()));
  if (args->Has("help")) return std::fputs(kHelp, stdout), kExitOk;
  if (!args->positional().empty()) return UsageError("engine-bench", "unexpected argument");
  if (!args->Has("df11") && !args->Has("bf16")) {
    return UsageError("engine-bench", "give --df11 DIR, --bf16 DIR or both");
  }
  absl::StatusOr<int64_t> prompt_tokens = args->GetInt("prompt-tokens", 128, 1, 1 << 16);
  absl::StatusOr<int64_t> tokens = args->GetInt("tokens", 16, 1, 1 << 16);
  absl::StatusOr<int64_t> runs = args->GetInt("runs", 3, 1, 1000);
  absl::StatusOr<int64_t> batch = args->GetInt("batch", 1, 1, 4096);
  absl::StatusOr<int64_t> fused_max_rows = args->GetInt("fused-max-rows", 8, 0, 8);
  absl::StatusOr<int64_t> threads =
      args->GetInt("threads", std::max(1u, std::thread::hardware_concurrency()), 1, 1024);
  for (const auto* v : {&prompt_tokens, &tokens, &runs, &threads, &batch, &fused_max_rows}) {
    if (!v->ok()) return UsageError("engine-bench", std::string(v->status().message()));
  }
  const bool json = args->Has("json");
  const int n_threads = static_cast<int>(*threads);

  // The configurations' backends: one for each on the CPU (the sequential one differs); on a
  // GPU one backend holds both models.
  const std::string device_name = args->Get("device").value_or("cpu");
  std::vector<DeviceBackend> backends;
  auto backend_for = [&](bool overlap) -> absl::StatusOr<runtime::Backend*> {
    if (device_name != "cpu" && !backends.empty()) return backends.front().backend.get();
    DF11_ASSIGN_OR_RETURN(
        DeviceBackend b,
        OpenDeviceBackend(device_name, {.threads = n_threads, .overlap_decode = overlap},
                          {.budget = args->Get("budget").value_or("90%"),
                           .kv_cache = args->Get("kv-cache").value_or("10%"),
                           .fused_max_rows = *fused_max_rows,
                           .gpu_layout = args->Get("gpu-layout").value_or("tiled")}));
    backends.push_back(std::move(b));
    return backends.back().backend.get();
  };
  std::unique_ptr<runtime::PlacedModel> bf16, df11;
  std::vector<Config> configs;
  if (args->Has("bf16")) {
    absl::StatusOr<runtime::Backend*> backend = backend_for(true);
    if (!backend.ok()) return Fail("engine-bench", backend.status());
    absl::StatusOr<std::unique_ptr<runtime::PlacedModel>> m = LoadOn(**backend, *args->Get("bf16"));
    if (!m.ok()) return Fail("engine-bench", m.status());
    bf16 = std::move(*m);
    configs.push_back({"bf16", bf16.get(), *backend});
  }
  if (args->Has("df11")) {
    absl::StatusOr<runtime::Backend*> backend = backend_for(true);
    if (!backend.ok()) return Fail("engine-bench", backend.status());
    absl::StatusOr<std::unique_ptr<runtime::PlacedModel>> m = LoadOn(**backend, *args->Get("df11"));
    if (!m.ok()) return Fail("engine-bench", m.status());
    df11 = std::move(*m);
    if (!df11->is_df11()) {
      return Fail("engine-bench", absl::InvalidArgumentError(
                                      absl::StrCat(*args->Get("df11"), " is not a DF11 model")));
    }
    configs.push_back({"df11", df11.get(), *backend});
    if (device_name == "cpu") {
      // The same host model (a CPU backend's placed model is the Model itself), without overlap.
      absl::StatusOr<runtime::Backend*> sequential = backend_for(false);
      if (!sequential.ok()) return Fail("engine-bench", sequential.status());
      configs.push_back({"df11-sequential", df11.get(), *sequential});
    }
  }
  const runtime::ModelConfig mc = configs.front().model->config();
  if (bf16 != nullptr && df11 != nullptr &&
      (bf16->config().vocab_size != df11->config().vocab_size ||
       bf16->config().num_layers != df11->config().num_layers)) {
    return Fail("engine-bench",
                absl::InvalidArgumentError("--df11 and --bf16 are not the same model"));
  }
  std::mt19937 rng(1);
  std::vector<int32_t> prompt(*prompt_tokens);
  for (int32_t& t : prompt) t = static_cast<int32_t>(rng() % mc.vocab_size);

  for (int64_t run = 0; run < *runs; ++run) {
    for (Config& c : configs) {
      if (!json)
        std::fprintf(stderr, "run %lld/%lld: %s\n", static_cast<long long>(run + 1),
                     static_cast<long long>(*runs), c.name.c_str());
      if (absl::Status s = RunOnce(c, prompt, *tokens, *batch); !s.ok()) {
        return Fail("engine-bench", s);
      }
    }
  }

  // The device time of each operation, on a GPU.
  if (device_name != "cpu") {
    for (Config& c : configs) {
      if (absl::Status s = Profile(c, prompt, *batch); !s.ok()) return Fail("engine-bench", s);
    }
  }
  // What the report needs of the models and backends, before a GPU's are freed.
  for (Config& c : configs) {
    c.step_us = 1e6 * static_cast<double>(*batch) / Median(c.decode_tps);
    c.resident_bytes = c.model->resident_bytes();
    c.scratch_bytes = c.backend->Memory().scratch;
  }
  const std::string device_description = backends.front().description;
  const bool both = bf16 != nullptr && df11 != nullptr;
  // The GPU's ceilings, measured with the models unloaded and the arena freed.
  std::optional<DeviceRates> rates;
#ifdef DF11_HAVE_CUDA
  if (int index = 0; device_name.rfind("cuda:", 0) == 0 &&
                     absl::SimpleAtoi(device_name.substr(5), &index) && index >= 0) {
    for (Config& c : configs) {
      c.model = nullptr;
      c.backend = nullptr;
    }
    bf16.reset();
    df11.reset();
    backends.clear();
    if (!json) std::fprintf(stderr, "measuring %s's read and product rates\n", device_name.c_str());
    absl::StatusOr<DeviceRates> measured = MeasureDeviceRates(index);
    if (measured.ok()) {
      rates = *measured;
    } else {
      // The steps' results stand without the ceilings.
      std::fprintf(stderr, "engine-bench: warning: no device_rates: %s\n",
                   measured.status().ToString().c_str());
    }
  }
#endif

  nlohmann::json out = {{"device", device_description},
                        {"threads", n_threads},
                        {"prompt_tokens", *prompt_tokens},
                        {"decode_tokens", *tokens},
                        {"batch", *batch},
                        {"fused_max_rows", device_name == "cpu" ? 0 : *fused_max_rows},
                        {"gpu_layout", args->Get("gpu-layout").value_or("tiled")},
                        {"runs", *runs},
                        {"layers", mc.num_layers},
                        {"hidden_size", mc.hidden_size},
                        {"vocab_size", mc.vocab_size},
                        {"peak_rss_bytes", PeakRssBytes()}};
  if (rates.has_value()) {
    out["device_rates"] = {{"read_gbps", rates->read_gbps},
                           {"read_bytes", rates->read_bytes},
                           {"bf16_matmul_tflops", rates->bf16_matmul_tflops},
                           {"matmul_size", rates->matmul_size}};
  }
  // A decode step's bytes of KV per position attended, and FLOPs of attention.
  const double kv_bytes_per_position = 2.0 * mc.num_kv_heads * mc.head_dim * 2;
  const double flops_per_position = 4.0 * mc.num_heads * mc.head_dim;
  for (const Config& c : configs) {
    out["configs"][c.name] = {{"prefill_tokens_per_second", Median(c.prefill_tps)},
                              {"decode_tokens_per_second", Median(c.decode_tps)},
                              {"model_resident_bytes", c.resident_bytes},
                              {"scratch_bytes", c.scratch_bytes},
                              {"kv_cache_bytes", c.kv_bytes}};
    if (device_name == "cpu") continue;
    nlohmann::json& d = out["configs"][c.name];
    d["launches_per_step"] = c.launches_per_step;
    d["event_ops_per_step"] = c.event_ops_per_step;
    d["host_syncs_per_step"] = c.host_syncs_per_step;
    d["step_us"] = c.step_us;
    d["enqueue_us_per_step"] = c.enqueue_us_per_step;
    double profiled = 0;
    for (const auto& [name, t] : c.profile) {
      d["profile_us_per_step"][name] = 1e6 * t.seconds / c.profiled_steps;
      d["profile_calls_per_step"][name] = double(t.calls) / c.profiled_steps;
      profiled += t.seconds;
    }
    d["profiled_us_per_step"] = 1e6 * profiled / std::max<int64_t>(1, c.profiled_steps);
    if (rates.has_value() && rates->read_gbps > 0) {
      // The timed steps attend, on average, to the prompt and half the decoded tokens (and
      // their own).
      const double kv = kv_bytes_per_position *
                        PositionsAttended(mc, *batch, *prompt_tokens + (*tokens + 1) / 2.0);
      const double bytes = static_cast<double>(c.resident_bytes) + kv;
      d["bytes_per_step"] = bytes;
      d["roofline_step_us"] = bytes / (rates->read_gbps * 1e3);
      d["step_vs_roofline"] = bytes / (rates->read_gbps * 1e3) / c.step_us;
    }
    if (auto it = c.profile.find("attention"); it != c.profile.end() && it->second.seconds > 0) {
      // The profiled steps: positions prompt + 1 to prompt + 8.
      const double flops =
          flops_per_position *
          PositionsAttended(mc, *batch, *prompt_tokens + (c.profiled_steps + 1) / 2.0) *
          c.profiled_steps;
      d["attention_tflops"] = flops / it->second.seconds / 1e12;
      d["attention_share"] = it->second.seconds / std::max(profiled, 1e-12);
    }
  }
  if (both) {
    const auto& cfg = out["configs"];
    for (const char* name : {"df11", "df11-sequential"}) {
      if (!cfg.contains(name)) continue;
      out["ratios"][name] = {
          {"decode_vs_bf16", cfg[name]["decode_tokens_per_second"].get<double>() /
                                 cfg["bf16"]["decode_tokens_per_second"].get<double>()},
          {"prefill_vs_bf16", cfg[name]["prefill_tokens_per_second"].get<double>() /
                                  cfg["bf16"]["prefill_tokens_per_second"].get<double>()}};
    }
  }
  if (json) {
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  for (const Config& c : configs) {
    if (device_name == "cpu") continue;
    std::printf(
        "%s per decode step: %.0f launches, %.0f event operations, %.1f host waits; %.0f us, "
        "%.0f us of it until the last launch was issued\n",
        c.name.c_str(), c.launches_per_step, c.event_ops_per_step, c.host_syncs_per_step, c.step_us,
        c.enqueue_us_per_step);
    for (const auto& [name, t] : c.profile) {
      std::printf("  %-44s %9.1f us  (%g calls)\n", name.c_str(),
                  1e6 * t.seconds / c.profiled_steps, double(t.calls) / c.profiled_steps);
    }
    const nlohmann::json& d = out["configs"][c.name];
    if (d.contains("roofline_step_us")) {
      std::printf("  roofline %.0f us (%s at %.0f GB/s): the step reaches %.0f%% of it\n",
                  d["roofline_step_us"].get<double>(),
                  HumanBytes(static_cast<uint64_t>(d["bytes_per_step"].get<double>())).c_str(),
                  rates->read_gbps, 100 * d["step_vs_roofline"].get<double>());
    }
    if (d.contains("attention_tflops")) {
      std::printf("  attention %.2f TFLOP/s, %.0f%% of the profiled step\n",
                  d["attention_tflops"].get<double>(), 100 * d["attention_share"].get<double>());
    }
  }
  if (rates.has_value()) {
    std::printf("%s: reads %.0f GB/s (%s), BF16 products %.0f TFLOP/s (%lld^3)\n",
                device_name.c_str(), rates->read_gbps, HumanBytes(rates->read_bytes).c_str(),
                rates->bf16_matmul_tflops, static_cast<long long>(rates->matmul_size));
  }
  std::printf("%-16s %14s %14s %12s %12s %12s\n", "config", "prefill tok/s", "decode tok/s",
              "model", "scratch", "KV cache");
  for (const Config& c : configs) {
    std::printf("%-16s %14.1f %14.2f %12s %12s %12s\n", c.name.c_str(), Median(c.prefill_tps),
                Median(c.decode_tps), HumanBytes(c.resident_bytes).c_str(),
                HumanBytes(c.scratch_bytes).c_str(), HumanBytes(c.kv_bytes).c_str());
  }
  if (out.contains("ratios")) {
    for (const char* name : {"df11", "df11-sequential"}) {
      if (!out["ratios"].contains(name)) continue;
      std::printf("%s / bf16: decode %.3fx, prefill %.3fx\n", name,
                  out["ratios"][name]["decode_vs_bf16"].get<double>(),
                  out["ratios"][name]["prefill_vs_bf16"].get<double>());
    }
  }
  std::printf("peak RSS %s\n", HumanBytes(PeakRssBytes()).c_str());
  return kExitOk;
}

}  // namespace df11::tool
