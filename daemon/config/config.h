// The daemon's configuration: configs/default.yaml (embedded in the binary) or a file given with
// --config, read with yaml-cpp. Every field has a default and is validated; an error names the
// field (its YAML path) and what was wrong. Unknown fields are errors too, so a typo never passes
// silently.
//
//   DF11_ASSIGN_OR_RETURN(Config config, LoadConfigFile("/etc/df11d/config.yaml"));
//   std::cout << ConfigToYaml(config);   // df11d --print-config
#ifndef DF11_DAEMON_CONFIG_CONFIG_H_
#define DF11_DAEMON_CONFIG_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace df11::config {

// A device the daemon places models on: the CPU, or CUDA device `index`.
struct Device {
  bool cpu = true;
  int index = 0;
  std::string Name() const;  // "cpu" or "cuda:N"
};

// A memory budget: a byte count, or a fraction of the device's memory (of the budget, for
// memory.kv_cache).
struct Budget {
  uint64_t bytes = 0;  // when fraction is unset
  std::optional<double> fraction;
  // The budget on a device of `total` bytes.
  uint64_t Resolve(uint64_t total) const;
  std::string ToString() const;
};

enum class Eviction { kNone, kLru };

// A model to load at start (preload) or on a request's demand (catalog).
struct ModelSpec {
  // A directory or a hub id org/name[@rev]. A relative path naming a directory next to the config
  // file is made absolute; otherwise it stays as written (a hub id, or relative to the working
  // directory).
  std::string source;
  std::string name;  // empty: derived from the source
  bool pin = false;
  std::optional<double> keep_alive_seconds;  // unset: memory.keep_alive
  std::string device;                        // empty: the node's device
};
struct Config {
  // Where to listen. Port 0 picks a free port (see df11d --port-file).
  std::string grpc_listen = "127.0.0.1:7411";
  std::string http_listen = "127.0.0.1:7412";  // Prometheus /metrics; empty: off

  std::vector<Device> devices = {Device{}};
  int cpu_threads = 0;  // 0: one per CPU

  Budget budget{.bytes = 0, .fraction = 0.9};
  // GPUs: the KV pool shared by every model, a size or a share of the budget, in pages of
  // kv_page_bytes (one sequence's positions of every layer). The CPU allocates per request.
  Budget kv_cache{.bytes = 0, .fraction = 0.1};
  int64_t kv_page_bytes = 2 << 20;
  // GPUs: forward passes of at most this many tokens (decode steps of that many sequences)
  // multiply by the compressed projections without decoding them (runtime::CudaBackend::Options::
  // fused_max_rows, 0 to 8); 0 keeps every unit in DF11's layout, which loads faster.
  int64_t fused_max_rows = 8;
  // GPUs: how DF11 units are kept besides DF11's own layout (runtime::CudaBackend::GpuLayout):
  // "tiled" (the projections as tiled matrices for short passes) or "lane" (every unit in the
  // lane-stream layout of decoder v3, for every pass). One goes once a GPU has measured both.
  enum class GpuLayout { kTiled, kLane };
  GpuLayout gpu_layout = GpuLayout::kTiled;
  Eviction eviction = Eviction::kLru;
  double keep_alive_seconds = 300;  // a model idle this long may be evicted

  std::vector<ModelSpec> preload;

  // Models loaded on demand: a request (gRPC or HTTP) for one that is not resident loads it,
  // evicting by policy, and waits (at most limits.load_wait). catalog_file names a YAML file of
  // the same list (a `catalog:` key, or the list alone), re-read when it changes; its entries
  // override the config's of the same name. on_demand false turns loading on demand off.
  std::vector<ModelSpec> catalog;
  std::string catalog_file;
  bool on_demand = true;

  // Hugging Face hub.
  std::string hub_endpoint;  // empty: $HF_ENDPOINT, else https://huggingface.co
  std::string
      hub_cache_dir;  // empty: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub
  std::string hub_token_file;       // empty: $HF_TOKEN, else $HF_TOKEN_PATH, else $HF_HOME/token
  bool hub_offline = false;         // use the cache only (also when $HF_HUB_OFFLINE is true)
  int64_t hub_max_connections = 8;  // files downloaded at once per load
  int64_t hub_max_download_bytes = 2'000'000'000'000;  // what one load may download at most

  // Limits.
  int64_t max_prompt_tokens = 32768;
  int64_t max_tokens = 4096;          // per request, at most
  int64_t default_max_tokens = 256;   // when a request gives none
  int64_t queue_size = 256;           // requests waiting per model
  int64_t max_running_requests = 64;  // per model, batched together
  int64_t max_concurrent_loads = 2;
  int64_t max_request_bytes = 4 << 20;
  double load_wait_seconds = 600;  // how long a request waits for its model's on-demand load
  // The HTTP listener (daemon/server/http_listener.h).
  int64_t http_requests = 256;  // requests in handlers at once (a stream for its length); more: 503
  int64_t http_max_connections = 4096;            // open connections; more are closed at once
  int64_t http_max_connections_per_client = 256;  // open connections from one address
  double http_idle_timeout_seconds = 60;    // a keep-alive connection idle this long is closed
  double http_header_timeout_seconds = 10;  // a request's headers must arrive within this
  double http_body_timeout_seconds = 60;    // and its body within this after them
  // A stream whose client reads nothing for this long is cancelled (gRPC), or its connection
  // closed (HTTP), freeing its thread, slot and model lease.
  double stream_stall_seconds = 30;
  double drain_seconds = 30;  // SIGTERM: how long in-flight streams may finish

  // Peers: the blobs of the hub cache served to the cluster's other nodes (ShardService).
  int64_t peer_chunk_bytes = 1 << 20;  // bytes per ReadBlob message
  int64_t peer_max_readers = 4;        // ReadBlob streams served at once
  // And the other nodes asked for a hub model's files before the hub: a static list of HOST:PORT,
  // or the A/AAAA records of a DNS name (a headless Service) on peer_port; neither: none asked.
  std::vector<std::string> peer_addresses;
  std::string peer_dns;
  int64_t peer_port = 7411;
  double peer_refresh_seconds = 30;  // the names resolved again this often
  double peer_timeout_seconds = 5;   // a peer's answer; the window of peer_min_rate
  int64_t peer_min_rate = 16 << 20;  // bytes/s: a slower transfer goes to the next source
  // The credential presented to peers: a token (of role peer in their tokens file), and for TLS
  // the CA their certificates chain to and, for mutual TLS, this node's client certificate.
  std::string peer_token_file;
  std::string peer_ca_file, peer_cert_file, peer_key_file;
  bool peers_asked() const { return !peer_addresses.empty() || !peer_dns.empty(); }

  // Who may call: the tokens file (config/tokens.h), re-read when it changes; empty: everyone,
  // which is refused on a non-loopback listen address unless `insecure` says so.
  std::string auth_tokens_file;
  bool metrics_need_token = false;  // auth.metrics: token (else open, for Prometheus)
  bool user_loads_catalog_only = false;  // auth.user_loads: catalog (else any)
  // The longest keep_alive a user token (not admin) may give a load; pinning, loading for every
  // tenant and unloading a shared model are an admin's alone.
  double user_max_keep_alive_seconds = 3600;
  std::string audit_file;  // auth.audit_file: where the audit log goes; "": stderr
  bool insecure = false;

  // The directories a LoadModel or EstimateModel request may name a local source under (after
  // resolving symlinks and ".."), with every file below it; relative to the config file. The
  // configuration's own preload and catalog are the operator's, and not confined.
  std::vector<std::string> model_roots;

  // TLS on both listeners (tls.cert_file and tls.key_file, PEM), and mutual TLS with
  // tls.client_ca_file: clients must present a certificate that chains to it. Relative to the
  // config file; re-read when they change.
  std::string tls_cert_file, tls_key_file, tls_client_ca_file;
};

// Whether HOST:PORT listens on loopback only (127.0.0.0/8, ::1, localhost) or on a unix socket.
bool IsLoopbackAddress(const std::string& address);

// The model list of a catalog file: a YAML mapping with a `catalog:` list, or the list alone, of
// the catalog's shape. `base_dir` resolves relative directories. kNotFound when it cannot be
// read; kInvalidArgument naming the field otherwise.
absl::StatusOr<std::vector<ModelSpec>> LoadCatalogFile(const std::string& path);

// The embedded configs/default.yaml.
absl::string_view DefaultConfigYaml();

// Parses and validates YAML text. `base_dir` resolves relative preload directories.
// kInvalidArgument naming the field for anything malformed or out of range.
absl::StatusOr<Config> ParseConfig(absl::string_view yaml, const std::string& base_dir);
// Reads and parses a file; kNotFound if it cannot be read.
absl::StatusOr<Config> LoadConfigFile(const std::string& path);
// The effective configuration as YAML that ParseConfig reads back to the same Config.
std::string ConfigToYaml(const Config& config);

// "24GiB", "512MB", "1000": bytes; kInvalidArgument otherwise.
absl::StatusOr<uint64_t> ParseBytes(absl::string_view text);

}  // namespace df11::config

#endif  // DF11_DAEMON_CONFIG_CONFIG_H_
