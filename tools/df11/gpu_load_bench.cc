// df11 gpu-load-bench: the CUDA backend's placement as df11d does it: load-to-resident speed from
// the page cache against the host-to-device copy bandwidth measured in the same run, the decode of
// every layer into scratch, and how many copies of a model fit in the budget.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codec/base/status_macros.h"
#include "codec/thread_pool.h"
#include "daemon/config/config.h"
#include "daemon/runtime/engine/estimate.h"
#include "daemon/runtime/engine/model.h"
#include "nlohmann/json.hpp"
#include "tools/df11/cli.h"
#include "tools/df11/commands.h"
#ifdef DF11_HAVE_CUDA
#include "daemon/runtime/backends/cuda/device/cuda_device.h"
#include "daemon/runtime/backends/cuda/cuda_backend.h"
#endif

namespace df11::tool {
namespace {

constexpr char kHelp[] =
    R"(Usage: df11 gpu-load-bench MODEL_DIR [--bf16 DIR] [--device N] [--budget SIZE]
                           [--kv-cache SIZE] [--runs N] [--staging-buffers N]
                           [--staging-mib N] [--threads N] [--fused-max-rows N]
                           [--gpu-layout tiled|lane] [--no-density] [--json]

Measures the CUDA backend as df11d runs it, on CUDA device N (default 0):
  copy      host-to-device bandwidth from page-locked memory (1 GiB, median of --runs)
  load      MODEL_DIR opened and placed in the arena from the page cache (the files are read once
            first), median of --runs (default 5): files' bytes per second, and its ratio to the
            copy bandwidth (target: at least 0.8)
  decode    every layer decoded into scratch, then the output head: BF16 bytes written per second
  fill      the host's share of a load alone: the files' bytes copied from their mappings into
            the page-locked staging buffers by the placement's threads, with no device copy
  density   copies of MODEL_DIR (and of --bf16 DIR) placed until the budget is full (not with
            --no-density)
--staging-buffers, --staging-mib and --threads set the placement's staging (default 4 buffers of
32 MiB, threads for half the CPUs; --threads 0 is that default). --fused-max-rows is df11d's
memory.fused_max_rows (default 8: projections are decoded and re-encoded as tiled matrices on
the host at load; 0 keeps DF11's layout, the fastest load); --gpu-layout is df11d's
memory.gpu_layout (lane: every unit re-encoded in the lane-stream layout on the host at load).
--budget and --kv-cache take what df11d's memory.budget and memory.kv_cache take (default 90%
and 10%: a share of the device, then of the budget). Exit 1 when the device or a model fails.
)";

#ifdef DF11_HAVE_CUDA

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Reads every safetensors file of `dir` once, so that loads come from the page cache; their bytes.
uint64_t WarmFiles(const std::string& dir) {
  uint64_t bytes = 0;
  std::vector<char> buffer(16 << 20);
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".safetensors") continue;
    std::ifstream in(e.path(), std::ios::binary);
    while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || in.gcount() > 0) {
      bytes += static_cast<uint64_t>(in.gcount());
    }
  }
  return bytes;
}

absl::StatusOr<double> CopyBandwidth(runtime::GpuDevice& device, int runs) {
  constexpr uint64_t kBytes = uint64_t{1} << 30;
  DF11_ASSIGN_OR_RETURN(void* host, device.AllocateHost(kBytes));
  absl::StatusOr<void*> dev = device.Allocate(kBytes);
  absl::StatusOr<runtime::GpuDevice::Stream> stream = device.CreateStream();
  absl::StatusOr<double> result = absl::InternalError("no run");
  if (dev.ok() && stream.ok()) {
    std::memset(host, 1, kBytes);
    std::vector<double> seconds;
    for (int i = 0; i < runs + 1; ++i) {
      const Clock::time_point t0 = Clock::now();
      absl::Status s = device.CopyAsync(*dev, host, kBytes, *stream);
      if (s.ok()) s = device.StreamSynchronize(*stream);
      if (!s.ok()) {
        result = s;
        break;
      }
      if (i > 0) seconds.push_back(Seconds(t0, Clock::now()));  // the first warms up
    }
    if (!seconds.empty()) result = kBytes / Median(seconds);
  }
  if (stream.ok()) device.DestroyStream(*stream);
  if (dev.ok()) device.Free(*dev);
  device.FreeHost(host);
  if (!dev.ok()) return dev.status();
  if (!stream.ok()) return stream.status();
  return result;
}

// The host's share of a placement alone: every tensor the CUDA backend copies, from the files'
// mappings into `buffers` page-locked buffers of `staging_bytes` in turn, each filled by `pool`
// in 1 MiB pieces; median bytes per second of `runs` fresh opens of `dir`.
absl::StatusOr<double> HostFillBandwidth(runtime::GpuDevice& device, const std::string& dir,
                                         const runtime::CudaBackend::Options& options, int runs) {
  constexpr uint64_t kPiece = 1 << 20;
  const int count = options.staging_buffers;
  std::vector<void*> buffers;
  for (int i = 0; i < count; ++i) {
    absl::StatusOr<void*> b = device.AllocateHost(options.staging_bytes);
    if (!b.ok()) {
      for (void* p : buffers) device.FreeHost(p);
      return b.status();
    }
    buffers.push_back(*b);
  }
  codec::ThreadPool pool(runtime::CudaBackend::StagingThreads(options));
  std::vector<double> rates;
  absl::Status status;
  for (int run = 0; run < runs && status.ok(); ++run) {
    absl::StatusOr<std::unique_ptr<runtime::Model>> host =
        runtime::Model::Load(dir, {.interleave = false});
    if (!host.ok()) {
      status = host.status();
      break;
    }
    std::vector<std::span<const uint8_t>> spans;
    for (const auto* u : (*host)->units()) {
      const codec::UnitTensors& t = u->unit->tensors();
      const std::span<const uint32_t> positions = u->unit->positions();
      spans.insert(spans.end(),
                   {t.encoded_exponent,
                    t.sign_mantissa,
                    t.gaps,
                    t.luts,
                    {reinterpret_cast<const uint8_t*>(positions.data()), positions.size_bytes()}});
    }
    for (const auto& [name, bytes] : (*host)->plain_tensors()) {
      spans.push_back({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
    }
    uint64_t total = 0;
    int slot = 0;
    const Clock::time_point t0 = Clock::now();
    for (std::span<const uint8_t> span : spans) {
      for (uint64_t at = 0; at < span.size();) {
        const uint64_t n = std::min<uint64_t>(options.staging_bytes, span.size() - at);
        char* staging = static_cast<char*>(buffers[slot]);
        const uint8_t* from = span.data() + at;
        pool.ParallelFor((n + kPiece - 1) / kPiece, 1, [&](size_t begin, size_t end) {
          const uint64_t first = begin * kPiece, last = std::min(n, end * kPiece);
          std::memcpy(staging + first, from + first, last - first);
        });
        slot = (slot + 1) % count;
        at += n;
        total += n;
      }
    }
    rates.push_back(total / Seconds(t0, Clock::now()));
  }
  for (void* p : buffers) device.FreeHost(p);
  DF11_RETURN_IF_ERROR(status);
  return Median(rates);
}

absl::StatusOr<std::unique_ptr<runtime::PlacedModel>> Place(runtime::CudaBackend& backend,
                                                            const std::string& dir) {
  DF11_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Model> host,
                        runtime::Model::Load(dir, backend.HostLoadOptions()));
  return backend.Place(std::move(host), {});
}

// Copies of `dir` placed until the budget is full: how many, and what stopped them.
absl::StatusOr<int> Density(runtime::CudaBackend& backend, const std::string& dir,
                            std::string* stopped_by) {
  std::vector<std::unique_ptr<runtime::PlacedModel>> placed;
  while (true) {
    absl::StatusOr<std::unique_ptr<runtime::PlacedModel>> m = Place(backend, dir);
    if (!m.ok()) {
      if (!absl::IsResourceExhausted(m.status())) return m.status();
      *stopped_by = std::string(m.status().message());
      return static_cast<int>(placed.size());
    }
    placed.push_back(*std::move(m));
  }
}

absl::StatusOr<nlohmann::ordered_json> Run(const std::string& dir, const std::string& bf16,
                                           int device_index, const config::Budget& budget,
                                           const config::Budget& kv_cache, int runs,
                                           runtime::CudaBackend::Options options, bool density) {
  nlohmann::ordered_json out;
  DF11_ASSIGN_OR_RETURN(std::unique_ptr<runtime::GpuDevice> device,
                        runtime::cuda::OpenDevice(device_index));
  out["gpu"] = device->description();
  DF11_ASSIGN_OR_RETURN(const double copy, CopyBandwidth(*device, runs));
  out["copy_h2d_gbps"] = copy / 1e9;
  DF11_ASSIGN_OR_RETURN(const runtime::GpuDevice::MemoryInfo info, device->GetMemoryInfo());
  options.budget = budget.Resolve(info.total);
  options.kv_pool_bytes = kv_cache.Resolve(options.budget);
  out["budget_bytes"] = options.budget;
  out["kv_pool_bytes"] = options.kv_pool_bytes;
  out["fused_max_rows"] = options.fused_max_rows;
  out["gpu_layout"] = options.layout == runtime::CudaBackend::GpuLayout::kLane ? "lane" : "tiled";
  out["staging"] = {{"buffers", options.staging_buffers},
                    {"bytes", options.staging_bytes},
                    {"threads", runtime::CudaBackend::StagingThreads(options)}};
  const uint64_t file_bytes = WarmFiles(dir);
  DF11_ASSIGN_OR_RETURN(const double fill, HostFillBandwidth(*device, dir, options, runs));
  out["host_fill_gbps"] = fill / 1e9;
  DF11_ASSIGN_OR_RETURN(std::unique_ptr<runtime::CudaBackend> backend,
                        runtime::CudaBackend::Create(std::move(device), options));

  std::vector<double> load_seconds, open_seconds;
  std::unique_ptr<runtime::PlacedModel> model;
  for (int i = 0; i < runs; ++i) {
    model.reset();
    const Clock::time_point t0 = Clock::now();
    DF11_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Model> host,
                          runtime::Model::Load(dir, backend->HostLoadOptions()));
    const Clock::time_point t1 = Clock::now();
    DF11_ASSIGN_OR_RETURN(model, backend->Place(std::move(host), {}));
    load_seconds.push_back(Seconds(t0, Clock::now()));
    open_seconds.push_back(Seconds(t0, t1));
  }
  const double load = Median(load_seconds);
  out["model"] = {{"dir", dir},
                  {"file_bytes", file_bytes},
                  {"resident_bytes", model->resident_bytes()},
                  {"unit_bytes", model->unit_bytes()},
                  {"plain_bytes", model->plain_bytes()},
                  {"layers", model->config().num_layers}};
  out["load_seconds"] = load;
  out["open_seconds"] = Median(open_seconds);
  out["load_gbps"] = file_bytes / load / 1e9;
  out["load_vs_copy"] = file_bytes / load / copy;

  // Every layer into alternate buffers, then the head: BF16 bytes written over the time.
  const runtime::ModelConfig& c = model->config();
  uint64_t decoded = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    for (size_t k = 0; k < runtime::kLayerTensors; ++k) {
      const runtime::DeviceTensor t = backend->LayerTensor(*model, l, k);
      if (t.space == runtime::DeviceTensor::Space::kScratch) decoded += t.bytes;
    }
  }
  std::vector<double> decode_seconds;
  for (int i = 0; i < runs + 1; ++i) {
    const Clock::time_point t0 = Clock::now();
    for (int64_t l = 0; l < c.num_layers; ++l) {
      DF11_RETURN_IF_ERROR(backend->DecodeLayer(*model, l));
    }
    DF11_RETURN_IF_ERROR(backend->FinishDecodes());
    if (i > 0) decode_seconds.push_back(Seconds(t0, Clock::now()));
  }
  out["decode_layers_seconds"] = Median(decode_seconds);
  out["decode_layers_gbps"] = decoded / Median(decode_seconds) / 1e9;
  model.reset();
  if (!density) return out;

  std::string stopped;
  DF11_ASSIGN_OR_RETURN(const int copies, Density(*backend, dir, &stopped));
  out["density"] = {{"models", copies}, {"stopped_by", stopped}};
  if (!bf16.empty()) {
    DF11_ASSIGN_OR_RETURN(const int bf16_copies, Density(*backend, bf16, &stopped));
    out["density_bf16"] = {{"models", bf16_copies}, {"stopped_by", stopped}};
  }
  return out;
}

#endif  // DF11_HAVE_CUDA

}  // namespace

int RunGpuLoadBench(const std::vector<std::string>& argv) {
  constexpr char kName[] = "gpu-load-bench";
  absl::StatusOr<Args> args =
      Args::Parse(argv,
                  {"bf16", "device", "budget", "kv-cache", "runs", "staging-buffers", "staging-mib",
                   "threads", "fused-max-rows", "gpu-layout"},
                  {"json", "help", "no-density"});
  if (!args.ok()) return UsageError(kName, std::string(args.status().message()));
  if (args->Has("help")) return std::fputs(kHelp, stdout), kExitOk;
  if (args->positional().size() != 1) return UsageError(kName, "expected MODEL_DIR");
#ifdef DF11_HAVE_CUDA
  absl::StatusOr<int64_t> device = args->GetInt("device", 0, 0, 1023);
  absl::StatusOr<int64_t> runs = args->GetInt("runs", 5, 1, 1000);
  runtime::CudaBackend::Options options;
  absl::StatusOr<int64_t> buffers = args->GetInt("staging-buffers", options.staging_buffers, 2, 64);
  absl::StatusOr<int64_t> mib =
      args->GetInt("staging-mib", static_cast<int64_t>(options.staging_bytes >> 20), 1, 1024);
  absl::StatusOr<int64_t> threads = args->GetInt("threads", options.threads, 0, 1024);
  absl::StatusOr<int64_t> fused_max_rows =
      args->GetInt("fused-max-rows", options.fused_max_rows, 0, 8);
  for (const auto* v : {&device, &runs, &buffers, &mib, &threads, &fused_max_rows}) {
    if (!v->ok()) return UsageError(kName, std::string(v->status().message()));
  }
  options.staging_buffers = static_cast<int>(*buffers);
  options.staging_bytes = static_cast<uint64_t>(*mib) << 20;
  options.threads = static_cast<int>(*threads);
  options.fused_max_rows = *fused_max_rows;
  // The same spellings as df11d's configuration.
  absl::StatusOr<config::Config> sizes = config::ParseConfig(
      absl::StrCat("memory: {budget: \"", args->Get("budget").value_or("90%"), "\", kv_cache: \"",
                   args->Get("kv-cache").value_or("10%"), "\", gpu_layout: \"",
                   args->Get("gpu-layout").value_or("tiled"), "\"}\npreload: []\n"),
      "");
  if (!sizes.ok()) return UsageError(kName, std::string(sizes.status().message()));
  options.layout = sizes->gpu_layout == config::Config::GpuLayout::kLane
                       ? runtime::CudaBackend::GpuLayout::kLane
                       : runtime::CudaBackend::GpuLayout::kTiled;
  absl::StatusOr<nlohmann::ordered_json> result = Run(
      args->positional()[0], args->Get("bf16").value_or(""), static_cast<int>(*device),
      sizes->budget, sizes->kv_cache, static_cast<int>(*runs), options, !args->Has("no-density"));
  if (!result.ok()) return Fail(kName, result.status());
  const nlohmann::ordered_json& r = *result;
  if (args->Has("json")) {
    std::printf("%s\n", r.dump().c_str());
    return kExitOk;
  }
  std::printf("%s\n", r["gpu"].get<std::string>().c_str());
  std::printf("copy   host to device %.1f GB/s\n", r["copy_h2d_gbps"].get<double>());
  std::printf("load   %.2f GB of files in %.3f s (open %.3f s): %.1f GB/s, %.2f of the copy\n",
              r["model"]["file_bytes"].get<double>() / 1e9, r["load_seconds"].get<double>(),
              r["open_seconds"].get<double>(), r["load_gbps"].get<double>(),
              r["load_vs_copy"].get<double>());
  std::printf("decode %d layers in %.3f ms: %.1f GB/s of BF16\n", r["model"]["layers"].get<int>(),
              1e3 * r["decode_layers_seconds"].get<double>(),
              r["decode_layers_gbps"].get<double>());
  std::printf("fill   host share alone %.1f GB/s\n", r["host_fill_gbps"].get<double>());
  if (!r.contains("density")) return kExitOk;
  std::printf("density %d models of %.2f GB in a budget of %.1f GB\n",
              r["density"]["models"].get<int>(), r["model"]["resident_bytes"].get<double>() / 1e9,
              r["budget_bytes"].get<double>() / 1e9);
  if (r.contains("density_bf16")) {
    std::printf("density %d BF16 models\n", r["density_bf16"]["models"].get<int>());
  }
  return kExitOk;
#else
  return Fail(kName, absl::UnavailableError("df11 was built without CUDA"));
#endif
}

}  // namespace df11::tool
