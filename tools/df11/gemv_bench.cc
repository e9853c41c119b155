// df11 gemv-bench: the fused decode + matrix product over codec::TiledMatrix against cuBLAS on
// the same weights in BF16, and against decoding to BF16 then cuBLAS, on one layer's shapes.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "codec/base/status_macros.h"
#include "codec/synthetic.h"
#include "codec/thread_pool.h"
#include "codec/lane_unit.h"
#include "codec/tiled_matrix.h"
#include "nlohmann/json.hpp"
#include "tools/df11/cli.h"
#include "tools/df11/commands.h"
#ifdef DF11_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "codec/cuda/device_unit.h"
#include "codec/cuda/devices.h"
#include "codec/gpu_lane.h"
#include "codec/gpu_tiled.h"
#endif

namespace df11::tool {
namespace {

constexpr char kHelp[] =
    R"(Usage: df11 gemv-bench [--columns 1,2,4,8] [--only q,k,...] [--runs N] [--json]

Times Y = W X on the current CUDA device for the projections of one Qwen3-8B layer and its
output head, W of N(0, 0.02^2) BF16 weights, X of 1 to 8 columns (BF16), Y in fp32:
  cublas          cublasGemmEx on W in BF16 (the uncompressed baseline)
  fused           the fused decode + tensor-core product on W as a codec::TiledMatrix
                  (codec/gpu_tiled.h): no decoded weight reaches memory
  decode_cublas   the TiledMatrix decoded to BF16 in scratch, then cublasGemmEx
  lane            the fused decode + CUDA-core product on W as a codec::LaneUnit, the
                  lane-stream layout of decoder v3 (codec/gpu_lane.h, LaneGemv)
  lane_decode_cublas  the LaneUnit decoded to BF16 in scratch (DecodeLanes), then cublasGemmEx
Shapes (rows x columns of W): q 4096x4096, k and v 1024x4096, o 4096x4096, gate and up
12288x4096, down 4096x12288, lm_head 151936x4096; qkv 6144x4096 and gate_up 24576x4096 are the
products that share an input, done as one. Each method rotates over enough copies of W that they
exceed twice the L2 cache; each call is timed by CUDA events, the median of --runs (default 50)
after a warm-up. Reported per shape: microseconds, weight bytes read per second (BF16's 2 bytes
per weight for cublas, the TiledMatrix's bytes for fused) and the rate in BF16 bytes (2 bytes per
weight over the time, comparable across methods), the fused/cublas speed ratio, and the largest
difference between fused and cublas over the largest |Y|. Then the layer (q, k, v, o, gate, up,
down) summed, with the projections separate and with the shared-input ones fused, and the
device-to-device copy rate of the same run.

  --columns LIST   columns of X (1 to 8; default 1,2,4,8)
  --only LIST      only these shapes
)";

struct Shape {
  const char* name;
  int64_t rows, cols;
};
constexpr Shape kShapes[] = {{"q", 4096, 4096},     {"k", 1024, 4096},
                             {"v", 1024, 4096},     {"o", 4096, 4096},
                             {"gate", 12288, 4096}, {"up", 12288, 4096},
                             {"down", 4096, 12288}, {"lm_head", 151936, 4096},
                             {"qkv", 6144, 4096},   {"gate_up", 24576, 4096}};

#ifdef DF11_HAVE_CUDA

constexpr const char* kSeparate[] = {"q", "k", "v", "o", "gate", "up", "down"};
constexpr const char* kShared[] = {"qkv", "o", "gate_up", "down"};

struct Timing {
  int columns = 0;
  double cublas_us = 0, fused_us = 0, decode_cublas_us = 0, max_difference = 0;
  double lane_us = 0, lane_decode_cublas_us = 0, lane_max_difference = 0;
};

struct ShapeResult {
  Shape shape;
  int copies = 0;
  uint64_t tiled_bytes = 0, lane_bytes = 0;
  double bits_per_weight = 0, lane_bits_per_weight = 0;
  std::vector<Timing> timings;
};

absl::Status Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(e)));
}
absl::Status Check(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": cuBLAS status ", static_cast<int>(s)));
}

// Median microseconds of `runs` calls fn(i) (i = 0, 1, ...: the copy to use is i % copies), each
// timed alone by events, after `warmup` calls.
template <typename Fn>
absl::StatusOr<double> MedianUs(int runs, int warmup, Fn&& fn) {
  for (int i = 0; i < warmup; ++i) DF11_RETURN_IF_ERROR(fn(i));
  cudaEvent_t start, stop;
  DF11_RETURN_IF_ERROR(Check(cudaEventCreate(&start), "cudaEventCreate"));
  DF11_RETURN_IF_ERROR(Check(cudaEventCreate(&stop), "cudaEventCreate"));
  std::vector<double> us;
  absl::Status status;
  for (int i = 0; i < runs && status.ok(); ++i) {
    cudaEventRecord(start);
    status = fn(warmup + i);
    cudaEventRecord(stop);
    if (status.ok()) status = Check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    us.push_back(1000.0 * ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  DF11_RETURN_IF_ERROR(status);
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

absl::StatusOr<ShapeResult> BenchShape(const Shape& shape, const std::vector<int64_t>& columns,
                                       int runs, uint64_t l2_bytes, cublasHandle_t cublas,
                                       codec::ThreadPool& pool) {
  using namespace codec;
  ShapeResult r;
  r.shape = shape;
  const uint64_t n = uint64_t(shape.rows) * uint64_t(shape.cols);
  const std::vector<uint16_t> weights = NormalBf16(shape.rows * 31 + shape.cols, 0.02f, n);
  DF11_ASSIGN_OR_RETURN(TiledMatrix tiled,
                        TiledMatrix::Build(weights, shape.rows, shape.cols, &pool));
  r.tiled_bytes = tiled.stored_bytes();
  r.bits_per_weight = tiled.bits_per_weight();
  r.copies = static_cast<int>(std::max<uint64_t>(1, (2 * l2_bytes) / r.tiled_bytes + 1));
  DF11_ASSIGN_OR_RETURN(LaneUnit lane, LaneUnit::Build(weights, &pool));
  r.lane_bytes = lane.stored_bytes();
  r.lane_bits_per_weight = lane.bits_per_weight();
  std::vector<gpu::DeviceBuffer> bf16;
  std::vector<gpu::DeviceTiledMatrix> resident;
  std::vector<gpu::DeviceLaneUnit> lanes;
  for (int c = 0; c < r.copies; ++c) {
    DF11_ASSIGN_OR_RETURN(gpu::DeviceLaneUnit l, gpu::DeviceLaneUnit::Upload(lane));
    lanes.push_back(std::move(l));
    DF11_ASSIGN_OR_RETURN(gpu::DeviceBuffer b, gpu::DeviceBuffer::Allocate(2 * n));
    DF11_RETURN_IF_ERROR(b.CopyFromHost(weights.data(), 2 * n));
    bf16.push_back(std::move(b));
    DF11_ASSIGN_OR_RETURN(gpu::DeviceTiledMatrix d, gpu::DeviceTiledMatrix::Upload(tiled));
    resident.push_back(std::move(d));
  }
  DF11_ASSIGN_OR_RETURN(gpu::DeviceBuffer scratch, gpu::DeviceBuffer::Allocate(2 * n));
  const std::vector<uint16_t> x_host = NormalBf16(7, 1.0f, 8 * shape.cols);
  DF11_ASSIGN_OR_RETURN(gpu::DeviceBuffer x, gpu::DeviceBuffer::Allocate(2 * 8 * shape.cols));
  DF11_RETURN_IF_ERROR(x.CopyFromHost(x_host.data(), 2 * x_host.size()));
  DF11_ASSIGN_OR_RETURN(gpu::DeviceBuffer y, gpu::DeviceBuffer::Allocate(4 * 8 * shape.rows));
  DF11_ASSIGN_OR_RETURN(gpu::DeviceBuffer y_cublas,
                        gpu::DeviceBuffer::Allocate(4 * 8 * shape.rows));
  DF11_ASSIGN_OR_RETURN(gpu::DeviceBuffer workspace,
                        gpu::DeviceBuffer::Allocate(gpu::TiledWorkspaceBytes(1)));
  auto lane_product = [&](int i) {
    return gpu::LaneProduct{.unit = lanes[i % r.copies].view(nullptr),
                            .first_element = 0,
                            .rows = static_cast<uint32_t>(shape.rows),
                            .cols = static_cast<uint32_t>(shape.cols),
                            .bias = nullptr,
                            .y = y.data()};
  };
  const gpu::LaneProduct sizing = lane_product(0);
  DF11_ASSIGN_OR_RETURN(
      gpu::DeviceBuffer lane_workspace,
      gpu::DeviceBuffer::Allocate(std::max(gpu::LaneGemvWorkspaceBytes(std::span(&sizing, 1), 8),
                                           gpu::LaneWorkspaceBytes())));

  for (int64_t cols64 : columns) {
    const int cols = static_cast<int>(cols64);
    Timing t{.columns = cols};
    const float alpha = 1, beta = 0;
    auto gemm = [&](const void* w, void* out) {
      return Check(cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, int(shape.rows), cols,
                                int(shape.cols), &alpha, w, CUDA_R_16BF, int(shape.cols), x.data(),
                                CUDA_R_16BF, int(shape.cols), &beta, out, CUDA_R_32F,
                                int(shape.rows), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmEx");
    };
    auto fused = [&](int i) {
      const gpu::TiledGemvView v{resident[i % r.copies].view(), x.data(), y.data(),
                                 static_cast<uint64_t>(shape.cols),
                                 static_cast<uint64_t>(shape.rows)};
      return gpu::TiledGemv(std::span(&v, 1), cols, gpu::TiledType::kBf16, gpu::TiledType::kF32,
                            workspace.data(), workspace.size(), nullptr);
    };
    auto decode_cublas = [&](int i) -> absl::Status {
      const gpu::TiledDecodeView v{resident[i % r.copies].view(),
                                   static_cast<uint16_t*>(scratch.data()),
                                   static_cast<uint64_t>(shape.cols)};
      DF11_RETURN_IF_ERROR(
          gpu::DecodeTiled(std::span(&v, 1), workspace.data(), workspace.size(), nullptr));
      return gemm(scratch.data(), y.data());
    };
    auto lane_fused = [&](int i) {
      const gpu::LaneProduct p = lane_product(i);
      return gpu::LaneGemv(std::span(&p, 1), static_cast<const uint16_t*>(x.data()), cols, true,
                           lane_workspace.data(), lane_workspace.size(), nullptr);
    };
    auto lane_decode_cublas = [&](int i) -> absl::Status {
      const gpu::LaneView v = lanes[i % r.copies].view(static_cast<uint16_t*>(scratch.data()));
      DF11_RETURN_IF_ERROR(gpu::DecodeLanes(std::span(&v, 1), lane_workspace.data(),
                                            lane_workspace.size(), nullptr));
      return gemm(scratch.data(), y.data());
    };
    const int warmup = r.copies + 2;
    DF11_ASSIGN_OR_RETURN(t.cublas_us, MedianUs(runs, warmup, [&](int i) {
                            return gemm(bf16[i % r.copies].data(), y_cublas.data());
                          }));
    DF11_ASSIGN_OR_RETURN(t.decode_cublas_us, MedianUs(runs, warmup, decode_cublas));
    DF11_ASSIGN_OR_RETURN(t.fused_us, MedianUs(runs, warmup, fused));
    DF11_RETURN_IF_ERROR(gpu::CheckDecoded(workspace.data(), nullptr));
    // The fused result against cuBLAS's: the largest difference, relative to the largest |y|.
    std::vector<float> b(cols * shape.rows);
    DF11_RETURN_IF_ERROR(y_cublas.CopyToHost(b.data(), 4 * b.size()));
    auto difference_from_cublas = [&]() -> absl::StatusOr<double> {
      std::vector<float> a(b.size());
      DF11_RETURN_IF_ERROR(y.CopyToHost(a.data(), 4 * a.size()));
      double largest = 0, difference = 0;
      for (size_t k = 0; k < a.size(); ++k) {
        largest = std::max(largest, double(std::abs(b[k])));
        difference = std::max(difference, double(std::abs(a[k] - b[k])));
      }
      return largest > 0 ? difference / largest : difference;
    };
    DF11_ASSIGN_OR_RETURN(t.max_difference, difference_from_cublas());
    // The lane layout's product and decode, the same way.
    DF11_ASSIGN_OR_RETURN(t.lane_decode_cublas_us, MedianUs(runs, warmup, lane_decode_cublas));
    DF11_ASSIGN_OR_RETURN(t.lane_us, MedianUs(runs, warmup, lane_fused));
    DF11_RETURN_IF_ERROR(gpu::CheckDecoded(lane_workspace.data(), nullptr));
    DF11_ASSIGN_OR_RETURN(t.lane_max_difference, difference_from_cublas());
    if (t.lane_max_difference > 1e-3) {
      return absl::InternalError(absl::StrCat("gemv-bench: the lane product and cuBLAS differ by ",
                                              t.lane_max_difference, " of the largest |Y| on ",
                                              shape.name));
    }
    if (t.max_difference > 1e-3) {
      return absl::InternalError(absl::StrCat("gemv-bench: fused and cuBLAS differ by ",
                                              t.max_difference, " of the largest |Y| on ",
                                              shape.name));
    }
    r.timings.push_back(t);
  }
  return r;
}

// Device-to-device copy of 512 MB: bytes of traffic (read and write) per second.
absl::StatusOr<double> CopyBytesPerSecond(int runs) {
  const uint64_t bytes = 512ull << 20;
  DF11_ASSIGN_OR_RETURN(codec::gpu::DeviceBuffer a, codec::gpu::DeviceBuffer::Allocate(bytes));
  DF11_ASSIGN_OR_RETURN(codec::gpu::DeviceBuffer b, codec::gpu::DeviceBuffer::Allocate(bytes));
  DF11_ASSIGN_OR_RETURN(double us, MedianUs(runs, 2, [&](int) {
                          return Check(
                              cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice),
                              "cudaMemcpyAsync");
                        }));
  return 2.0 * bytes / (us * 1e-6);
}

#endif  // DF11_HAVE_CUDA

}  // namespace

int RunGemvBench(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args = Args::Parse(argv, {"columns", "only", "runs"}, {"json", "help"});
  if (!args.ok()) return UsageError("gemv-bench", std::string(args.status().message()));
  if (args->Has("help")) return std::fputs(kHelp, stdout), kExitOk;
  absl::StatusOr<int64_t> runs = args->GetInt("runs", 50, 1, 100000);
  if (!runs.ok()) return UsageError("gemv-bench", std::string(runs.status().message()));
  absl::StatusOr<std::vector<int64_t>> columns =
      IntList(args->Get("columns").value_or("1,2,4,8"), 1, 8, "columns");
  if (!columns.ok()) return UsageError("gemv-bench", std::string(columns.status().message()));
  std::vector<Shape> shapes;
  const std::string only = args->Get("only").value_or("");
  const std::vector<std::string> wanted = absl::StrSplit(only, ',', absl::SkipEmpty());
  for (const Shape& s : kShapes) {
    if (wanted.empty() || std::find(wanted.begin(), wanted.end(), s.name) != wanted.end()) {
      shapes.push_back(s);
    }
  }
  if (shapes.empty()) return UsageError("gemv-bench", "--only names none of the shapes");
#ifdef DF11_HAVE_CUDA
  absl::StatusOr<std::vector<cuda::DeviceInfo>> devices = cuda::ListDevices();
  if (!devices.ok()) return Fail("gemv-bench", devices.status());
  if (devices->empty()) return Fail("gemv-bench", absl::UnavailableError("no CUDA device"));
  int l2 = 0;
  cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0);
  cublasHandle_t cublas;
  if (cublasCreate(&cublas) != CUBLAS_STATUS_SUCCESS) {
    return Fail("gemv-bench", absl::InternalError("cublasCreate failed"));
  }
  codec::ThreadPool pool(0);
  std::vector<ShapeResult> results;
  absl::Status status;
  for (const Shape& s : shapes) {
    if (!args->Has("json")) std::fprintf(stderr, "gemv-bench: %s...\n", s.name);
    absl::StatusOr<ShapeResult> r =
        BenchShape(s, *columns, static_cast<int>(*runs), uint64_t(l2), cublas, pool);
    if (!r.ok()) {
      status = r.status();
      break;
    }
    results.push_back(std::move(*r));
  }
  absl::StatusOr<double> copy =
      status.ok() ? CopyBytesPerSecond(static_cast<int>(*runs)) : absl::StatusOr<double>(status);
  cublasDestroy(cublas);
  if (!copy.ok()) return Fail("gemv-bench", copy.status());

  // Per column count: the layer summed, with separate and with shared-input products.
  auto layer = [&](const auto& names, size_t k, double Timing::*field) {
    double sum = 0;
    for (const char* name : names) {
      const auto it = std::find_if(results.begin(), results.end(), [&](const ShapeResult& r) {
        return r.shape.name == std::string(name);
      });
      if (it == results.end()) return 0.0;
      sum += it->timings[k].*field;
    }
    return sum;
  };
  nlohmann::ordered_json j;
  j["gpu"] = devices->front().name;
  j["cuda_runtime"] = cuda::RuntimeVersion();
  j["copy_traffic_bytes_per_s"] = *copy;
  for (const ShapeResult& r : results) {
    const double weights = double(r.shape.rows) * r.shape.cols;
    nlohmann::ordered_json s{
        {"shape", r.shape.name},        {"rows", r.shape.rows},
        {"cols", r.shape.cols},         {"copies", r.copies},
        {"tiled_bytes", r.tiled_bytes}, {"bits_per_weight", r.bits_per_weight},
        {"lane_bytes", r.lane_bytes},   {"lane_bits_per_weight", r.lane_bits_per_weight}};
    for (const Timing& t : r.timings) {
      s["columns"].push_back({{"columns", t.columns},
                              {"cublas_us", t.cublas_us},
                              {"fused_us", t.fused_us},
                              {"decode_cublas_us", t.decode_cublas_us},
                              {"fused_vs_cublas", t.cublas_us / t.fused_us},
                              {"cublas_bytes_per_s", 2 * weights / (t.cublas_us * 1e-6)},
                              {"fused_bytes_per_s", r.tiled_bytes / (t.fused_us * 1e-6)},
                              {"fused_bf16_bytes_per_s", 2 * weights / (t.fused_us * 1e-6)},
                              {"max_difference", t.max_difference},
                              {"lane_us", t.lane_us},
                              {"lane_decode_cublas_us", t.lane_decode_cublas_us},
                              {"lane_vs_cublas", t.cublas_us / t.lane_us},
                              {"lane_bytes_per_s", r.lane_bytes / (t.lane_us * 1e-6)},
                              {"lane_max_difference", t.lane_max_difference}});
    }
    j["shapes"].push_back(s);
  }
  for (size_t k = 0; k < columns->size(); ++k) {
    const double separate_cublas = layer(kSeparate, k, &Timing::cublas_us);
    const double separate_fused = layer(kSeparate, k, &Timing::fused_us);
    const double shared_cublas = layer(kShared, k, &Timing::cublas_us);
    const double shared_fused = layer(kShared, k, &Timing::fused_us);
    const double separate_lane = layer(kSeparate, k, &Timing::lane_us);
    if (separate_cublas == 0 && shared_cublas == 0) continue;
    nlohmann::ordered_json l{{"columns", (*columns)[k]}};
    if (separate_cublas > 0) {
      l["separate_cublas_us"] = separate_cublas;
      l["separate_fused_us"] = separate_fused;
      l["separate_fused_vs_cublas"] = separate_cublas / separate_fused;
      l["separate_lane_us"] = separate_lane;
      l["separate_lane_vs_cublas"] = separate_cublas / separate_lane;
    }
    if (shared_cublas > 0) {
      l["shared_input_cublas_us"] = shared_cublas;
      l["shared_input_fused_us"] = shared_fused;
      l["shared_input_fused_vs_cublas"] = shared_cublas / shared_fused;
    }
    if (separate_cublas > 0 && shared_fused > 0) {
      l["shared_input_fused_vs_separate_cublas"] = separate_cublas / shared_fused;
    }
    j["layer"].push_back(l);
  }
  if (args->Has("json")) {
    std::printf("%s\n", j.dump().c_str());
    return kExitOk;
  }
  std::printf("%s, CUDA runtime %s; device-to-device copy %.0f GB/s of traffic\n",
              devices->front().name.c_str(), cuda::RuntimeVersion().c_str(), *copy / 1e9);
  std::printf("%-8s %6s %6s %4s %10s %10s %10s %8s %10s %10s %8s\n", "shape", "rows", "cols",
              "X", "cublas us", "tiled us", "dec+cub us", "tiled/cb", "lane us", "ldec+cb us",
              "lane/cb");
  for (const ShapeResult& r : results) {
    for (const Timing& t : r.timings) {
      std::printf("%-8s %6lld %6lld %4d %10.1f %10.1f %10.1f %8.3f %10.1f %10.1f %8.3f\n",
                  r.shape.name, static_cast<long long>(r.shape.rows),
                  static_cast<long long>(r.shape.cols), t.columns, t.cublas_us, t.fused_us,
                  t.decode_cublas_us, t.cublas_us / t.fused_us, t.lane_us,
                  t.lane_decode_cublas_us, t.cublas_us / t.lane_us);
    }
  }
  for (const auto& l : j["layer"]) std::printf("layer: %s\n", l.dump().c_str());
  return kExitOk;
#else
  return Fail("gemv-bench", absl::UnavailableError("df11 was built without CUDA"));
#endif
}

}  // namespace df11::tool
