// df11ctl generate: one request, its text streamed as it arrives, or one JSON object at the end.
#include <charconv>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/ctl/commands.h"
#include "client/ctl/format.h"
#include "nlohmann/json.hpp"

namespace df11::ctl {
namespace {

constexpr double kFloatMax = std::numeric_limits<float>::max();
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// The double nearest the float's shortest decimal form: JSON then shows a logprob of -0.1f as
// -0.1 rather than -0.10000000149011612.
double ShortestDouble(float f) {
  char buffer[32];
  const std::to_chars_result r = std::to_chars(buffer, buffer + sizeof(buffer) - 1, f);
  if (r.ec != std::errc()) return f;
  *r.ptr = '\0';
  return std::strtod(buffer, nullptr);
}

// The request from the command line; kInvalidArgument names the bad flag.
absl::StatusOr<v1::GenerateRequest> BuildRequest(const cli::Args& args) {
  if (args.positional().size() != 1) return absl::InvalidArgumentError("expected NAME");
  std::optional<std::string> prompt = args.Get("prompt");
  if (!prompt.has_value()) return absl::InvalidArgumentError("--prompt is required");
  const bool chat = args.Has("chat");
  if (!chat && (args.Has("system") || args.Has("no-thinking"))) {
    return absl::InvalidArgumentError("--system and --no-thinking need --chat");
  }
  v1::GenerateRequest request;
  request.set_model(args.positional()[0]);
  if (std::optional<std::string> owner = args.Get("owner")) request.set_owner(*owner);
  if (chat) {
    v1::ChatMessages* messages = request.mutable_chat();
    if (std::optional<std::string> system = args.Get("system")) {
      v1::ChatMessage* m = messages->add_messages();
      m->set_role("system");
      m->set_content(*system);
    }
    v1::ChatMessage* m = messages->add_messages();
    m->set_role("user");
    m->set_content(*prompt);
    messages->set_add_generation_prompt(true);
  } else {
    request.set_text(*prompt);
  }
  if (args.Has("no-thinking")) request.set_enable_thinking(false);

  // Only the flags given are set: the daemon fills the rest from the model's defaults.
  const absl::StatusOr<int64_t> max_tokens = args.GetInt("max-tokens", 0, 1, kInt32Max);
  const absl::StatusOr<double> temperature = args.GetDouble("temperature", 0, 0, kFloatMax);
  const absl::StatusOr<double> top_p = args.GetDouble("top-p", 0, 0, 1);
  const absl::StatusOr<int64_t> top_k = args.GetInt("top-k", 0, 0, kInt32Max);
  const absl::StatusOr<double> min_p = args.GetDouble("min-p", 0, 0, 1);
  const absl::StatusOr<double> repetition = args.GetDouble("repetition-penalty", 0, 0, kFloatMax);
  const absl::StatusOr<int64_t> seed =
      args.GetInt("seed", 0, 0, std::numeric_limits<int64_t>::max());
  for (const absl::Status& s :
       {max_tokens.status(), temperature.status(), top_p.status(), top_k.status(), min_p.status(),
        repetition.status(), seed.status()}) {
    if (!s.ok()) return s;
  }
  v1::SamplingParams* sampling = request.mutable_sampling();
  if (args.Has("max-tokens")) request.set_max_tokens(static_cast<int32_t>(*max_tokens));
  if (args.Has("temperature")) sampling->set_temperature(static_cast<float>(*temperature));
  if (args.Has("top-p")) sampling->set_top_p(static_cast<float>(*top_p));
  if (args.Has("top-k")) sampling->set_top_k(static_cast<int32_t>(*top_k));
  if (args.Has("min-p")) sampling->set_min_p(static_cast<float>(*min_p));
  if (args.Has("repetition-penalty")) {
    sampling->set_repetition_penalty(static_cast<float>(*repetition));
  }
  if (args.Has("seed")) sampling->set_seed(static_cast<uint64_t>(*seed));
  for (const std::string& stop : args.GetAll("stop")) request.add_stop(stop);
  request.set_ignore_eos(args.Has("ignore-eos"));
  request.set_logprobs(args.Has("logprobs"));
  return request;
}

}  // namespace

int RunGenerate(Context& c) {
  absl::StatusOr<v1::GenerateRequest> request = BuildRequest(c.args);
  if (!request.ok()) return UsageError(c, std::string(request.status().message()));

  std::string text;
  std::vector<int32_t> token_ids;
  std::vector<float> logprobs;
  v1::GenerateResponse last;  // the final message carries finish_reason, usage and timings
  const absl::Status status = c.client.Generate(*request, [&](const v1::GenerateResponse& r) {
    text += r.text();
    token_ids.insert(token_ids.end(), r.token_ids().begin(), r.token_ids().end());
    logprobs.insert(logprobs.end(), r.logprobs().begin(), r.logprobs().end());
    if (!c.json && !r.text().empty()) c.console.out << r.text() << std::flush;
    last = r;
    return true;
  });
  if (!c.json && !text.empty()) c.console.out << "\n" << std::flush;
  if (!status.ok()) return Fail(c, status);

  const std::string finish = FinishReasonName(last.finish_reason());
  if (c.json) {
    const v1::Timings& t = last.timings();
    nlohmann::ordered_json out = {
        {"text", text},
        {"token_ids", token_ids},
        {"finish_reason",
         finish.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(finish)},
        {"usage",
         {{"prompt_tokens", last.usage().prompt_tokens()},
          {"completion_tokens", last.usage().completion_tokens()}}},
        {"timings",
         {{"queue_seconds", t.queue_seconds()},
          {"time_to_first_token_seconds", t.time_to_first_token_seconds()},
          {"seconds_per_token", t.seconds_per_token()},
          {"total_seconds", t.total_seconds()}}},
    };
    if (request->logprobs()) {
      nlohmann::ordered_json values = nlohmann::ordered_json::array();
      for (float l : logprobs) values.push_back(ShortestDouble(l));
      out["logprobs"] = std::move(values);
    }
    c.console.out << out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace)
                  << "\n"
                  << std::flush;
    return kExitOk;
  }

  std::string summary = absl::StrFormat(
      "df11ctl generate: %d tokens%s; prompt %d tokens; first token after %.3f s",
      last.usage().completion_tokens(), finish.empty() ? "" : absl::StrCat(" (", finish, ")"),
      last.usage().prompt_tokens(), last.timings().time_to_first_token_seconds());
  if (last.timings().seconds_per_token() > 0) {
    absl::StrAppend(&summary,
                    absl::StrFormat("; %.1f tokens/s", 1 / last.timings().seconds_per_token()));
  }
  if (request->logprobs() && !logprobs.empty()) {
    double sum = 0;
    for (float l : logprobs) sum += l;
    absl::StrAppend(&summary, absl::StrFormat("; mean logprob %.3f", sum / logprobs.size()));
  }
  c.console.err << summary << "\n";
  return kExitOk;
}

}  // namespace df11::ctl
