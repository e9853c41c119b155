// df11 generate: offline text generation from a DF11 (or BF16) model directory on the engine (CPU,
// or a CUDA GPU), without the daemon.
#include <cstdio>
#include <string>
#include <thread>

#include "daemon/runtime/text/chat/chat_template.h"
#include "daemon/runtime/backends/cpu/cpu_backend.h"
#include "daemon/runtime/engine/generator.h"
#include "daemon/runtime/engine/model.h"
#include "daemon/runtime/text/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "tools/df11/cli.h"
#include "tools/df11/commands.h"
#include "tools/df11/device_backend.h"

namespace df11::tool {
namespace {

constexpr char kHelp[] = R"(Usage: df11 generate MODEL_DIR --prompt TEXT [options]

Generates text from the model in MODEL_DIR (a DF11 directory or a BF16 Hugging Face checkpoint,
with its tokenizer.json) on the engine, streaming it to stdout. DF11 weights stay compressed in
memory; each transformer block is decoded when it runs. Sampling defaults come from the model's
generation_config.json (greedy when it has none).

  --prompt TEXT           the prompt (required)
  --chat                  render the prompt as a user message with the model's chat template
  --system TEXT           with --chat: a system message first
  --no-thinking           with --chat: pass enable_thinking=false to the template (Qwen3)
  --max-tokens N          tokens to generate at most (default 128)
  --temperature T         0 is greedy
  --top-p P, --top-k K, --min-p P, --repetition-penalty R
  --seed S                same seed, same tokens
  --stop TEXT             stop before this text
  --ignore-eos            keep going past the end-of-sequence token
  --device D              cpu (default) or cuda:N (the CUDA backend: 90 % of the GPU's memory, of
                          which 10 % is the KV pool)
  --threads N             CPU threads (default: one per CPU)
  --no-overlap            on the CPU: decode each block before computing it, not while the
                          previous one computes
  --json                  print one JSON object at the end instead of streaming: token_ids, text,
                          finish_reason, prompt_tokens, tokens_per_second (decode speed after the
                          first token), prefill_seconds, prefill_tokens_per_second

Exit codes: 0 success, 1 failure (the message says why), 2 bad command line.
)";

}  // namespace

int RunGenerate(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args =
      Args::Parse(argv,
                  {"prompt", "system", "max-tokens", "temperature", "top-p", "top-k", "min-p",
                   "repetition-penalty", "seed", "stop", "threads", "device"},
                  {"chat", "no-thinking", "ignore-eos", "no-overlap", "json", "help"});
  if (!args.ok()) return UsageError("generate", std::string(args.status().message()));
  if (args->Has("help")) return std::fputs(kHelp, stdout), kExitOk;
  if (args->positional().size() != 1) return UsageError("generate", "expected MODEL_DIR");
  if (!args->Get("prompt").has_value()) return UsageError("generate", "--prompt is required");
  if (!args->Has("chat") && (args->Has("system") || args->Has("no-thinking"))) {
    return UsageError("generate", "--system and --no-thinking need --chat");
  }
  const std::string dir = args->positional()[0];
  const std::string prompt = *args->Get("prompt");
  const bool json = args->Has("json");

  absl::StatusOr<int64_t> threads =
      args->GetInt("threads", std::max(1u, std::thread::hardware_concurrency()), 1, 1024);
  if (!threads.ok()) return UsageError("generate", std::string(threads.status().message()));
  absl::StatusOr<DeviceBackend> device = OpenDeviceBackend(
      args->Get("device").value_or("cpu"),
      {.threads = static_cast<int>(*threads), .overlap_decode = !args->Has("no-overlap")});
  if (!device.ok()) return Fail("generate", device.status());
  runtime::Backend& backend = *device->backend;
  absl::StatusOr<std::unique_ptr<runtime::PlacedModel>> model = LoadOn(backend, dir);
  if (!model.ok()) return Fail("generate", model.status());
  absl::StatusOr<runtime::Tokenizer> tokenizer =
      runtime::Tokenizer::FromFile(dir + "/tokenizer.json");
  if (!tokenizer.ok()) return Fail("generate", tokenizer.status());

  // Sampling: the model's defaults, then the flags.
  runtime::SamplingParams params = runtime::DefaultSamplingParams((*model)->config());
  {
    absl::StatusOr<int64_t> max_tokens = args->GetInt("max-tokens", 128, 1, 1 << 20);
    absl::StatusOr<double> temperature = args->GetDouble("temperature", params.temperature, 0, 100);
    absl::StatusOr<double> top_p = args->GetDouble("top-p", params.top_p, 0, 1);
    absl::StatusOr<int64_t> top_k = args->GetInt("top-k", params.top_k, 0, 1 << 30);
    absl::StatusOr<double> min_p = args->GetDouble("min-p", params.min_p, 0, 1);
    absl::StatusOr<double> repetition =
        args->GetDouble("repetition-penalty", params.repetition_penalty, 0, 100);
    absl::StatusOr<int64_t> seed = args->GetInt("seed", 0, 0, INT64_MAX);
    for (const absl::Status& s :
         {max_tokens.status(), temperature.status(), top_p.status(), top_k.status(), min_p.status(),
          repetition.status(), seed.status()}) {
      if (!s.ok()) return UsageError("generate", std::string(s.message()));
    }
    params.max_tokens = static_cast<int32_t>(*max_tokens);
    params.temperature = static_cast<float>(*temperature);
    params.top_p = static_cast<float>(*top_p);
    params.top_k = static_cast<int32_t>(*top_k);
    params.min_p = static_cast<float>(*min_p);
    params.repetition_penalty = static_cast<float>(*repetition);
    if (args->Has("seed")) params.seed = static_cast<uint64_t>(*seed);
    if (args->Has("stop")) params.stop = {*args->Get("stop")};
    params.ignore_eos = args->Has("ignore-eos");
    if (absl::Status s = params.Validate(); !s.ok()) {
      return UsageError("generate", std::string(s.message()));
    }
  }
  // The prompt's tokens: as a chat, the rendered template carries its own special tokens.
  absl::StatusOr<std::vector<int32_t>> ids;
  if (args->Has("chat")) {
    absl::StatusOr<runtime::ChatTemplate> chat = runtime::ChatTemplate::FromModelDir(dir);
    if (!chat.ok()) return Fail("generate", chat.status());
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    if (args->Has("system"))
      messages.push_back({{"role", "system"}, {"content", *args->Get("system")}});
    messages.push_back({{"role", "user"}, {"content", prompt}});
    nlohmann::ordered_json extra = nlohmann::ordered_json::object();
    if (args->Has("no-thinking")) extra["enable_thinking"] = false;
    absl::StatusOr<std::string> text =
        chat->Render(messages, /*add_generation_prompt=*/true, extra);
    if (!text.ok()) return Fail("generate", text.status());
    ids = tokenizer->Encode(*text, /*add_special_tokens=*/false);
  } else {
    ids = tokenizer->Encode(prompt, /*add_special_tokens=*/true);
  }
  if (!ids.ok()) return Fail("generate", ids.status());

  runtime::GenerationRequest request{.prompt = *ids, .sampling = params};
  absl::StatusOr<runtime::GenerationResult> result = runtime::Generate(
      backend, **model, *tokenizer, request, [json](const runtime::GeneratedToken& t) {
        if (!json) {
          std::fwrite(t.text.data(), 1, t.text.size(), stdout);
          std::fflush(stdout);
        }
        return true;
      });
  if (!result.ok()) return Fail("generate", result.status());
  const double prefill_tps =
      result->prefill_seconds > 0
          ? static_cast<double>(result->prompt_tokens) / result->prefill_seconds
          : 0;
  if (json) {
    nlohmann::json out = {
        {"token_ids", result->token_ids},
        {"text", result->text},
        {"finish_reason", std::string(runtime::FinishReasonName(result->finish_reason))},
        {"prompt_tokens", result->prompt_tokens},
        {"tokens_per_second", result->decode_tokens_per_second()},
        {"prefill_seconds", result->prefill_seconds},
        {"prefill_tokens_per_second", prefill_tps},
    };
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("\n");
    std::fprintf(stderr,
                 "df11 generate: %zu tokens (%s); prompt %lld tokens in %.3f s; %.2f tokens/s\n",
                 result->token_ids.size(),
                 std::string(runtime::FinishReasonName(result->finish_reason)).c_str(),
                 static_cast<long long>(result->prompt_tokens), result->prefill_seconds,
                 result->decode_tokens_per_second());
  }
  return kExitOk;
}

}  // namespace df11::tool
