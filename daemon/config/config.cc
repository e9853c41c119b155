#include "daemon/config/config.h"

#include <arpa/inet.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codec/base/duration.h"
#include "codec/base/read_file.h"
#include "codec/base/status_macros.h"

namespace df11::config {
namespace {

absl::Status FieldError(absl::string_view path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("config field ", path, ": ", what));
}

std::string Join(absl::string_view parent, absl::string_view key) {
  return parent.empty() ? std::string(key) : absl::StrCat(parent, ".", key);
}

// A YAML mapping read field by field: every key must be known, so a misspelt field is an error.
class Section {
 public:
  Section(const YAML::Node& node, std::string path) : node_(node), path_(std::move(path)) {}

  absl::Status CheckIsMap() const {
    if (node_.IsDefined() && !node_.IsNull() && !node_.IsMap()) {
      return FieldError(path_.empty() ? "(top level)" : path_, "must be a mapping");
    }
    return absl::OkStatus();
  }
  // The child `key` (undefined when absent), remembered as known.
  YAML::Node Get(const std::string& key) {
    known_.insert(key);
    if (!node_.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    return node_[key];
  }
  std::string PathOf(absl::string_view key) const { return Join(path_, key); }
  absl::Status CheckNoUnknownKeys() const {
    if (!node_.IsMap()) return absl::OkStatus();
    for (const auto& entry : node_) {
      const std::string key = entry.first.as<std::string>();
      if (known_.count(key) == 0) {
        return FieldError(PathOf(key),
                          absl::StrCat("unknown field (known: ", absl::StrJoin(known_, ", "), ")"));
      }
    }
    return absl::OkStatus();
  }

 private:
  YAML::Node node_;
  std::string path_;
  std::set<std::string> known_;
};

bool Present(const YAML::Node& n) { return n.IsDefined() && !n.IsNull(); }

absl::StatusOr<std::string> ReadString(const YAML::Node& n, absl::string_view path) {
  if (!n.IsScalar()) return FieldError(path, "must be a string");
  // No value here (a path, a name, an address) has a use for one, and YAML cannot write every one
  // back as it was read.
  for (char c : n.Scalar()) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return FieldError(path, "must not contain control characters");
    }
  }
  return n.Scalar();
}

absl::Status ReadString(Section& s, const std::string& key, std::string& out) {
  const YAML::Node n = s.Get(key);
  if (!Present(n)) return absl::OkStatus();
  DF11_ASSIGN_OR_RETURN(out, ReadString(n, s.PathOf(key)));
  return absl::OkStatus();
}

absl::Status ReadBool(Section& s, const std::string& key, bool& out) {
  const YAML::Node n = s.Get(key);
  if (!Present(n)) return absl::OkStatus();
  const std::string v = n.IsScalar() ? absl::AsciiStrToLower(n.Scalar()) : "";
  if (v == "true" || v == "yes" || v == "on") {
    out = true;
  } else if (v == "false" || v == "no" || v == "off") {
    out = false;
  } else {
    return FieldError(s.PathOf(key), "must be true or false");
  }
  return absl::OkStatus();
}

absl::Status ReadInt(Section& s, const std::string& key, int64_t min, int64_t max, int64_t& out) {
  const YAML::Node n = s.Get(key);
  if (!Present(n)) return absl::OkStatus();
  int64_t v;
  if (!n.IsScalar() || !absl::SimpleAtoi(n.Scalar(), &v)) {
    return FieldError(s.PathOf(key), "must be an integer");
  }
  if (v < min || v > max) {
    return FieldError(s.PathOf(key), absl::StrCat(v, " is outside [", min, ", ", max, "]"));
  }
  out = v;
  return absl::OkStatus();
}

absl::Status ReadBytes(Section& s, const std::string& key, uint64_t min, int64_t& out) {
  const YAML::Node n = s.Get(key);
  if (!Present(n)) return absl::OkStatus();
  if (!n.IsScalar()) return FieldError(s.PathOf(key), "must be a size such as 4MiB");
  absl::StatusOr<uint64_t> v = ParseBytes(n.Scalar());
  if (!v.ok()) return FieldError(s.PathOf(key), v.status().message());
  if (*v < min || *v > uint64_t{1} << 62) {
    return FieldError(s.PathOf(key), absl::StrCat(*v, " bytes is outside [", min, ", 2^62]"));
  }
  out = static_cast<int64_t>(*v);
  return absl::OkStatus();
}

absl::Status ReadDuration(Section& s, const std::string& key, double& out) {
  const YAML::Node n = s.Get(key);
  if (!Present(n)) return absl::OkStatus();
  if (!n.IsScalar()) return FieldError(s.PathOf(key), "must be a duration such as 30s");
  absl::StatusOr<double> v = base::ParseDuration(n.Scalar());
  if (!v.ok()) return FieldError(s.PathOf(key), v.status().message());
  out = *v;
  return absl::OkStatus();
}

// host:port with a port in [0, 65535]; IPv6 hosts in brackets.
absl::Status CheckAddress(absl::string_view address, absl::string_view path) {
  const size_t colon = address.rfind(':');
  int port;
  if (colon == absl::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return FieldError(path, absl::StrCat("\"", address, "\" is not HOST:PORT"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Device> ParseDevice(absl::string_view text, absl::string_view path) {
  const std::string t = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (t == "cpu") return Device{};
  absl::string_view index = t;
  if (absl::StartsWith(index, "cuda:")) index.remove_prefix(5);
  int i;
  if (!absl::SimpleAtoi(index, &i) || i < 0 || i > 1023) {
    return FieldError(path, absl::StrCat("\"", text, "\" is not cpu, a GPU index or cuda:N"));
  }
  return Device{.cpu = false, .index = i};
}

absl::StatusOr<Budget> ParseBudget(absl::string_view text, absl::string_view path) {
  const absl::string_view t = absl::StripAsciiWhitespace(text);
  if (absl::EndsWith(t, "%")) {
    double percent;
    if (!absl::SimpleAtod(t.substr(0, t.size() - 1), &percent) || !(percent > 0) || percent > 100) {
      return FieldError(path, absl::StrCat("\"", text, "\": a percentage must be in (0, 100]"));
    }
    return Budget{.bytes = 0, .fraction = percent / 100};
  }
  absl::StatusOr<uint64_t> bytes = ParseBytes(t);
  if (!bytes.ok()) return FieldError(path, bytes.status().message());
  if (*bytes == 0) return FieldError(path, "the budget must be more than 0 bytes");
  return Budget{.bytes = *bytes, .fraction = std::nullopt};
}

std::string FormatDuration(double seconds) {
  if (seconds == std::floor(seconds)) return absl::StrCat(static_cast<int64_t>(seconds), "s");
  return absl::StrCat(static_cast<int64_t>(std::llround(seconds * 1000)), "ms");
}

// A list of models (preload, catalog) at `path`: each a mapping with a source, and optionally a
// name (unique in the list), pin, keep_alive and device.
absl::StatusOr<std::vector<ModelSpec>> ParseModelList(const YAML::Node& list,
                                                      const std::string& path,
                                                      const std::string& base_dir) {
  if (!list.IsSequence()) return FieldError(path, "must be a list of models");
  std::vector<ModelSpec> out;
  std::set<std::string> names;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string item = absl::StrCat(path, "[", i, "]");
    Section m(list[i], item);
    if (!list[i].IsMap()) return FieldError(item, "must be a mapping with a source");
    ModelSpec model;
    DF11_RETURN_IF_ERROR(ReadString(m, "source", model.source));
    if (model.source.empty()) return FieldError(m.PathOf("source"), "is required");
    // A relative path that exists next to the config names a directory; otherwise the source
    // stays as written (a hub id such as org/name).
    if (!std::filesystem::path(model.source).is_absolute() && !base_dir.empty()) {
      const std::filesystem::path local = std::filesystem::path(base_dir) / model.source;
      if (std::filesystem::is_directory(local)) model.source = local.lexically_normal().string();
    }
    DF11_RETURN_IF_ERROR(ReadString(m, "name", model.name));
    if (!model.name.empty() && !names.insert(model.name).second) {
      return FieldError(m.PathOf("name"), absl::StrCat("\"", model.name, "\" is used twice"));
    }
    DF11_RETURN_IF_ERROR(ReadBool(m, "pin", model.pin));
    if (Present(m.Get("keep_alive"))) {
      double seconds = 0;
      DF11_RETURN_IF_ERROR(ReadDuration(m, "keep_alive", seconds));
      model.keep_alive_seconds = seconds;
    }
    if (Present(m.Get("device"))) {
      std::string text;
      DF11_RETURN_IF_ERROR(ReadString(m, "device", text));
      DF11_ASSIGN_OR_RETURN(const Device d, ParseDevice(text, m.PathOf("device")));
      model.device = d.Name();
    }
    DF11_RETURN_IF_ERROR(m.CheckNoUnknownKeys());
    out.push_back(std::move(model));
  }
  return out;
}

absl::Status ParseInto(const YAML::Node& root, const std::string& base_dir, Config& c) {
  Section top(root, "");
  DF11_RETURN_IF_ERROR(top.CheckIsMap());

  Section listen(top.Get("listen"), "listen");
  DF11_RETURN_IF_ERROR(listen.CheckIsMap());
  DF11_RETURN_IF_ERROR(ReadString(listen, "grpc", c.grpc_listen));
  DF11_RETURN_IF_ERROR(CheckAddress(c.grpc_listen, "listen.grpc"));
  DF11_RETURN_IF_ERROR(ReadString(listen, "http", c.http_listen));
  if (!c.http_listen.empty()) DF11_RETURN_IF_ERROR(CheckAddress(c.http_listen, "listen.http"));
  DF11_RETURN_IF_ERROR(listen.CheckNoUnknownKeys());

  if (const YAML::Node devices = top.Get("devices"); Present(devices)) {
    if (!devices.IsSequence() || devices.size() == 0) {
      return FieldError("devices", "must be a non-empty list such as [cpu] or [0, 1]");
    }
    c.devices.clear();
    std::set<std::string> seen;
    for (size_t i = 0; i < devices.size(); ++i) {
      const std::string path = absl::StrCat("devices[", i, "]");
      DF11_ASSIGN_OR_RETURN(const std::string text, ReadString(devices[i], path));
      DF11_ASSIGN_OR_RETURN(const Device d, ParseDevice(text, path));
      if (!seen.insert(d.Name()).second) return FieldError(path, d.Name() + " is listed twice");
      c.devices.push_back(d);
    }
  }
  int64_t threads = c.cpu_threads;
  DF11_RETURN_IF_ERROR(ReadInt(top, "cpu_threads", 0, 1024, threads));
  c.cpu_threads = static_cast<int>(threads);

  Section memory(top.Get("memory"), "memory");
  DF11_RETURN_IF_ERROR(memory.CheckIsMap());
  if (const YAML::Node b = memory.Get("budget"); Present(b)) {
    DF11_ASSIGN_OR_RETURN(const std::string text, ReadString(b, "memory.budget"));
    DF11_ASSIGN_OR_RETURN(c.budget, ParseBudget(text, "memory.budget"));
  }
  if (const YAML::Node kv = memory.Get("kv_cache"); Present(kv)) {
    DF11_ASSIGN_OR_RETURN(const std::string text, ReadString(kv, "memory.kv_cache"));
    DF11_ASSIGN_OR_RETURN(c.kv_cache, ParseBudget(text, "memory.kv_cache"));
  }
  DF11_RETURN_IF_ERROR(ReadBytes(memory, "kv_page", 4096, c.kv_page_bytes));
  DF11_RETURN_IF_ERROR(ReadInt(memory, "fused_max_rows", 0, 8, c.fused_max_rows));
  std::string layout = c.gpu_layout == Config::GpuLayout::kLane ? "lane" : "tiled";
  DF11_RETURN_IF_ERROR(ReadString(memory, "gpu_layout", layout));
  if (layout == "tiled") {
    c.gpu_layout = Config::GpuLayout::kTiled;
  } else if (layout == "lane") {
    c.gpu_layout = Config::GpuLayout::kLane;
  } else {
    return FieldError("memory.gpu_layout", absl::StrCat("\"", layout, "\" is not tiled or lane"));
  }
  std::string eviction = c.eviction == Eviction::kLru ? "lru" : "none";
  DF11_RETURN_IF_ERROR(ReadString(memory, "eviction", eviction));
  if (eviction == "lru") {
    c.eviction = Eviction::kLru;
  } else if (eviction == "none") {
    c.eviction = Eviction::kNone;
  } else {
    return FieldError("memory.eviction", absl::StrCat("\"", eviction, "\" is not none or lru"));
  }
  DF11_RETURN_IF_ERROR(ReadDuration(memory, "keep_alive", c.keep_alive_seconds));
  DF11_RETURN_IF_ERROR(memory.CheckNoUnknownKeys());

  if (const YAML::Node preload = top.Get("preload"); Present(preload)) {
    DF11_ASSIGN_OR_RETURN(c.preload, ParseModelList(preload, "preload", base_dir));
  }
  if (const YAML::Node catalog = top.Get("catalog"); Present(catalog)) {
    DF11_ASSIGN_OR_RETURN(c.catalog, ParseModelList(catalog, "catalog", base_dir));
  }
  DF11_RETURN_IF_ERROR(ReadString(top, "catalog_file", c.catalog_file));
  if (!c.catalog_file.empty() && !std::filesystem::path(c.catalog_file).is_absolute() &&
      !base_dir.empty()) {
    c.catalog_file = (std::filesystem::path(base_dir) / c.catalog_file).lexically_normal().string();
  }
  DF11_RETURN_IF_ERROR(ReadBool(top, "on_demand", c.on_demand));

  Section hub(top.Get("hub"), "hub");
  DF11_RETURN_IF_ERROR(hub.CheckIsMap());
  DF11_RETURN_IF_ERROR(ReadString(hub, "endpoint", c.hub_endpoint));
  if (!c.hub_endpoint.empty() && !absl::StartsWith(c.hub_endpoint, "https://") &&
      !absl::StartsWith(c.hub_endpoint, "http://")) {
    return FieldError("hub.endpoint",
                      absl::StrCat("\"", c.hub_endpoint, "\" is not an http(s) URL"));
  }
  DF11_RETURN_IF_ERROR(ReadString(hub, "cache_dir", c.hub_cache_dir));
  DF11_RETURN_IF_ERROR(ReadString(hub, "token_file", c.hub_token_file));
  DF11_RETURN_IF_ERROR(ReadBool(hub, "offline", c.hub_offline));
  DF11_RETURN_IF_ERROR(ReadInt(hub, "max_connections", 1, 64, c.hub_max_connections));
  DF11_RETURN_IF_ERROR(ReadBytes(hub, "max_download_size", 1, c.hub_max_download_bytes));
  DF11_RETURN_IF_ERROR(hub.CheckNoUnknownKeys());

  Section limits(top.Get("limits"), "limits");
  DF11_RETURN_IF_ERROR(limits.CheckIsMap());
  constexpr int64_t kMaxInt = int64_t{1} << 31;
  DF11_RETURN_IF_ERROR(ReadInt(limits, "max_prompt_tokens", 1, kMaxInt, c.max_prompt_tokens));
  DF11_RETURN_IF_ERROR(ReadInt(limits, "max_tokens", 1, kMaxInt, c.max_tokens));
  DF11_RETURN_IF_ERROR(ReadInt(limits, "default_max_tokens", 1, kMaxInt, c.default_max_tokens));
  if (c.default_max_tokens > c.max_tokens) {
    return FieldError(
        "limits.default_max_tokens",
        absl::StrCat(c.default_max_tokens, " is more than limits.max_tokens (", c.max_tokens, ")"));
  }
  DF11_RETURN_IF_ERROR(ReadInt(limits, "queue_size", 0, 1 << 20, c.queue_size));
  DF11_RETURN_IF_ERROR(ReadInt(limits, "max_running_requests", 1, 4096, c.max_running_requests));
  DF11_RETURN_IF_ERROR(ReadInt(limits, "max_concurrent_loads", 1, 64, c.max_concurrent_loads));
  DF11_RETURN_IF_ERROR(ReadBytes(limits, "max_request_bytes", 1024, c.max_request_bytes));
  DF11_RETURN_IF_ERROR(ReadDuration(limits, "load_wait", c.load_wait_seconds));
  DF11_RETURN_IF_ERROR(ReadInt(limits, "http_requests", 1, 65536, c.http_requests));
  DF11_RETURN_IF_ERROR(ReadInt(limits, "http_max_connections", 1, 1 << 20, c.http_max_connections));
  DF11_RETURN_IF_ERROR(ReadInt(limits, "http_max_connections_per_client", 1, 1 << 20,
                               c.http_max_connections_per_client));
  for (auto [key, seconds] : {std::pair{"http_idle_timeout", &c.http_idle_timeout_seconds},
                              std::pair{"http_header_timeout", &c.http_header_timeout_seconds},
                              std::pair{"http_body_timeout", &c.http_body_timeout_seconds}}) {
    DF11_RETURN_IF_ERROR(ReadDuration(limits, key, *seconds));
    if (*seconds <= 0) return FieldError(limits.PathOf(key), "must be longer than 0s");
  }
  DF11_RETURN_IF_ERROR(ReadDuration(limits, "stream_stall", c.stream_stall_seconds));
  if (c.stream_stall_seconds <= 0) {
    return FieldError(limits.PathOf("stream_stall"), "must be longer than 0s");
  }
  DF11_RETURN_IF_ERROR(limits.CheckNoUnknownKeys());

  Section peers(top.Get("peers"), "peers");
  DF11_RETURN_IF_ERROR(peers.CheckIsMap());
  DF11_RETURN_IF_ERROR(ReadBytes(peers, "chunk_size", 4096, c.peer_chunk_bytes));
  // Below gRPC's default 4 MiB receive limit, with room for the message around the bytes.
  if (c.peer_chunk_bytes > (3 << 20)) {
    return FieldError(peers.PathOf("chunk_size"), "must be at most 3MiB");
  }
  DF11_RETURN_IF_ERROR(ReadInt(peers, "max_readers", 1, 1024, c.peer_max_readers));
  if (const YAML::Node n = peers.Get("addresses"); Present(n)) {
    if (!n.IsSequence())
      return FieldError(peers.PathOf("addresses"), "must be a list of HOST:PORT");
    c.peer_addresses.clear();
    for (size_t i = 0; i < n.size(); ++i) {
      const std::string path = absl::StrCat(peers.PathOf("addresses"), "[", i, "]");
      DF11_ASSIGN_OR_RETURN(std::string address, ReadString(n[i], path));
      DF11_RETURN_IF_ERROR(CheckAddress(address, path));
      c.peer_addresses.push_back(std::move(address));
    }
  }
  DF11_RETURN_IF_ERROR(ReadString(peers, "dns", c.peer_dns));
  if (!c.peer_dns.empty() && !c.peer_addresses.empty()) {
    return FieldError("peers", "addresses and dns are two ways to name the peers: give one");
  }
  DF11_RETURN_IF_ERROR(ReadInt(peers, "port", 1, 65535, c.peer_port));
  DF11_RETURN_IF_ERROR(ReadDuration(peers, "refresh", c.peer_refresh_seconds));
  DF11_RETURN_IF_ERROR(ReadDuration(peers, "timeout", c.peer_timeout_seconds));
  if (c.peer_timeout_seconds <= 0) {
    return FieldError(peers.PathOf("timeout"), "must be longer than 0s");
  }
  DF11_RETURN_IF_ERROR(ReadBytes(peers, "min_rate", 0, c.peer_min_rate));
  for (auto [key, field] :
       {std::pair{"token_file", &c.peer_token_file}, std::pair{"ca_file", &c.peer_ca_file},
        std::pair{"cert_file", &c.peer_cert_file}, std::pair{"key_file", &c.peer_key_file}}) {
    DF11_RETURN_IF_ERROR(ReadString(peers, key, *field));
    if (!field->empty() && !std::filesystem::path(*field).is_absolute() && !base_dir.empty()) {
      *field = (std::filesystem::path(base_dir) / *field).lexically_normal().string();
    }
  }
  if (c.peer_cert_file.empty() != c.peer_key_file.empty()) {
    return FieldError("peers", "cert_file and key_file go together");
  }
  DF11_RETURN_IF_ERROR(peers.CheckNoUnknownKeys());

  Section shutdown(top.Get("shutdown"), "shutdown");
  DF11_RETURN_IF_ERROR(shutdown.CheckIsMap());
  DF11_RETURN_IF_ERROR(ReadDuration(shutdown, "drain", c.drain_seconds));
  DF11_RETURN_IF_ERROR(shutdown.CheckNoUnknownKeys());

  Section auth(top.Get("auth"), "auth");
  DF11_RETURN_IF_ERROR(auth.CheckIsMap());
  DF11_RETURN_IF_ERROR(ReadString(auth, "tokens_file", c.auth_tokens_file));
  if (!c.auth_tokens_file.empty() && !std::filesystem::path(c.auth_tokens_file).is_absolute() &&
      !base_dir.empty()) {
    c.auth_tokens_file =
        (std::filesystem::path(base_dir) / c.auth_tokens_file).lexically_normal().string();
  }
  std::string metrics = c.metrics_need_token ? "token" : "open";
  DF11_RETURN_IF_ERROR(ReadString(auth, "metrics", metrics));
  if (metrics != "open" && metrics != "token") {
    return FieldError("auth.metrics", absl::StrCat("\"", metrics, "\" is not open or token"));
  }
  c.metrics_need_token = metrics == "token";
  std::string user_loads = c.user_loads_catalog_only ? "catalog" : "any";
  DF11_RETURN_IF_ERROR(ReadString(auth, "user_loads", user_loads));
  if (user_loads != "any" && user_loads != "catalog") {
    return FieldError("auth.user_loads",
                      absl::StrCat("\"", user_loads, "\" is not any or catalog"));
  }
  c.user_loads_catalog_only = user_loads == "catalog";
  DF11_RETURN_IF_ERROR(ReadDuration(auth, "user_max_keep_alive", c.user_max_keep_alive_seconds));
  DF11_RETURN_IF_ERROR(ReadString(auth, "audit_file", c.audit_file));
  if (!c.audit_file.empty() && !std::filesystem::path(c.audit_file).is_absolute() &&
      !base_dir.empty()) {
    c.audit_file = (std::filesystem::path(base_dir) / c.audit_file).lexically_normal().string();
  }
  DF11_RETURN_IF_ERROR(auth.CheckNoUnknownKeys());
  // By default the models/ folder beside the configuration, where the demo model is.
  std::vector<std::string> roots = {"models"};
  if (const YAML::Node n = top.Get("model_roots"); Present(n)) {
    if (!n.IsSequence()) return FieldError("model_roots", "must be a list of directories");
    roots.clear();
    for (size_t i = 0; i < n.size(); ++i) {
      const std::string path = absl::StrCat("model_roots[", i, "]");
      DF11_ASSIGN_OR_RETURN(std::string dir, ReadString(n[i], path));
      if (dir.empty()) return FieldError(path, "must not be empty");
      roots.push_back(std::move(dir));
    }
  }
  c.model_roots.clear();
  for (const std::string& dir : roots) {
    c.model_roots.push_back(
        std::filesystem::path(dir).is_absolute() || base_dir.empty()
            ? dir
            : (std::filesystem::path(base_dir) / dir).lexically_normal().string());
  }
  DF11_RETURN_IF_ERROR(ReadBool(top, "insecure", c.insecure));

  Section tls(top.Get("tls"), "tls");
  DF11_RETURN_IF_ERROR(tls.CheckIsMap());
  for (auto [key, field] :
       {std::pair{"cert_file", &c.tls_cert_file}, std::pair{"key_file", &c.tls_key_file},
        std::pair{"client_ca_file", &c.tls_client_ca_file}}) {
    DF11_RETURN_IF_ERROR(ReadString(tls, key, *field));
    if (!field->empty() && !std::filesystem::path(*field).is_absolute() && !base_dir.empty()) {
      *field = (std::filesystem::path(base_dir) / *field).lexically_normal().string();
    }
  }
  DF11_RETURN_IF_ERROR(tls.CheckNoUnknownKeys());
  if (c.tls_cert_file.empty() != c.tls_key_file.empty()) {
    return FieldError("tls", "cert_file and key_file go together");
  }
  if (!c.tls_client_ca_file.empty() && c.tls_cert_file.empty()) {
    return FieldError("tls.client_ca_file", "needs tls.cert_file and tls.key_file");
  }

  return top.CheckNoUnknownKeys();
}

// "1.5 GiB" -> 1.5 and "GiB": a number, then a unit (possibly empty) after optional spaces.
bool SplitNumber(absl::string_view text, double& value, absl::string_view& unit) {
  const absl::string_view t = absl::StripAsciiWhitespace(text);
  size_t digits = 0;
  while (digits < t.size() && (absl::ascii_isdigit(t[digits]) || t[digits] == '.')) ++digits;
  unit = absl::StripAsciiWhitespace(t.substr(digits));
  return digits > 0 && absl::SimpleAtod(t.substr(0, digits), &value);
}

}  // namespace

std::string Device::Name() const { return cpu ? "cpu" : absl::StrCat("cuda:", index); }

uint64_t Budget::Resolve(uint64_t total) const {
  if (fraction) return static_cast<uint64_t>(static_cast<double>(total) * *fraction);
  return bytes;
}

std::string Budget::ToString() const {
  if (fraction) return absl::StrCat(*fraction * 100, "%");
  return absl::StrCat(bytes);
}

absl::StatusOr<uint64_t> ParseBytes(absl::string_view text) {
  double value;
  absl::string_view unit_text;
  if (!SplitNumber(text, value, unit_text)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is not a size such as 4GiB"));
  }
  const std::string unit = absl::AsciiStrToLower(unit_text);
  static const std::pair<const char*, double> kUnits[] = {{"", 1},
                                                          {"b", 1},
                                                          {"kb", 1e3},
                                                          {"mb", 1e6},
                                                          {"gb", 1e9},
                                                          {"tb", 1e12},
                                                          {"kib", 1024.0},
                                                          {"mib", 1048576.0},
                                                          {"gib", 1073741824.0},
                                                          {"tib", 1099511627776.0}};
  for (const auto& [name, scale] : kUnits) {
    if (unit == name) {
      const double bytes = value * scale;
      if (bytes >= 1.8e19)
        return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is too large"));
      return static_cast<uint64_t>(std::llround(bytes));
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("\"", text, "\": unknown unit \"", unit,
                                                 "\" (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"));
}

absl::StatusOr<Config> ParseConfig(absl::string_view yaml, const std::string& base_dir) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("config: ", e.what()));
  }
  Config config;
  try {
    DF11_RETURN_IF_ERROR(ParseInto(root, base_dir, config));
  } catch (const YAML::Exception& e) {  // a malformed node deep inside
    return absl::InvalidArgumentError(absl::StrCat("config: ", e.what()));
  }
  return config;
}

absl::StatusOr<std::vector<ModelSpec>> LoadCatalogFile(const std::string& path) {
  DF11_ASSIGN_OR_RETURN(const std::string text, base::ReadFile(path, base::kMaxSettingsFileBytes));
  const std::string base_dir = std::filesystem::absolute(path).parent_path().string();
  absl::StatusOr<std::vector<ModelSpec>> models;
  try {
    const YAML::Node root = YAML::Load(text);
    if (!root.IsDefined() || root.IsNull()) return std::vector<ModelSpec>{};
    if (root.IsMap()) {
      Section top(root, "");
      const YAML::Node list = top.Get("catalog");
      models = Present(list) ? ParseModelList(list, "catalog", base_dir)
                             : absl::StatusOr<std::vector<ModelSpec>>(std::vector<ModelSpec>{});
      if (models.ok()) {
        if (absl::Status s = top.CheckNoUnknownKeys(); !s.ok()) models = s;
      }
    } else {
      models = ParseModelList(root, "catalog", base_dir);
    }
  } catch (const YAML::Exception& e) {
    models = absl::InvalidArgumentError(absl::StrCat("not YAML: ", e.what()));
  }
  if (!models.ok()) {
    return absl::Status(models.status().code(),
                        absl::StrCat(path, ": ", models.status().message()));
  }
  return models;
}

bool IsLoopbackAddress(const std::string& address) {
  if (absl::StartsWith(address, "unix:")) return true;
  std::string host = address.substr(0, address.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  return host == "localhost" || host == "::1";
}

absl::StatusOr<Config> LoadConfigFile(const std::string& path) {
  DF11_ASSIGN_OR_RETURN(const std::string text, base::ReadFile(path, base::kMaxSettingsFileBytes));
  const std::filesystem::path dir = std::filesystem::absolute(path).parent_path();
  absl::StatusOr<Config> config = ParseConfig(text, dir.string());
  if (!config.ok()) {
    return absl::Status(config.status().code(),
                        absl::StrCat(path, ": ", config.status().message()));
  }
  return config;
}

namespace {

void EmitModelList(YAML::Emitter& out, const char* key, const std::vector<ModelSpec>& models) {
  out << YAML::Key << key << YAML::Value << YAML::BeginSeq;
  for (const ModelSpec& m : models) {
    out << YAML::BeginMap;
    out << YAML::Key << "source" << YAML::Value << m.source;
    if (!m.name.empty()) out << YAML::Key << "name" << YAML::Value << m.name;
    out << YAML::Key << "pin" << YAML::Value << m.pin;
    if (m.keep_alive_seconds) {
      out << YAML::Key << "keep_alive" << YAML::Value << FormatDuration(*m.keep_alive_seconds);
    }
    if (!m.device.empty()) out << YAML::Key << "device" << YAML::Value << m.device;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

}  // namespace

std::string ConfigToYaml(const Config& c) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "listen" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "grpc" << YAML::Value << c.grpc_listen;
  out << YAML::Key << "http" << YAML::Value << c.http_listen;
  out << YAML::EndMap;
  out << YAML::Key << "devices" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const Device& d : c.devices) out << d.Name();
  out << YAML::EndSeq;
  out << YAML::Key << "cpu_threads" << YAML::Value << c.cpu_threads;
  out << YAML::Key << "memory" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "budget" << YAML::Value << c.budget.ToString();
  out << YAML::Key << "kv_cache" << YAML::Value << c.kv_cache.ToString();
  out << YAML::Key << "kv_page" << YAML::Value << c.kv_page_bytes;
  out << YAML::Key << "fused_max_rows" << YAML::Value << c.fused_max_rows;
  out << YAML::Key << "gpu_layout" << YAML::Value
      << (c.gpu_layout == Config::GpuLayout::kLane ? "lane" : "tiled");
  out << YAML::Key << "eviction" << YAML::Value << (c.eviction == Eviction::kLru ? "lru" : "none");
  out << YAML::Key << "keep_alive" << YAML::Value << FormatDuration(c.keep_alive_seconds);
  out << YAML::EndMap;
  EmitModelList(out, "preload", c.preload);
  EmitModelList(out, "catalog", c.catalog);
  out << YAML::Key << "catalog_file" << YAML::Value << c.catalog_file;
  out << YAML::Key << "on_demand" << YAML::Value << c.on_demand;
  out << YAML::Key << "hub" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "endpoint" << YAML::Value << c.hub_endpoint;
  out << YAML::Key << "cache_dir" << YAML::Value << c.hub_cache_dir;
  out << YAML::Key << "token_file" << YAML::Value << c.hub_token_file;
  out << YAML::Key << "offline" << YAML::Value << c.hub_offline;
  out << YAML::Key << "max_connections" << YAML::Value << c.hub_max_connections;
  out << YAML::Key << "max_download_size" << YAML::Value << c.hub_max_download_bytes;
  out << YAML::EndMap;
  out << YAML::Key << "limits" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "max_prompt_tokens" << YAML::Value << c.max_prompt_tokens;
  out << YAML::Key << "max_tokens" << YAML::Value << c.max_tokens;
  out << YAML::Key << "default_max_tokens" << YAML::Value << c.default_max_tokens;
  out << YAML::Key << "queue_size" << YAML::Value << c.queue_size;
  out << YAML::Key << "max_running_requests" << YAML::Value << c.max_running_requests;
  out << YAML::Key << "max_concurrent_loads" << YAML::Value << c.max_concurrent_loads;
  out << YAML::Key << "max_request_bytes" << YAML::Value << c.max_request_bytes;
  out << YAML::Key << "load_wait" << YAML::Value << FormatDuration(c.load_wait_seconds);
  out << YAML::Key << "http_requests" << YAML::Value << c.http_requests;
  out << YAML::Key << "http_max_connections" << YAML::Value << c.http_max_connections;
  out << YAML::Key << "http_max_connections_per_client" << YAML::Value
      << c.http_max_connections_per_client;
  out << YAML::Key << "http_idle_timeout" << YAML::Value
      << FormatDuration(c.http_idle_timeout_seconds);
  out << YAML::Key << "http_header_timeout" << YAML::Value
      << FormatDuration(c.http_header_timeout_seconds);
  out << YAML::Key << "http_body_timeout" << YAML::Value
      << FormatDuration(c.http_body_timeout_seconds);
  out << YAML::Key << "stream_stall" << YAML::Value << FormatDuration(c.stream_stall_seconds);
  out << YAML::EndMap;
  out << YAML::Key << "peers" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "chunk_size" << YAML::Value << c.peer_chunk_bytes;
  out << YAML::Key << "max_readers" << YAML::Value << c.peer_max_readers;
  out << YAML::Key << "addresses" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const std::string& a : c.peer_addresses) out << a;
  out << YAML::EndSeq;
  out << YAML::Key << "dns" << YAML::Value << c.peer_dns;
  out << YAML::Key << "port" << YAML::Value << c.peer_port;
  out << YAML::Key << "refresh" << YAML::Value << FormatDuration(c.peer_refresh_seconds);
  out << YAML::Key << "timeout" << YAML::Value << FormatDuration(c.peer_timeout_seconds);
  out << YAML::Key << "min_rate" << YAML::Value << c.peer_min_rate;
  out << YAML::Key << "token_file" << YAML::Value << c.peer_token_file;
  out << YAML::Key << "ca_file" << YAML::Value << c.peer_ca_file;
  out << YAML::Key << "cert_file" << YAML::Value << c.peer_cert_file;
  out << YAML::Key << "key_file" << YAML::Value << c.peer_key_file;
  out << YAML::EndMap;
  out << YAML::Key << "shutdown" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "drain" << YAML::Value << FormatDuration(c.drain_seconds);
  out << YAML::EndMap;
  out << YAML::Key << "auth" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "tokens_file" << YAML::Value << c.auth_tokens_file;
  out << YAML::Key << "metrics" << YAML::Value << (c.metrics_need_token ? "token" : "open");
  out << YAML::Key << "user_loads" << YAML::Value
      << (c.user_loads_catalog_only ? "catalog" : "any");
  out << YAML::Key << "user_max_keep_alive" << YAML::Value
      << FormatDuration(c.user_max_keep_alive_seconds);
  out << YAML::Key << "audit_file" << YAML::Value << c.audit_file;
  out << YAML::EndMap;
  out << YAML::Key << "model_roots" << YAML::Value << YAML::BeginSeq;
  for (const std::string& r : c.model_roots) out << r;
  out << YAML::EndSeq;
  out << YAML::Key << "tls" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "cert_file" << YAML::Value << c.tls_cert_file;
  out << YAML::Key << "key_file" << YAML::Value << c.tls_key_file;
  out << YAML::Key << "client_ca_file" << YAML::Value << c.tls_client_ca_file;
  out << YAML::EndMap;
  out << YAML::Key << "insecure" << YAML::Value << c.insecure;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace df11::config
