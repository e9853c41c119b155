// df11d: the node daemon. Serves the ModelHost gRPC API (with grpc.health.v1 and reflection) and
// Prometheus /metrics, loads the configured models, and drains on SIGTERM.
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "codec/mapping_guard.h"
#include "daemon/config/config.h"
#include "daemon/server/http_server.h"
#include "daemon/server/log.h"
#include "daemon/server/model_host_service.h"
#include "daemon/server/node.h"
#include "daemon/server/node_collector.h"
#include "daemon/server/shard_service.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "nlohmann/json.hpp"

namespace {

using df11::server::Log;

constexpr char kHelp[] =
    R"(Usage: df11d [--config FILE] [--listen HOST:PORT] [--http-listen HOST:PORT]
             [--port-file FILE] [--print-config]

Hosts many DFloat11-compressed language models at once and serves them over gRPC
(df11.v1.ModelHost, grpc.health.v1, server reflection) and HTTP (the OpenAI API: /v1/models,
/v1/models/{id}, /v1/completions, /v1/chat/completions; Prometheus metrics on /metrics; the
probes /health and /ready).

  --config FILE          YAML configuration (default: the embedded configs/default.yaml)
  --listen HOST:PORT     gRPC address, overriding listen.grpc (port 0: any free port)
  --http-listen HOST:PORT  HTTP address (OpenAI API, /metrics), overriding listen.http ("" turns
                         it off)
  --port-file FILE       once listening, write the bound ports as JSON {"grpc": P, "http": Q}
  --print-config         print the effective configuration as YAML and exit
  --help, --version
Each option with a value also takes it as --option=VALUE.

grpc.health.v1: the server ("") and df11.v1.ModelHost are SERVING once the preloaded models are
ready and NOT_SERVING while draining (a readiness probe); "liveness" is SERVING from the start
(a liveness probe that a long preload does not fail). Over HTTP, GET /ready answers 200 or 503
likewise, and GET /health 200 while the process serves.
SIGTERM or SIGINT: stop accepting calls, let in-flight streams finish for shutdown.drain, exit 0.
Exit codes: 0 clean exit, 1 failure at start (the message says why), 2 bad command line.
)";

// grpc.health.v1 service names, as deploy/k8s's probes ask for them.
constexpr const char* kReadinessServices[] = {"", "df11.v1.ModelHost"};
constexpr char kLivenessService[] = "liveness";

int Usage(const std::string& message) {
  std::fprintf(stderr, "df11d: %s\nTry 'df11d --help'.\n", message.c_str());
  return 2;
}

int Fail(const std::string& message) {
  Log(message);
  return 1;
}

// Writes `text` to `path` whole or not at all (a reader never sees half a file).
bool WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out.flush()) return false;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  return !ec;
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<std::string> config_file, listen, http_listen, port_file;
  bool print_config = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    // --option=VALUE: the value is inline; --option VALUE: the next argument.
    std::optional<std::string> inline_value;
    if (const size_t eq = arg.find('='); absl::StartsWith(arg, "--") && eq != std::string::npos) {
      inline_value = arg.substr(eq + 1);
      arg.resize(eq);
    }
    auto value = [&](std::optional<std::string>* out) {
      if (inline_value.has_value()) {
        *out = *inline_value;
        return true;
      }
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    const bool takes_value =
        arg == "--config" || arg == "--listen" || arg == "--http-listen" || arg == "--port-file";
    const bool flag =
        arg == "--help" || arg == "-h" || arg == "--version" || arg == "--print-config";
    if (inline_value.has_value() && flag) return Usage(absl::StrCat(arg, " takes no value"));
    if (inline_value.has_value() && takes_value && inline_value->empty()) {
      return Usage(absl::StrCat(arg, "= needs a value"));
    }
    if (arg == "--help" || arg == "-h") {
      std::fputs(kHelp, stdout);
      return 0;
    } else if (arg == "--version") {
      std::printf("df11d %s\n", DF11_VERSION);
      return 0;
    } else if (arg == "--print-config") {
      print_config = true;
    } else if (arg == "--config") {
      if (!value(&config_file)) return Usage("--config needs a FILE");
    } else if (arg == "--listen") {
      if (!value(&listen)) return Usage("--listen needs HOST:PORT");
    } else if (arg == "--http-listen") {
      if (!value(&http_listen)) return Usage("--http-listen needs HOST:PORT");
    } else if (arg == "--port-file") {
      if (!value(&port_file)) return Usage("--port-file needs a FILE");
    } else {
      return Usage(absl::StrCat("unknown argument ", arg));
    }
  }

  absl::StatusOr<df11::config::Config> config =
      config_file ? df11::config::LoadConfigFile(*config_file)
                  : df11::config::ParseConfig(df11::config::DefaultConfigYaml(),
                                              std::filesystem::current_path().string());
  if (!config.ok()) return Fail(absl::StrCat("configuration: ", config.status().message()));
  if (listen) config->grpc_listen = *listen;
  if (http_listen) config->http_listen = *http_listen;
  if (print_config) {
    std::fputs(df11::config::ConfigToYaml(*config).c_str(), stdout);
    return 0;
  }

  // A client that hangs up mid-response is an error on that connection (TLS writes with write(2),
  // which raises SIGPIPE), never the end of the daemon.
  signal(SIGPIPE, SIG_IGN);
  // A model file truncated under its mapping (CPU backend) fails that model, not the daemon.
  df11::codec::InstallMappingGuard();
  // Files df11d writes into the hub cache stay writable by its group, which the node's other
  // huggingface_hub users may share (deploy/k8s).
  umask(002);
  // Signals go to the thread that waits for them, never to a worker in the middle of its work.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  absl::StatusOr<std::unique_ptr<df11::server::Node>> node = df11::server::Node::Create(*config);
  if (!node.ok()) return Fail(absl::StrCat("configuration: ", node.status().message()));

  df11::server::ModelHostService service(**node);
  df11::server::ShardService shards(**node);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int grpc_port = 0;
  builder.AddListeningPort(config->grpc_listen,
                           (*node)->tls() != nullptr ? (*node)->tls()->GrpcCredentials()
                                                     : grpc::InsecureServerCredentials(),
                           &grpc_port);
  builder.RegisterService(&service);
  builder.RegisterService(&shards);
  builder.SetMaxReceiveMessageSize(static_cast<int>(config->max_request_bytes));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || grpc_port == 0) {
    return Fail(absl::StrCat("cannot listen on ", config->grpc_listen, " (listen.grpc)"));
  }
  (*node)->SetGrpcPort(grpc_port);
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  // Not ready until the preloaded models are; alive from now on.
  for (const char* service : kReadinessServices) health->SetServingStatus(service, false);
  health->SetServingStatus(kLivenessService, true);

  std::unique_ptr<df11::server::HttpServer> http;
  int http_port = 0;
  if (!config->http_listen.empty()) {
    absl::StatusOr<std::unique_ptr<df11::server::HttpServer>> started =
        df11::server::HttpServer::Start(
            **node,
            {(*node)->metrics().registry(), std::make_shared<df11::server::NodeCollector>(**node)});
    if (!started.ok()) return Fail(absl::StrCat(started.status().message(), " (listen.http)"));
    http = *std::move(started);
    http_port = http->port();
  }
  Log(absl::StrCat("df11d ", DF11_VERSION, " serving gRPC on port ", grpc_port,
                   http_port > 0 ? absl::StrCat(", /metrics on port ", http_port) : "",
                   "; device ", config->devices[0].Name()));
  if (port_file) {
    const nlohmann::json ports = {{"grpc", grpc_port}, {"http", http_port}};
    if (!WriteFileAtomically(*port_file, ports.dump() + "\n")) {
      return Fail(absl::StrCat("cannot write --port-file ", *port_file));
    }
  }

  (*node)->StartPreload();
  // Turning ready and starting to drain exclude each other: a SIGTERM that arrives as the last
  // preload ends must not be followed by SERVING.
  absl::Mutex readiness;
  std::thread ready([&] {
    while (!(*node)->preload_done() && !(*node)->shutting_down()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    absl::MutexLock lock(&readiness);
    if (!(*node)->shutting_down()) {
      for (const char* service : kReadinessServices) health->SetServingStatus(service, true);
      Log("ready: every preloaded model has finished loading");
    }
  });

  int signal = 0;
  sigwait(&signals, &signal);
  Log(absl::StrCat("received ", strsignal(signal), "; draining for up to ", config->drain_seconds,
                   " s"));
  {
    absl::MutexLock lock(&readiness);
    (*node)->BeginShutdown();
    for (const char* service : kReadinessServices) health->SetServingStatus(service, false);
  }
  ready.join();
  const auto deadline =
      std::chrono::system_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(config->drain_seconds * 1000));
  server->Shutdown(deadline);  // refuses new calls; cancels what is left at the deadline
  server->Wait();
  http.reset();
  node->reset();
  Log("stopped");
  return 0;
}
