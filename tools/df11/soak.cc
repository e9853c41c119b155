// df11 soak: sustained mixed load on a running df11d, with every outcome checked.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/df11_client.h"
#include "daemon/runtime/backends/cpu/cpu_backend.h"
#include "daemon/runtime/engine/generator.h"
#include "daemon/runtime/engine/model.h"
#include "daemon/runtime/text/tokenizer/tokenizer.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tools/df11/cli.h"
#include "tools/df11/commands.h"
#include "tools/df11/process_sample.h"
#include "tools/df11/stats.h"

namespace df11::tool {
namespace {

namespace v1 = ::df11::v1;

constexpr char kHelp[] = R"(Usage: df11 soak --addr HOST:PORT [options]

Keeps a running df11d under sustained mixed load and checks every outcome. The daemon's catalog
must hold the models (tools/soak.sh starts such a daemon); their directories must be readable here,
where each is also run on the CPU engine alone for reference. For the duration:
  --streams clients each send one request after another over random models: greedy requests whose
  tokens must equal the engine's, sampled ones (temperature, top-k/p, min-p, seed, stop strings,
  lengths), ones cancelled after their first tokens, ones with bad parameters, and (with --http)
  OpenAI completions, streamed or not;
  a control client loads, pins, unloads (with a drain), lists and gets models and sends malformed
  requests;
  a sampler reads the daemon's memory every second (its accounted bytes never above the budget)
  and, with --daemon-pid, its anonymous RSS (heap and stacks, not the mapped model files) and
  threads, reported with their growth after the first quarter of the run (the warm-up).
Allowed failures are the ones a request provokes: INVALID_ARGUMENT for bad parameters, CANCELLED
for cancellations, RESOURCE_EXHAUSTED with its numbers. Anything else, a greedy mismatch, a request
past its deadline or a sample above the budget is an unexpected error. At the end every model is
unloaded and the accounted weights must return to where they started.

  --addr HOST:PORT     the daemon (default: $DF11_ADDR, else 127.0.0.1:7411)
  --http HOST:PORT     its HTTP listener, for OpenAI completions among the requests
  --duration D         how long to keep the load (default 60s)
  --streams N          concurrent request streams (default 64)
  --models M           catalog models to use, in name order (default: all)
  --deadline D         the longest a request may take (default 120s)
  --daemon-pid PID     the daemon's process, for RSS and threads (same host)
  --seed S             the random choices (default 1)
  --json               one JSON object with every figure instead of text

Exit status: 0 when there was no unexpected error, 1 otherwise, 2 for a bad command line.
)";

// A catalog model and what the engine alone gives for the greedy prompts.
struct SoakModel {
  std::string name, directory;
  int64_t vocab = 0;
  std::vector<std::vector<int32_t>> prompts;    // token ids
  std::vector<std::vector<int32_t>> reference;  // greedy tokens for each prompt
};

constexpr int kGreedyTokens = 8;

runtime::SamplingParams GreedyParams() {
  runtime::SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 1;
  p.presence_penalty = 0;
  p.frequency_penalty = 0;
  p.ignore_eos = true;
  p.max_tokens = kGreedyTokens;
  return p;
}

absl::Status PrepareReference(SoakModel& m, std::mt19937_64& rng) {
  absl::StatusOr<std::unique_ptr<runtime::Model>> model = runtime::Model::Load(m.directory, {});
  if (!model.ok()) return model.status();
  m.vocab = (*model)->config().vocab_size;
  absl::StatusOr<runtime::Tokenizer> tokenizer =
      runtime::Tokenizer::FromFile(m.directory + "/tokenizer.json");
  if (!tokenizer.ok()) return tokenizer.status();
  runtime::CpuBackend backend({.threads = 1});
  for (int i = 0; i < 3; ++i) {
    std::vector<int32_t> prompt(4 + i * 5);
    for (int32_t& id : prompt) id = static_cast<int32_t>(rng() % static_cast<uint64_t>(m.vocab));
    absl::StatusOr<runtime::GenerationResult> result = runtime::Generate(
        backend, **model, *tokenizer, {.prompt = prompt, .sampling = GreedyParams()},
        [](const runtime::GeneratedToken&) { return true; });
    if (!result.ok()) return result.status();
    m.prompts.push_back(prompt);
    m.reference.push_back(result->token_ids);
  }
  return absl::OkStatus();
}

// Everything the run counts; one lock, taken once per request.
struct Tally {
  std::mutex mu;
  std::map<std::string, int64_t> outcomes;  // "kind/outcome"
  int64_t requests = 0, unexpected = 0, greedy_checked = 0, greedy_mismatches = 0, hung = 0;
  std::vector<std::string> examples;  // the first unexpected errors
  std::vector<double> ttft, tpot;

  void Add(const std::string& kind, const std::string& outcome, const std::string& unexpected_why) {
    std::lock_guard lock(mu);
    ++requests;
    ++outcomes[kind + "/" + outcome];
    if (!unexpected_why.empty()) Unexpected(kind + ": " + unexpected_why);
  }
  void Unexpected(const std::string& why) {  // mu held
    ++unexpected;
    if (examples.size() < 20) examples.push_back(why);
  }
};

std::string CodeName(absl::StatusCode code) {
  std::string name = absl::StatusCodeToString(code);
  std::transform(name.begin(), name.end(), name.begin(), ::tolower);
  return name;
}

bool HasDigit(absl::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The error object of an OpenAI completion body (each Server-Sent Event's, when streamed), if any;
// a body that is not JSON is one too.
std::optional<std::string> ErrorIn(const std::string& body, bool stream) {
  std::vector<std::string> objects;
  if (stream) {
    for (absl::string_view line : absl::StrSplit(body, '\n')) {
      if (absl::ConsumePrefix(&line, "data: ") && line != "[DONE]") objects.emplace_back(line);
    }
  } else {
    objects.push_back(body);
  }
  for (const std::string& text : objects) {
    const nlohmann::json object = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (object.is_discarded()) return "not JSON: " + text.substr(0, 200);
    if (object.contains("error")) return object["error"].dump();
  }
  return std::nullopt;
}

class Soak {
 public:
  Soak(std::string addr, std::string http, std::vector<SoakModel> models, absl::Duration deadline,
       uint64_t seed)
      : addr_(std::move(addr)),
        http_(std::move(http)),
        models_(std::move(models)),
        deadline_(deadline),
        seed_(seed) {}

  // One request stream until `end`.
  void Stream(int index, Clock::time_point end) {
    std::unique_ptr<client::Df11Client> client = *client::Df11Client::Connect(addr_);
    std::mt19937_64 rng(seed_ * 1000003 + static_cast<uint64_t>(index));
    while (Clock::now() < end) {
      const SoakModel& m = models_[rng() % models_.size()];
      const int pick = static_cast<int>(rng() % 100);
      if (pick < 30) {
        Greedy(*client, m, rng);
      } else if (pick < 65) {
        Sampled(*client, m, rng);
      } else if (pick < 80) {
        Cancelled(*client, m, rng);
      } else if (pick < 90 || http_.empty()) {
        BadParameters(*client, m, rng);
      } else {
        Http(m, rng);
      }
    }
  }

  // Loads, pins, unloads, lists, gets and malformed requests, one every 100-300 ms, until `end`.
  void Control(Clock::time_point end) {
    std::unique_ptr<client::Df11Client> client = *client::Df11Client::Connect(addr_);
    std::mt19937_64 rng(seed_ ^ 0x5eed);
    const client::CallOptions options{.timeout = deadline_};
    while (Clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 200));
      const SoakModel& m = models_[rng() % models_.size()];
      const int pick = static_cast<int>(rng() % 6);
      absl::Status s;
      std::string kind;
      if (pick == 0) {
        kind = "control-load";
        v1::LoadModelRequest load;
        load.set_source(m.directory);
        load.set_name(m.name);
        load.set_pin(rng() % 4 == 0);
        s = client->LoadModel(load, nullptr, options).status();
        // Room taken by busy models, or another load of it racing: the soak's own doing.
        Check(kind, s, {absl::StatusCode::kResourceExhausted});
      } else if (pick == 1) {
        kind = "control-unload";
        v1::UnloadModelRequest unload;
        unload.set_name(m.name);
        unload.set_drain_seconds(absl::ToDoubleSeconds(deadline_));
        s = client->UnloadModel(unload, options).status();
        // Not resident, or loading or already unloading: races the control client makes.
        Check(kind, s, {absl::StatusCode::kNotFound, absl::StatusCode::kFailedPrecondition});
      } else if (pick == 2) {
        kind = "control-list";
        Check(kind, client->ListModels(options).status(), {});
      } else if (pick == 3) {
        kind = "control-get";
        Check(kind, client->GetModel(m.name, options).status(), {});
      } else if (pick == 4) {
        kind = "control-malformed";
        v1::LoadModelRequest load;
        load.set_source(rng() % 2 ? "/nonexistent/../etc" : "not a source");
        s = client->LoadModel(load, nullptr, options).status();
        Check(kind, s,
              {absl::StatusCode::kPermissionDenied, absl::StatusCode::kNotFound,
               absl::StatusCode::kInvalidArgument},
              /*must_fail=*/true);
      } else {
        kind = "control-malformed";
        v1::UnloadModelRequest unload;  // no name
        Check(kind, client->UnloadModel(unload, options).status(),
              {absl::StatusCode::kInvalidArgument}, /*must_fail=*/true);
      }
    }
  }

  Tally& tally() { return tally_; }

 private:
  // Counts `s` for `kind`: OK or one of `allowed` (RESOURCE_EXHAUSTED only with its numbers) is
  // expected; with must_fail, OK is not.
  void Check(const std::string& kind, const absl::Status& s,
             std::initializer_list<absl::StatusCode> allowed, bool must_fail = false) {
    std::string why;
    const bool listed = std::find(allowed.begin(), allowed.end(), s.code()) != allowed.end();
    if (s.ok() ? must_fail : !listed) {
      why = s.ok() ? "succeeded where it must fail" : s.ToString();
    } else if (absl::IsResourceExhausted(s) && !HasDigit(s.message())) {
      why = "RESOURCE_EXHAUSTED without its numbers: " + s.ToString();
    }
    tally_.Add(kind, s.ok() ? "ok" : CodeName(s.code()), why);
  }

  v1::GenerateRequest Base(const SoakModel& m, const std::vector<int32_t>& prompt) {
    v1::GenerateRequest r;
    r.set_model(m.name);
    for (int32_t id : prompt) r.mutable_token_ids()->add_ids(id);
    return r;
  }

  std::vector<int32_t> RandomPrompt(const SoakModel& m, std::mt19937_64& rng) {
    std::vector<int32_t> prompt(1 + rng() % 24);
    for (int32_t& id : prompt) id = static_cast<int32_t>(rng() % static_cast<uint64_t>(m.vocab));
    return prompt;
  }

  // Runs `r`, timing its tokens; the status (DEADLINE_EXCEEDED past the deadline).
  absl::Status Run(client::Df11Client& c, const v1::GenerateRequest& r,
                   std::vector<int32_t>* tokens, int cancel_after = -1) {
    const Clock::time_point start = Clock::now();
    Clock::time_point first{}, last{};
    int64_t count = 0, messages = 0;
    const absl::Status s =
        c.Generate(r,
                   [&](const v1::GenerateResponse& response) {
                     if (response.token_ids_size() > 0) {
                       if (count == 0) first = Clock::now();
                       last = Clock::now();
                       count += response.token_ids_size();
                       if (tokens != nullptr) {
                         tokens->insert(tokens->end(), response.token_ids().begin(),
                                        response.token_ids().end());
                       }
                     }
                     return cancel_after < 0 || ++messages < cancel_after;
                   },
                   {.timeout = deadline_});
    if (s.ok() && count > 0) {
      std::lock_guard lock(tally_.mu);
      tally_.ttft.push_back(Seconds(first - start));
      if (count > 1) tally_.tpot.push_back(Seconds(last - first) / static_cast<double>(count - 1));
    }
    if (absl::IsDeadlineExceeded(s)) {
      std::lock_guard lock(tally_.mu);
      ++tally_.hung;
    }
    return s;
  }

  void Greedy(client::Df11Client& c, const SoakModel& m, std::mt19937_64& rng) {
    const size_t i = rng() % m.prompts.size();
    v1::GenerateRequest r = Base(m, m.prompts[i]);
    v1::SamplingParams* p = r.mutable_sampling();
    p->set_temperature(0);
    p->set_repetition_penalty(1);
    p->set_presence_penalty(0);
    p->set_frequency_penalty(0);
    r.set_ignore_eos(true);
    r.set_max_tokens(kGreedyTokens);
    std::vector<int32_t> tokens;
    const absl::Status s = Run(c, r, &tokens);
    Check("greedy", s, {absl::StatusCode::kResourceExhausted});
    if (!s.ok()) return;
    std::lock_guard lock(tally_.mu);
    ++tally_.greedy_checked;
    if (tokens != m.reference[i]) {
      ++tally_.greedy_mismatches;
      tally_.Unexpected(absl::StrCat("greedy: ", m.name, " prompt ", i,
                                     " gave other tokens than the engine alone"));
    }
  }

  void Sampled(client::Df11Client& c, const SoakModel& m, std::mt19937_64& rng) {
    v1::GenerateRequest r = Base(m, RandomPrompt(m, rng));
    std::uniform_real_distribution<float> unit(0, 1);
    v1::SamplingParams* p = r.mutable_sampling();
    p->set_temperature(0.2f + 1.3f * unit(rng));
    if (rng() % 2) p->set_top_p(0.5f + 0.5f * unit(rng));
    if (rng() % 2) p->set_top_k(static_cast<int32_t>(1 + rng() % 50));
    if (rng() % 3 == 0) p->set_min_p(0.1f * unit(rng));
    if (rng() % 3 == 0) p->set_repetition_penalty(1.0f + 0.3f * unit(rng));
    if (rng() % 2) p->set_seed(rng());
    if (rng() % 2) r.add_stop(rng() % 2 ? "\n" : " the");
    r.set_max_tokens(static_cast<int32_t>(1 + rng() % 24));
    r.set_ignore_eos(rng() % 2 == 0);
    Check("sampled", Run(c, r, nullptr), {absl::StatusCode::kResourceExhausted});
  }

  void Cancelled(client::Df11Client& c, const SoakModel& m, std::mt19937_64& rng) {
    v1::GenerateRequest r = Base(m, RandomPrompt(m, rng));
    r.set_max_tokens(64);
    r.set_ignore_eos(true);
    const absl::Status s = Run(c, r, nullptr, static_cast<int>(1 + rng() % 3));
    // Cancelled by us, or over before our cancellation came.
    Check("cancelled", s, {absl::StatusCode::kCancelled, absl::StatusCode::kResourceExhausted});
  }

  void BadParameters(client::Df11Client& c, const SoakModel& m, std::mt19937_64& rng) {
    v1::GenerateRequest r = Base(m, RandomPrompt(m, rng));
    switch (rng() % 4) {
      case 0:
        r.mutable_sampling()->set_temperature(-1);
        break;
      case 1:
        r.mutable_sampling()->set_top_p(1.5f);
        break;
      case 2:
        r.set_max_tokens(-3);
        break;
      default:
        r.mutable_token_ids()->add_ids(static_cast<int32_t>(m.vocab + 7));
        break;
    }
    // Refused for its parameters, or earlier: its model could not be placed.
    Check("bad-parameters", Run(c, r, nullptr),
          {absl::StatusCode::kInvalidArgument, absl::StatusCode::kResourceExhausted},
          /*must_fail=*/true);
  }

  void Http(const SoakModel& m, std::mt19937_64& rng) {
    const size_t colon = http_.rfind(':');
    httplib::Client http(http_.substr(0, colon), std::stoi(http_.substr(colon + 1)));
    const auto timeout =
        std::chrono::duration_cast<std::chrono::seconds>(absl::ToChronoSeconds(deadline_));
    http.set_read_timeout(timeout);
    const bool stream = rng() % 2 == 0;
    const nlohmann::json body = {{"model", m.name},
                                 {"prompt", RandomPrompt(m, rng)},
                                 {"max_tokens", 1 + rng() % 16},
                                 {"temperature", rng() % 2 ? 0.0 : 0.8},
                                 {"stream", stream}};
    const httplib::Result result = http.Post("/v1/completions", body.dump(), "application/json");
    std::string why;
    std::string outcome = result ? absl::StrCat("http_", result->status) : "no_answer";
    if (!result) {
      why = absl::StrCat("no HTTP answer: ", httplib::to_string(result.error()));
    } else if (result->status == 429) {
      if (!HasDigit(result->body)) why = "429 without its numbers: " + result->body;
    } else if (result->status != 200) {
      why = absl::StrCat("HTTP ", result->status, ": ", result->body.substr(0, 200));
    } else if (stream && result->body.find("data: [DONE]") == std::string::npos) {
      why = "a stream without its end";
    } else if (const std::optional<std::string> error = ErrorIn(result->body, stream)) {
      // An error object where the tokens were: allowed only for what a request may be refused for.
      outcome = "http_200_error";
      if (error->find("resource_exhausted") == std::string::npos &&
          error->find("RESOURCE_EXHAUSTED") == std::string::npos) {
        why = "an error in the body: " + *error;
      } else if (!HasDigit(*error)) {
        why = "an error without its numbers: " + *error;
      }
    }
    tally_.Add(stream ? "http-stream" : "http", outcome, why);
  }

  const std::string addr_, http_;
  const std::vector<SoakModel> models_;
  const absl::Duration deadline_;
  const uint64_t seed_;
  Tally tally_;
};

}  // namespace

int RunSoak(const std::vector<std::string>& argv) {
  absl::StatusOr<cli::Args> args = cli::Args::Parse(
      argv, {"addr", "http", "duration", "streams", "models", "deadline", "daemon-pid", "seed"},
      {"json", "help"});
  if (!args.ok()) return UsageError("soak", std::string(args.status().message()));
  if (args->Has("help")) {
    std::fputs(kHelp, stdout);
    return kExitOk;
  }
  if (!args->positional().empty()) return UsageError("soak", "no positional arguments");
  const char* env_addr = std::getenv("DF11_ADDR");
  const std::string addr = args->Get("addr").value_or(env_addr ? env_addr : "127.0.0.1:7411");
  const std::string http = args->Get("http").value_or("");
  int http_port = 0;
  if (!http.empty() && (http.rfind(':') == std::string::npos ||
                        !absl::SimpleAtoi(http.substr(http.rfind(':') + 1), &http_port) ||
                        http_port <= 0 || http_port > 65535)) {
    return UsageError("soak", absl::StrCat("--http ", http, ": expected HOST:PORT"));
  }
  absl::StatusOr<double> duration = args->GetSeconds("duration", 60);
  absl::StatusOr<double> deadline = args->GetSeconds("deadline", 120);
  absl::StatusOr<int64_t> streams = args->GetInt("streams", 64, 1, 4096);
  absl::StatusOr<int64_t> wanted = args->GetInt("models", 0, 0, 1000);
  absl::StatusOr<int64_t> pid = args->GetInt("daemon-pid", 0, 0, 1 << 30);
  absl::StatusOr<int64_t> seed = args->GetInt("seed", 1, 0, INT64_MAX);
  for (const absl::Status& s : {duration.status(), deadline.status(), streams.status(),
                                wanted.status(), pid.status(), seed.status()}) {
    if (!s.ok()) return UsageError("soak", std::string(s.message()));
  }
  const bool json = args->Has("json");

  absl::StatusOr<std::unique_ptr<client::Df11Client>> control = client::Df11Client::Connect(addr);
  if (!control.ok()) return Fail("soak", control.status());
  absl::StatusOr<v1::ListModelsResponse> listed = (*control)->ListModels();
  if (!listed.ok()) return Fail("soak", listed.status());
  std::vector<SoakModel> models;
  for (const v1::ModelInfo& m : listed->models()) {
    models.push_back({.name = m.name(), .directory = m.source()});
  }
  std::sort(models.begin(), models.end(),
            [](const SoakModel& a, const SoakModel& b) { return a.name < b.name; });
  if (*wanted > 0) {
    if (static_cast<int64_t>(models.size()) < *wanted) {
      return Fail("soak", absl::FailedPreconditionError(absl::StrCat(
                              "--models ", *wanted, ": the daemon knows ", models.size())));
    }
    models.resize(static_cast<size_t>(*wanted));
  }
  if (models.empty()) {
    return Fail("soak", absl::FailedPreconditionError("the daemon knows no models"));
  }
  std::mt19937_64 rng(static_cast<uint64_t>(*seed));
  for (SoakModel& m : models) {
    if (absl::Status s = PrepareReference(m, rng); !s.ok()) {
      return Fail("soak", absl::Status(s.code(), absl::StrCat(m.name, " (", m.directory,
                                                              "): ", s.message())));
    }
  }
  absl::StatusOr<v1::NodeStatus> before = (*control)->GetNodeStatus();
  if (!before.ok() || before->devices().empty()) return Fail("soak", before.status());
  const uint64_t budget = before->devices(0).budget();
  const uint64_t weights_before = before->devices(0).weights();
  if (!json) {
    std::fprintf(stderr, "soak: %zu models, %lld streams, %.0f s\n", models.size(),
                 static_cast<long long>(*streams), *duration);
  }

  Soak soak(addr, http, models, absl::Seconds(*deadline), static_cast<uint64_t>(*seed));
  const Clock::time_point start = Clock::now();
  const Clock::time_point end =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(*duration));
  std::vector<std::thread> threads;
  for (int i = 0; i < *streams; ++i) threads.emplace_back([&, i] { soak.Stream(i, end); });
  threads.emplace_back([&] { soak.Control(end); });

  // Once a second: the daemon's accounted bytes, RSS and threads.
  std::vector<double> rss;
  std::vector<int64_t> thread_counts;
  uint64_t used_max = 0;
  int64_t over_budget = 0, samples = 0;
  while (Clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    absl::StatusOr<v1::NodeStatus> status =
        (*control)->GetNodeStatus({.timeout = absl::Seconds(10)});
    if (status.ok() && !status->devices().empty()) {
      ++samples;
      const uint64_t used = status->devices(0).used();
      used_max = std::max(used_max, used);
      if (used > budget) ++over_budget;
    }
    const ProcessSample sample = SampleProcess(static_cast<int>(*pid));
    if (sample.rss_anon_bytes > 0) rss.push_back(static_cast<double>(sample.rss_anon_bytes));
    if (sample.threads > 0) thread_counts.push_back(sample.threads);
  }
  for (std::thread& t : threads) t.join();
  const double elapsed = Seconds(Clock::now() - start);

  // Every model unloaded: the accounted weights go back to where they started (preloads stay).
  for (const SoakModel& m : models) {
    v1::UnloadModelRequest unload;
    unload.set_name(m.name);
    unload.set_drain_seconds(*deadline);
    (void)(*control)->UnloadModel(unload);
  }
  absl::StatusOr<v1::NodeStatus> after = (*control)->GetNodeStatus();
  const uint64_t weights_after =
      after.ok() && !after->devices().empty() ? after->devices(0).weights() : UINT64_MAX;

  Tally& t = soak.tally();
  std::lock_guard lock(t.mu);
  if (over_budget > 0) {
    t.Unexpected(absl::StrCat(over_budget, " samples had more accounted than the budget"));
  }
  if (weights_after != weights_before) {
    t.Unexpected(absl::StrCat("accounted weights ", weights_after, " after unloading every model, ",
                              weights_before, " before"));
  }
  // RSS after warm-up: the first quarter of the run is warm-up.
  const size_t warm = rss.size() / 4;
  const double rss_warm = rss.size() > warm ? rss[warm] : 0;
  const double rss_end = rss.empty() ? 0 : rss.back();
  const double rss_growth = rss_warm > 0 ? rss_end / rss_warm - 1 : 0;
  const int64_t threads_warm = thread_counts.size() > warm ? thread_counts[warm] : 0;
  const int64_t threads_end = thread_counts.empty() ? 0 : thread_counts.back();

  std::vector<double> every_10s;
  for (size_t i = 0; i < rss.size(); i += 10) every_10s.push_back(rss[i]);
  nlohmann::json out = {
      {"duration_seconds", elapsed},
      {"streams", *streams},
      {"models", models.size()},
      {"requests", t.requests},
      {"requests_per_second", elapsed > 0 ? static_cast<double>(t.requests) / elapsed : 0},
      {"outcomes", t.outcomes},
      {"unexpected_errors", t.unexpected},
      {"unexpected_examples", t.examples},
      {"greedy_checked", t.greedy_checked},
      {"greedy_mismatches", t.greedy_mismatches},
      {"hung", t.hung},
      {"ttft_seconds", {{"p50", Percentile(t.ttft, 0.5)}, {"p99", Percentile(t.ttft, 0.99)}}},
      {"per_token_seconds", {{"p50", Percentile(t.tpot, 0.5)}, {"p99", Percentile(t.tpot, 0.99)}}},
      {"budget_bytes", budget},
      {"accounted_max_bytes", used_max},
      {"accounted_samples", samples},
      {"accounted_over_budget_samples", over_budget},
      {"weights_before_bytes", weights_before},
      {"weights_after_unload_bytes", weights_after},
      {"rss_anon_after_warmup_bytes", rss_warm},
      {"rss_anon_end_bytes", rss_end},
      {"rss_anon_growth_after_warmup", rss_growth},
      {"rss_anon_every_10s_bytes", every_10s},
      {"threads_after_warmup", threads_warm},
      {"threads_end", threads_end},
  };
  if (json) {
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("%s\n", out.dump(2).c_str());
  }
  return t.unexpected > 0 ? kExitError : kExitOk;
}

}  // namespace df11::tool
