// df11 daemon-bench: what serving through df11d costs on top of the engine, measured against a
// running daemon: model swaps, the gRPC streaming path, request throughput, the HTTP API, loads on
// demand, and the front door under attack (front_door_bench.h).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/df11_client.h"
#include "codec/base/status_macros.h"
#include "daemon/runtime/backends/cpu/cpu_backend.h"
#include "daemon/runtime/engine/generator.h"
#include "daemon/runtime/engine/model.h"
#include "daemon/runtime/text/tokenizer/tokenizer.h"
#include "grpcpp/grpcpp.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tools/df11/cli.h"
#include "tools/df11/commands.h"
#include "tools/df11/front_door_bench.h"
#include "tools/df11/process_sample.h"
#include "tools/df11/stats.h"

namespace df11::tool {
namespace {

namespace v1 = ::df11::v1;

constexpr char kHelp[] = R"(Usage: df11 daemon-bench --addr HOST:PORT --model DIR [options]

Measures what serving through a running df11d costs on top of the engine. The daemon loads DIR
twice, as bench-a and bench-b (each copy resident on its own), and unloads both at the end; this
process also loads DIR to run the CPU engine alone. Scenarios, in this order:
  swap      time to first token of sequential 1-token requests that alternate bench-a, bench-b,
            against the same requests all sent to bench-a: --swap-requests of each, in short
            blocks of one kind and the other (the ratio alternate/same is the result; target
            <= 1.05)
  overhead  per-token time of a --tokens greedy generation streamed through gRPC against the
            engine alone (same model, prompt and thread count), --rounds runs each
  rps       1-token requests/s from --clients concurrent clients for --seconds, against the
            engine alone's rate for the same request
  idle      --idle-streams WatchNodeStatus streams over --connections gRPC connections, opened
            and held for --hold, 1-token requests served meanwhile; every stream must open and
            end only by our cancellation (the daemon's threads and bytes per stream are the
            result; target: 10,000 streams over 100 connections add fewer than 200 threads)
  http      per-token time of the overhead generation streamed as OpenAI Server-Sent Events
            (POST /v1/completions on --http) against the same generation through gRPC, in
            alternating rounds (the ratio is the result; target <= 1.05)
  ondemand  time to first token of a request for --catalog-model, a catalog entry of the daemon
            that is not resident (its files in the page cache), which loads it on demand, against
            LoadModel of it alone; --rounds of each, the model unloaded between them
  chunked   POST /v1/completions on --http with a --chunked-mib chunked body, --rounds times:
            the time until the daemon refuses it (413 expected) and the bytes it let in first
  slow      1-token POST /v1/completions on --http, back to back, alone for a quarter of
            --slow-seconds, then for --slow-seconds while --slow-connections clients trickle
            their headers one byte per --trickle seconds (reconnecting when cut; from
            127.1.0.0/16 on IPv4 loopback, as many clients would; from one address otherwise,
            where limits.http_max_connections_per_client caps them): the latency ratio and the
            daemon's threads are the result
Run the daemon alone on the machine: the engine-alone runs share its CPUs.

  --addr HOST:PORT     the daemon (default: $DF11_ADDR, else 127.0.0.1:7411)
  --model DIR          a DF11 or BF16 model directory the daemon can read
  --prompt-tokens N    prompt length, random token ids (default 32)
  --tokens N           tokens of the overhead generation (default 64)
  --swap-requests N    measured requests of each kind in the swap scenario (default 100)
  --rounds N           runs of the overhead scenario (default 3)
  --clients N          concurrent clients of the rps scenario (default 8)
  --seconds S          duration of the rps scenario (default 5)
  --idle-streams N     streams of the idle scenario (default 1000)
  --connections N      gRPC connections they share (default 100)
  --hold S             how long they are held (default 10): a quarter with no requests, to
                       measure what the streams alone cost the daemon, then with requests
  --threads N          engine-alone CPU threads; give the daemon's cpu_threads (default: one per CPU)
  --daemon-pid PID     the daemon's process, to report its threads, RSS and CPU time (same host)
  --http HOST:PORT     the daemon's HTTP listener, for the http scenario
  --catalog-model NAME a catalog entry of the daemon whose source is DIR, for ondemand
  --chunked-mib N      body size of the chunked scenario in MiB (default 64)
  --slow-connections N slow clients of the slow scenario (default 300)
  --trickle S          seconds between their header bytes (default 1)
  --slow-seconds S     how long the slow clients are held (default 15; the header
                       deadline, limits.http_header_timeout, is 10 s by default)
  --only LIST          the scenarios to run, comma-separated (default swap,overhead,rps,idle;
                       also http, chunked and slow with --http, ondemand with --catalog-model)
  --json               one JSON object instead of text
)";

// One generation through the daemon, timed on this side.
struct Streamed {
  absl::Status status;
  double first_token_seconds = 0;  // from the call to the first message carrying a token
  double last_token_seconds = 0;
  int tokens = 0;
  v1::Timings timings;  // as the daemon reports them
};

Streamed StreamGenerate(client::Df11Client& client, const std::string& model,
                        const std::vector<int32_t>& prompt, int max_tokens) {
  v1::GenerateRequest request;
  request.set_model(model);
  request.mutable_token_ids()->mutable_ids()->Assign(prompt.begin(), prompt.end());
  request.mutable_sampling()->set_temperature(0);
  request.set_max_tokens(max_tokens);
  request.set_ignore_eos(true);
  Streamed out;
  const Clock::time_point start = Clock::now();
  out.status = client.Generate(request, [&](const v1::GenerateResponse& r) {
    if (r.token_ids_size() > 0) {
      const double at = Seconds(Clock::now() - start);
      if (out.tokens == 0) out.first_token_seconds = at;
      out.last_token_seconds = at;
      out.tokens += r.token_ids_size();
    }
    if (r.has_timings()) out.timings = r.timings();
    return true;
  });
  if (out.status.ok() && out.tokens != max_tokens) {
    out.status = absl::InternalError(
        absl::StrCat("asked for ", max_tokens, " tokens, received ", out.tokens));
  }
  return out;
}

struct Setup {
  client::Df11Client* client;
  std::unique_ptr<runtime::Model> model;
  runtime::Tokenizer tokenizer;
  std::unique_ptr<runtime::CpuBackend> backend;
  std::vector<int32_t> prompt;
};

// The engine alone: one greedy generation of `tokens` tokens from the prompt, in this process.
absl::StatusOr<runtime::GenerationResult> EngineGenerate(Setup& s, int tokens) {
  runtime::SamplingParams params;
  params.temperature = 0;
  params.ignore_eos = true;
  params.max_tokens = tokens;
  runtime::GenerationRequest request{.prompt = s.prompt, .sampling = params};
  return runtime::Generate(*s.backend, *s.model, s.tokenizer, request,
                           [](const runtime::GeneratedToken&) { return true; });
}

// Requests measured per block of the swap scenario; short blocks in ABBA order, so that a drift in
// the machine's speed (large on shared machines) hits both phases alike.
constexpr int kSwapBlock = 5;

absl::StatusOr<nlohmann::json> BenchSwap(Setup& s, int requests) {
  // Warm both models and the connection first.
  for (const char* model : {"bench-a", "bench-b", "bench-a", "bench-b"}) {
    Streamed w = StreamGenerate(*s.client, model, s.prompt, 1);
    DF11_RETURN_IF_ERROR(w.status);
  }
  std::vector<double> same, alternate, same_server, alternate_server;
  const int blocks = (requests + kSwapBlock - 1) / kSwapBlock;
  for (int block = 0; block < 2 * blocks; ++block) {
    const bool alternating = block % 4 == 1 || block % 4 == 2;
    // Request 0 sets the state each measured request expects before it (the model of the one
    // before it: the same model, or the other one) and is not measured.
    for (int i = 0; i <= kSwapBlock; ++i) {
      const std::string model = alternating && i % 2 == 0 ? "bench-b" : "bench-a";
      Streamed r = StreamGenerate(*s.client, model, s.prompt, 1);
      DF11_RETURN_IF_ERROR(r.status);
      if (i == 0) continue;
      (alternating ? alternate : same).push_back(r.first_token_seconds);
      (alternating ? alternate_server : same_server)
          .push_back(r.timings.time_to_first_token_seconds());
    }
  }
  return nlohmann::json{{"requests_per_phase", same.size()},
                        {"same_model_ttft_ms", Median(same) * 1e3},
                        {"alternating_ttft_ms", Median(alternate) * 1e3},
                        {"ratio", Median(alternate) / Median(same)},
                        {"same_model_server_ttft_ms", Median(same_server) * 1e3},
                        {"alternating_server_ttft_ms", Median(alternate_server) * 1e3},
                        {"server_ratio", Median(alternate_server) / Median(same_server)}};
}

absl::StatusOr<nlohmann::json> BenchOverhead(Setup& s, int tokens, int rounds) {
  std::vector<double> engine_per_token, engine_ttft, grpc_per_token, grpc_ttft;
  for (int round = 0; round < rounds; ++round) {
    DF11_ASSIGN_OR_RETURN(runtime::GenerationResult e, EngineGenerate(s, tokens));
    engine_ttft.push_back(e.prefill_seconds);
    engine_per_token.push_back(e.decode_seconds / (tokens - 1));
    Streamed g = StreamGenerate(*s.client, "bench-a", s.prompt, tokens);
    DF11_RETURN_IF_ERROR(g.status);
    grpc_ttft.push_back(g.first_token_seconds);
    grpc_per_token.push_back((g.last_token_seconds - g.first_token_seconds) / (tokens - 1));
  }
  const double engine = Median(engine_per_token), grpc = Median(grpc_per_token);
  return nlohmann::json{{"tokens", tokens},
                        {"rounds", rounds},
                        {"engine_ms_per_token", engine * 1e3},
                        {"grpc_ms_per_token", grpc * 1e3},
                        {"overhead_us_per_token", (grpc - engine) * 1e6},
                        {"per_token_ratio", grpc / engine},
                        {"engine_ttft_ms", Median(engine_ttft) * 1e3},
                        {"grpc_ttft_ms", Median(grpc_ttft) * 1e3}};
}

absl::StatusOr<nlohmann::json> BenchRequestsPerSecond(Setup& s, int clients, double seconds) {
  // The engine alone: the same 1-token request, back to back.
  int engine_requests = 0;
  const Clock::time_point engine_start = Clock::now();
  while (Seconds(Clock::now() - engine_start) < std::min(seconds, 2.0) || engine_requests < 3) {
    DF11_RETURN_IF_ERROR(EngineGenerate(s, 1).status());
    ++engine_requests;
  }
  const double engine_rate = engine_requests / Seconds(Clock::now() - engine_start);

  std::mutex mu;
  std::vector<double> latencies;
  std::map<std::string, int> errors;
  const Clock::time_point start = Clock::now();
  const Clock::time_point end =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      while (Clock::now() < end) {
        const Clock::time_point t = Clock::now();
        Streamed r = StreamGenerate(*s.client, "bench-a", s.prompt, 1);
        const double latency = Seconds(Clock::now() - t);
        std::lock_guard<std::mutex> lock(mu);
        if (r.status.ok()) {
          latencies.push_back(latency);
        } else {
          ++errors[absl::StatusCodeToString(r.status.code())];
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double elapsed = Seconds(Clock::now() - start);
  int error_count = 0;
  for (const auto& [code, n] : errors) error_count += n;
  return nlohmann::json{{"clients", clients},
                        {"seconds", elapsed},
                        {"requests", latencies.size()},
                        {"errors", error_count},
                        {"errors_by_code", errors},
                        {"requests_per_second", static_cast<double>(latencies.size()) / elapsed},
                        {"engine_alone_requests_per_second", engine_rate},
                        {"latency_ms_p50", Percentile(latencies, 0.5) * 1e3},
                        {"latency_ms_p99", Percentile(latencies, 0.99) * 1e3}};
}

absl::Status LoadBenchModels(client::Df11Client& client, const std::string& dir) {
  for (const char* name : {"bench-a", "bench-b"}) {
    v1::LoadModelRequest request;
    request.set_source(dir);
    request.set_name(name);
    DF11_ASSIGN_OR_RETURN(v1::LoadModelProgress last, client.LoadModel(request, nullptr));
    if (last.model().state() != v1::MODEL_STATE_READY) {
      return absl::FailedPreconditionError(
          absl::StrCat("loading ", name, " from ", dir, ": ", last.model().failure_reason()));
    }
  }
  return absl::OkStatus();
}

// One greedy generation of `tokens` tokens streamed as SSE from POST /v1/completions: the time of
// the first and of the last event (the last token's, sent with the finish reason).
absl::StatusOr<Streamed> HttpStreamGenerate(const std::string& http,
                                            const std::vector<int32_t>& prompt, int tokens) {
  const size_t colon = http.rfind(':');
  httplib::Client client(http.substr(0, colon), std::stoi(http.substr(colon + 1)));
  client.set_read_timeout(std::chrono::seconds(120));
  const nlohmann::json body = {{"model", "bench-a"}, {"prompt", prompt},   {"max_tokens", tokens},
                               {"temperature", 0},   {"ignore_eos", true}, {"stream", true}};
  httplib::Request request;
  request.method = "POST";
  request.path = "/v1/completions";
  request.body = body.dump();
  request.set_header("Content-Type", "application/json");
  Streamed out;
  int events = 0;
  std::string pending;
  const Clock::time_point start = Clock::now();
  request.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    pending.append(data, n);
    for (size_t end; (end = pending.find("\n\n")) != std::string::npos;) {
      const double at = Seconds(Clock::now() - start);
      if (events++ == 0) out.first_token_seconds = at;
      out.last_token_seconds = at;
      pending.erase(0, end + 2);
    }
    return true;
  };
  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  if (!client.send(request, response, error) || response.status != 200) {
    return absl::UnavailableError(absl::StrCat("POST http://", http,
                                               "/v1/completions: ", httplib::to_string(error), " ",
                                               response.status, " ", pending));
  }
  out.tokens = tokens;
  return out;
}

// One 1-token POST /v1/completions on a connection of its own, as a new client would: true on 200.
bool HttpComplete(const std::string& http, const std::vector<int32_t>& prompt) {
  const size_t colon = http.rfind(':');
  httplib::Client client(http.substr(0, colon), std::stoi(http.substr(colon + 1)));
  client.set_connection_timeout(std::chrono::seconds(60));
  client.set_read_timeout(std::chrono::seconds(60));
  const nlohmann::json body = {
      {"model", "bench-a"}, {"prompt", prompt}, {"max_tokens", 1}, {"temperature", 0}};
  const httplib::Result r = client.Post("/v1/completions", body.dump(), "application/json");
  return r && r->status == 200;
}

absl::StatusOr<nlohmann::json> BenchHttp(Setup& s, const std::string& http, int tokens,
                                         int rounds) {
  DF11_RETURN_IF_ERROR(HttpStreamGenerate(http, s.prompt, 2).status());  // warm the connection
  std::vector<double> grpc_per_token, http_per_token, grpc_ttft, http_ttft;
  for (int round = 0; round < rounds; ++round) {
    Streamed g = StreamGenerate(*s.client, "bench-a", s.prompt, tokens);
    DF11_RETURN_IF_ERROR(g.status);
    grpc_ttft.push_back(g.first_token_seconds);
    grpc_per_token.push_back((g.last_token_seconds - g.first_token_seconds) / (tokens - 1));
    DF11_ASSIGN_OR_RETURN(Streamed h, HttpStreamGenerate(http, s.prompt, tokens));
    http_ttft.push_back(h.first_token_seconds);
    http_per_token.push_back((h.last_token_seconds - h.first_token_seconds) / (tokens - 1));
  }
  const double grpc = Median(grpc_per_token), sse = Median(http_per_token);
  return nlohmann::json{{"tokens", tokens},
                        {"rounds", rounds},
                        {"grpc_ms_per_token", grpc * 1e3},
                        {"http_ms_per_token", sse * 1e3},
                        {"per_token_ratio", sse / grpc},
                        {"grpc_ttft_ms", Median(grpc_ttft) * 1e3},
                        {"http_ttft_ms", Median(http_ttft) * 1e3}};
}

absl::Status Unload(client::Df11Client& client, const std::string& name) {
  v1::UnloadModelRequest request;
  request.set_name(name);
  request.set_cancel_in_flight(true);
  return client.UnloadModel(request).status();
}

absl::StatusOr<nlohmann::json> BenchOnDemand(Setup& s, const std::string& dir,
                                             const std::string& name, int rounds) {
  (void)Unload(*s.client, name);  // not resident at the start
  std::vector<double> on_demand_ttft, load, load_then_ttft;
  for (int round = 0; round < rounds; ++round) {
    Streamed first = StreamGenerate(*s.client, name, s.prompt, 1);
    DF11_RETURN_IF_ERROR(first.status);
    on_demand_ttft.push_back(first.first_token_seconds);
    DF11_RETURN_IF_ERROR(Unload(*s.client, name));
    v1::LoadModelRequest request;
    request.set_source(dir);
    request.set_name(name);
    const Clock::time_point start = Clock::now();
    DF11_RETURN_IF_ERROR(s.client->LoadModel(request, nullptr).status());
    load.push_back(Seconds(Clock::now() - start));
    Streamed after = StreamGenerate(*s.client, name, s.prompt, 1);
    DF11_RETURN_IF_ERROR(after.status);
    load_then_ttft.push_back(load.back() + after.first_token_seconds);
    DF11_RETURN_IF_ERROR(Unload(*s.client, name));
  }
  return nlohmann::json{{"rounds", rounds},
                        {"on_demand_ttft_ms", Median(on_demand_ttft) * 1e3},
                        {"load_ms", Median(load) * 1e3},
                        {"load_then_ttft_ms", Median(load_then_ttft) * 1e3},
                        {"ratio_to_load", Median(on_demand_ttft) / Median(load)}};
}

void UnloadBenchModels(client::Df11Client& client) {
  for (const char* name : {"bench-a", "bench-b"}) {
    v1::UnloadModelRequest request;
    request.set_name(name);
    (void)client.UnloadModel(request);
  }
}

void PrintText(const nlohmann::json& out) {
  if (out.contains("swap")) {
    const auto& sw = out["swap"];
    std::printf(
        "swap      TTFT same model %.2f ms, alternating %.2f ms: ratio %.3f (server %.3f)\n",
        sw["same_model_ttft_ms"].get<double>(), sw["alternating_ttft_ms"].get<double>(),
        sw["ratio"].get<double>(), sw["server_ratio"].get<double>());
  }
  if (out.contains("overhead")) {
    const auto& ov = out["overhead"];
    std::printf("overhead  %.3f ms/token through gRPC, %.3f engine alone: %+.1f us/token (%.3fx)\n",
                ov["grpc_ms_per_token"].get<double>(), ov["engine_ms_per_token"].get<double>(),
                ov["overhead_us_per_token"].get<double>(), ov["per_token_ratio"].get<double>());
  }
  if (out.contains("rps")) {
    const auto& rps = out["rps"];
    std::printf(
        "rps       %.1f requests/s from %d clients (engine alone %.1f), p50 %.2f ms, p99 "
        "%.2f ms, %d errors\n",
        rps["requests_per_second"].get<double>(), rps["clients"].get<int>(),
        rps["engine_alone_requests_per_second"].get<double>(), rps["latency_ms_p50"].get<double>(),
        rps["latency_ms_p99"].get<double>(), rps["errors"].get<int>());
  }
  if (out.contains("http")) {
    const auto& h = out["http"];
    std::printf("http      %.3f ms/token as SSE, %.3f through gRPC: %.3fx (TTFT %.2f vs %.2f ms)\n",
                h["http_ms_per_token"].get<double>(), h["grpc_ms_per_token"].get<double>(),
                h["per_token_ratio"].get<double>(), h["http_ttft_ms"].get<double>(),
                h["grpc_ttft_ms"].get<double>());
  }
  if (out.contains("ondemand")) {
    const auto& o = out["ondemand"];
    std::printf(
        "ondemand  first token of a catalog model loaded on demand %.1f ms; LoadModel alone "
        "%.1f ms (%.2fx), then its first token %.1f ms\n",
        o["on_demand_ttft_ms"].get<double>(), o["load_ms"].get<double>(),
        o["ratio_to_load"].get<double>(), o["load_then_ttft_ms"].get<double>());
  }
  if (out.contains("chunked")) {
    const auto& c = out["chunked"];
    std::printf(
        "chunked   %s chunked bodies refused (413) %s: answer after %.1f ms and %s of body "
        "(p50), closed after %.1f ms\n",
        HumanBytes(c["body_bytes"].get<int64_t>()).c_str(),
        c["refused_all"].get<bool>() ? "every time" : "NOT every time",
        c["answer_ms_p50"].get<double>(),
        HumanBytes(static_cast<int64_t>(c["bytes_sent_before_answer_p50"].get<double>())).c_str(),
        c["closed_ms_p50"].get<double>());
  }
  if (out.contains("slow")) {
    const auto& sl = out["slow"];
    std::printf(
        "slow      %d/%d slow clients held: requests p50 %.2f ms (alone %.2f, %.2fx), p99 %.2f "
        "ms (alone %.2f), %d errors; %d cut by the daemon\n",
        sl["held_at_end"].get<int>(), sl["slow_connections"].get<int>(),
        sl["with_slow_ms_p50"].get<double>(), sl["alone_ms_p50"].get<double>(),
        sl["p50_ratio"].get<double>(), sl["with_slow_ms_p99"].get<double>(),
        sl["alone_ms_p99"].get<double>(), sl["with_slow_errors"].get<int>(),
        sl["slow_closed_by_daemon"].get<int>());
    if (sl.contains("daemon_threads_added")) {
      std::printf("          daemon: %lld threads added by the slow clients\n",
                  static_cast<long long>(sl["daemon_threads_added"].get<int64_t>()));
    }
  }
  if (out.contains("idle")) {
    const auto& idle = out["idle"];
    std::printf(
        "idle      %d/%d streams over %d connections opened in %.2f s, held %.1f s: %d errors, "
        "%d requests served meanwhile (%.2f ms p50, %d failed)\n",
        idle["opened"].get<int>(), idle["streams"].get<int>(), idle["connections"].get<int>(),
        idle["open_seconds"].get<double>(), idle["hold_seconds"].get<double>(),
        idle["errors"].get<int>(), idle["requests_during_hold"].get<int>(),
        idle["request_ms_during_hold_p50"].get<double>(),
        idle["request_errors_during_hold"].get<int>());
    if (idle.contains("daemon_held")) {
      std::printf(
          "          daemon: %lld threads (%+lld), %s RSS (%.0f bytes per stream), CPU %.1f%% "
          "with the streams alone, %.1f%% while serving\n",
          static_cast<long long>(idle["daemon_held"]["threads"].get<int64_t>()),
          static_cast<long long>(idle["daemon_threads_added"].get<int64_t>()),
          HumanBytes(idle["daemon_held"]["rss_bytes"].get<int64_t>()).c_str(),
          idle["daemon_bytes_per_stream"].get<double>(),
          idle["daemon_cpu_percent_streams_only"].get<double>(),
          idle["daemon_cpu_percent_with_requests"].get<double>());
    }
  }
}

}  // namespace

int RunDaemonBench(const std::vector<std::string>& argv) {
  constexpr char kName[] = "daemon-bench";
  absl::StatusOr<Args> args = Args::Parse(
      argv, {"addr",          "model",       "prompt-tokens",    "tokens",       "swap-requests",
             "rounds",        "clients",     "seconds",          "idle-streams", "connections",
             "hold",          "threads",     "daemon-pid",       "only",         "http",
             "catalog-model", "chunked-mib", "slow-connections", "trickle",      "slow-seconds"},
      {"json", "help"});
  if (!args.ok()) return UsageError(kName, std::string(args.status().message()));
  if (args->Has("help")) return std::fputs(kHelp, stdout), kExitOk;
  if (!args->positional().empty()) return UsageError(kName, "unexpected argument");
  if (!args->Has("model")) return UsageError(kName, "--model DIR is required");
  absl::StatusOr<int64_t> prompt_tokens = args->GetInt("prompt-tokens", 32, 1, 1 << 16);
  absl::StatusOr<int64_t> tokens = args->GetInt("tokens", 64, 2, 1 << 16);
  absl::StatusOr<int64_t> swap_requests = args->GetInt("swap-requests", 100, 1, 100000);
  absl::StatusOr<int64_t> rounds = args->GetInt("rounds", 3, 1, 1000);
  absl::StatusOr<int64_t> clients = args->GetInt("clients", 8, 1, 4096);
  absl::StatusOr<double> seconds = args->GetSeconds("seconds", 5);
  absl::StatusOr<int64_t> idle_streams = args->GetInt("idle-streams", 1000, 0, 100000);
  absl::StatusOr<int64_t> connections = args->GetInt("connections", 100, 1, 10000);
  absl::StatusOr<double> hold = args->GetSeconds("hold", 10);
  absl::StatusOr<int64_t> chunked_mib = args->GetInt("chunked-mib", 64, 1, 1 << 16);
  absl::StatusOr<int64_t> slow_connections = args->GetInt("slow-connections", 300, 1, 60000);
  absl::StatusOr<double> trickle = args->GetSeconds("trickle", 1);
  absl::StatusOr<double> slow_seconds = args->GetSeconds("slow-seconds", 15);
  absl::StatusOr<int64_t> threads =
      args->GetInt("threads", std::max(1u, std::thread::hardware_concurrency()), 1, 1024);
  absl::StatusOr<int64_t> daemon_pid = args->GetInt("daemon-pid", 0, 0, INT32_MAX);
  for (const absl::Status& s :
       {prompt_tokens.status(), tokens.status(), swap_requests.status(), rounds.status(),
        clients.status(), seconds.status(), idle_streams.status(), connections.status(),
        hold.status(), chunked_mib.status(), slow_connections.status(), trickle.status(),
        slow_seconds.status(), threads.status(), daemon_pid.status()}) {
    if (!s.ok()) return UsageError(kName, std::string(s.message()));
  }
  const char* env_addr = std::getenv("DF11_ADDR");
  const std::string address =
      args->Get("addr").value_or(env_addr != nullptr ? env_addr : "127.0.0.1:7411");
  const std::set<std::string> all = {"swap", "overhead", "rps",     "idle",
                                     "http", "ondemand", "chunked", "slow"};
  const std::vector<std::string> only_list =
      absl::StrSplit(args->Get("only").value_or("swap,overhead,rps,idle"), ',');
  const std::set<std::string> only(only_list.begin(), only_list.end());
  for (const std::string& scenario : only) {
    if (!all.contains(scenario)) {
      return UsageError(
          kName, absl::StrCat("--only: unknown scenario '", scenario,
                              "' (swap, overhead, rps, idle, http, ondemand, chunked, slow)"));
    }
  }
  for (const char* scenario : {"http", "chunked", "slow"}) {
    if (only.contains(scenario) && !args->Has("http")) {
      return UsageError(kName, absl::StrCat("the ", scenario, " scenario needs --http HOST:PORT"));
    }
  }
  if (only.contains("ondemand") && !args->Has("catalog-model")) {
    return UsageError(kName, "the ondemand scenario needs --catalog-model NAME");
  }
  const std::string dir = *args->Get("model");
  const bool json = args->Has("json");
  auto progress = [json](const char* what) {
    if (!json) std::fprintf(stderr, "%s\n", what);
  };

  absl::StatusOr<std::unique_ptr<client::Df11Client>> client = client::Df11Client::Connect(address);
  if (!client.ok()) return Fail(kName, client.status());
  absl::StatusOr<std::unique_ptr<runtime::Model>> model = runtime::Model::Load(dir);
  if (!model.ok()) return Fail(kName, model.status());
  absl::StatusOr<runtime::Tokenizer> tokenizer =
      runtime::Tokenizer::FromFile(dir + "/tokenizer.json");
  if (!tokenizer.ok()) return Fail(kName, tokenizer.status());
  Setup setup{.client = client->get(),
              .model = std::move(*model),
              .tokenizer = std::move(*tokenizer),
              .backend = std::make_unique<runtime::CpuBackend>(
                  runtime::CpuBackend::Options{.threads = static_cast<int>(*threads)}),
              .prompt = {}};
  std::mt19937 rng(1);
  setup.prompt.resize(*prompt_tokens);
  for (int32_t& t : setup.prompt) {
    t = static_cast<int32_t>(rng() % setup.model->config().vocab_size);
  }

  progress("loading the model twice into the daemon (bench-a, bench-b)");
  // An absolute path: the daemon resolves relative ones against its own working directory.
  const std::string source = std::filesystem::absolute(dir).string();
  if (absl::Status s = LoadBenchModels(**client, source); !s.ok()) {
    UnloadBenchModels(**client);
    return Fail(kName, s);
  }
  nlohmann::json out = {{"address", address},
                        {"model",
                         {{"dir", dir},
                          {"df11", setup.model->is_df11()},
                          {"layers", setup.model->config().num_layers},
                          {"hidden_size", setup.model->config().hidden_size},
                          {"resident_bytes", setup.model->resident_bytes()}}},
                        {"prompt_tokens", *prompt_tokens},
                        {"engine_threads", *threads}};
  absl::Status status = [&]() -> absl::Status {
    if (only.contains("swap")) {
      progress("swap: sequential 1-token requests, one model vs alternating");
      DF11_ASSIGN_OR_RETURN(out["swap"], BenchSwap(setup, static_cast<int>(*swap_requests)));
    }
    if (only.contains("overhead")) {
      progress("overhead: streamed generation vs the engine alone");
      DF11_ASSIGN_OR_RETURN(out["overhead"], BenchOverhead(setup, static_cast<int>(*tokens),
                                                           static_cast<int>(*rounds)));
    }
    if (only.contains("rps")) {
      progress("rps: concurrent 1-token requests");
      DF11_ASSIGN_OR_RETURN(out["rps"],
                            BenchRequestsPerSecond(setup, static_cast<int>(*clients), *seconds));
    }
    if (only.contains("http")) {
      progress("http: SSE streaming vs gRPC");
      DF11_ASSIGN_OR_RETURN(out["http"],
                            BenchHttp(setup, *args->Get("http"), static_cast<int>(*tokens),
                                      static_cast<int>(*rounds)));
    }
    if (only.contains("ondemand")) {
      progress("ondemand: first token of a catalog model vs LoadModel alone");
      DF11_ASSIGN_OR_RETURN(
          out["ondemand"],
          BenchOnDemand(setup, source, *args->Get("catalog-model"), static_cast<int>(*rounds)));
    }
    if (only.contains("chunked")) {
      progress("chunked: a chunked body past limits.max_request_bytes");
      DF11_ASSIGN_OR_RETURN(out["chunked"], BenchChunkedBody(*args->Get("http"), *chunked_mib << 20,
                                                             static_cast<int>(*rounds),
                                                             static_cast<int>(*daemon_pid)));
    }
    if (only.contains("slow")) {
      progress("slow: requests served while slow clients trickle their headers");
      const std::string http = *args->Get("http");
      DF11_ASSIGN_OR_RETURN(
          out["slow"],
          BenchSlowClients(
              http, static_cast<int>(*slow_connections), *trickle, *slow_seconds,
              [&] { return HttpComplete(http, setup.prompt); }, static_cast<int>(*daemon_pid)));
    }
    if (only.contains("idle")) {
      progress("idle: held streams");
      DF11_ASSIGN_OR_RETURN(
          out["idle"],
          BenchIdleStreams(
              address, static_cast<int>(*idle_streams), static_cast<int>(*connections), *hold,
              [&] { return StreamGenerate(*setup.client, "bench-a", setup.prompt, 1).status.ok(); },
              static_cast<int>(*daemon_pid)));
    }
    return absl::OkStatus();
  }();
  UnloadBenchModels(**client);
  if (!status.ok()) return Fail(kName, status);
  if (json) {
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    PrintText(out);
  }
  return kExitOk;
}

}  // namespace df11::tool
