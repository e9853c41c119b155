// df11 gpu-bench: the GPU decoder's speed on the current device, against a device-to-device copy
// of the same bytes in the same run.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "codec/base/status_macros.h"
#include "codec/encoder.h"
#include "codec/gpu_layout.h"
#include "codec/safetensors.h"
#include "codec/synthetic.h"
#include "codec/thread_pool.h"
#include "tools/df11/cli.h"
#include "tools/df11/commands.h"
#ifdef DF11_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "codec/cuda/device_unit.h"
#include "codec/cuda/devices.h"
#include "codec/gpu_decoder.h"
#endif

namespace df11::tool {
namespace {

constexpr char kHelp[] = R"(Usage: df11 gpu-bench [--sizes 1,16,200] [--runs N] [--json] [--save-units DIR]

Measures the GPU decoder on the current CUDA device. For each size (millions of weights per
unit), units of N(0, 0.02^2) BF16 weights are encoded, given their GPU layout and uploaded; enough
distinct units are decoded in one launch that the output exceeds 512 MB (well past L2). Timed with
CUDA events after 3 warm-up launches; the median of --runs (default 20) launches is reported as
GB/s of BF16 output, beside a device-to-device copy of the same bytes in the same run. Every
output is checked against the input once.

  --save-units DIR   also write the first unit of each size, in the official layout with its
                     expected BF16 values, for tools/bench_official_kernel.py
)";

#ifdef DF11_HAVE_CUDA

struct Result {
  int64_t weights_per_unit = 0;
  int units = 0;
  double decode_gbps = 0, decode_ms = 0, copy_gbps = 0, bits_per_weight = 0, layout_bits = 0;
};

absl::Status Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(e)));
}

// Median milliseconds of `runs` executions of `fn` on the default stream, after 3 warm-ups.
template <typename Fn>
absl::StatusOr<double> MedianMs(int runs, Fn&& fn) {
  for (int i = 0; i < 3; ++i) DF11_RETURN_IF_ERROR(fn());
  cudaEvent_t start, stop;
  DF11_RETURN_IF_ERROR(Check(cudaEventCreate(&start), "cudaEventCreate"));
  DF11_RETURN_IF_ERROR(Check(cudaEventCreate(&stop), "cudaEventCreate"));
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    cudaEventRecord(start);
    DF11_RETURN_IF_ERROR(fn());
    cudaEventRecord(stop);
    DF11_RETURN_IF_ERROR(Check(cudaEventSynchronize(stop), "cudaEventSynchronize"));
    float t = 0;
    cudaEventElapsedTime(&t, start, stop);
    ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

absl::Status SaveUnit(const codec::EncodedUnit& u, const std::vector<uint16_t>& expected,
                      const std::string& path) {
  codec::SafetensorsWriter w;
  auto bytes = [](const auto& v) { return std::as_bytes(std::span(v)); };
  const auto n = [](const auto& v) { return static_cast<int64_t>(v.size()); };
  DF11_RETURN_IF_ERROR(w.Add("unit.luts", codec::DType::kU8, {u.lut_rows, 256}, bytes(u.luts)));
  DF11_RETURN_IF_ERROR(w.Add("unit.encoded_exponent", codec::DType::kU8, {n(u.encoded_exponent)},
                             bytes(u.encoded_exponent)));
  DF11_RETURN_IF_ERROR(w.Add("unit.sign_mantissa", codec::DType::kU8, {n(u.sign_mantissa)},
                             bytes(u.sign_mantissa)));
  DF11_RETURN_IF_ERROR(w.Add("unit.output_positions", codec::DType::kU8, {n(u.output_positions)},
                             bytes(u.output_positions)));
  DF11_RETURN_IF_ERROR(w.Add("unit.gaps", codec::DType::kU8, {n(u.gaps)}, bytes(u.gaps)));
  DF11_RETURN_IF_ERROR(w.Add("unit.split_positions", codec::DType::kI64, {n(u.split_positions)},
                             bytes(u.split_positions)));
  DF11_RETURN_IF_ERROR(w.Add("expected", codec::DType::kBF16, {n(expected)}, bytes(expected)));
  return w.WriteFile(path);
}

absl::StatusOr<Result> BenchSize(int64_t millions, int runs, const std::string& save_dir,
                                 codec::ThreadPool& pool) {
  using namespace codec;
  Result r;
  r.weights_per_unit = millions * 1'000'000;
  const uint64_t unit_bytes = 2 * uint64_t(r.weights_per_unit);
  r.units = static_cast<int>(std::max<uint64_t>(1, (512ull << 20) / unit_bytes + 1));
  std::vector<std::vector<uint16_t>> inputs;
  std::vector<gpu::DeviceUnit> device_units;
  std::vector<gpu::UnitView> views;
  DF11_ASSIGN_OR_RETURN(gpu::DeviceBuffer out, gpu::DeviceBuffer::Allocate(unit_bytes * r.units));
  uint64_t stored = 0, extra = 0;
  for (int i = 0; i < r.units; ++i) {
    std::vector<uint16_t> input = NormalBf16(1000 * millions + i, 0.02f, r.weights_per_unit);
    const std::span<const uint16_t> part(input);
    DF11_ASSIGN_OR_RETURN(EncodedUnit encoded, EncodeUnit(std::span(&part, 1)));
    DF11_ASSIGN_OR_RETURN(Unit unit, Unit::Validate(encoded.tensors(), "bench"));
    DF11_ASSIGN_OR_RETURN(GpuLayout layout, BuildGpuLayout(unit, &pool));
    DF11_ASSIGN_OR_RETURN(gpu::DeviceUnit d, gpu::DeviceUnit::Upload(unit, layout));
    if (i == 0 && !save_dir.empty()) {
      DF11_RETURN_IF_ERROR(SaveUnit(encoded, input,
                                    absl::StrCat(save_dir, "/unit_", millions, "M.safetensors")));
    }
    stored += encoded.stored_bytes();
    extra += layout.extra_bytes();
    views.push_back(d.view(reinterpret_cast<uint16_t*>(static_cast<char*>(out.data()) +
                                                       unit_bytes * i)));
    device_units.push_back(std::move(d));
    if (i < 2) inputs.push_back(std::move(input));  // checked below
  }
  r.bits_per_weight = 8.0 * stored / (double(r.weights_per_unit) * r.units);
  r.layout_bits = 8.0 * extra / (double(r.weights_per_unit) * r.units);
  DF11_ASSIGN_OR_RETURN(gpu::DeviceBuffer workspace,
                        gpu::DeviceBuffer::Allocate(gpu::DecodeWorkspaceBytes(views.size())));
  // Correctness once: poisoned output, decode, compare the first units.
  DF11_RETURN_IF_ERROR(out.Fill(0xFF));
  DF11_RETURN_IF_ERROR(gpu::DecodeUnits(views, workspace.data(), workspace.size(), nullptr));
  DF11_RETURN_IF_ERROR(gpu::CheckDecoded(workspace.data(), nullptr));
  std::vector<uint16_t> host(r.weights_per_unit);
  for (size_t i = 0; i < inputs.size(); ++i) {
    DF11_RETURN_IF_ERROR(Check(cudaMemcpy(host.data(), static_cast<char*>(out.data()) + unit_bytes * i,
                                          unit_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy"));
    if (host != inputs[i]) return absl::InternalError("GPU output differs from the input");
  }
  DF11_ASSIGN_OR_RETURN(r.decode_ms, MedianMs(runs, [&] {
    return gpu::DecodeUnits(views, workspace.data(), workspace.size(), nullptr);
  }));
  DF11_ASSIGN_OR_RETURN(gpu::DeviceBuffer copy, gpu::DeviceBuffer::Allocate(unit_bytes * r.units));
  DF11_ASSIGN_OR_RETURN(const double copy_ms, MedianMs(runs, [&] {
    return Check(cudaMemcpyAsync(copy.data(), out.data(), unit_bytes * r.units,
                                 cudaMemcpyDeviceToDevice), "cudaMemcpyAsync");
  }));
  const double total = double(unit_bytes) * r.units;
  r.decode_gbps = total / (r.decode_ms * 1e-3) / 1e9;
  r.copy_gbps = total / (copy_ms * 1e-3) / 1e9;
  return r;
}

#endif  // DF11_HAVE_CUDA

}  // namespace

int RunGpuBench(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args = Args::Parse(argv, {"sizes", "runs", "save-units"}, {"json", "help"});
  if (!args.ok()) return UsageError("gpu-bench", std::string(args.status().message()));
  if (args->Has("help")) return std::fputs(kHelp, stdout), kExitOk;
#ifdef DF11_HAVE_CUDA
  absl::StatusOr<int64_t> runs = args->GetInt("runs", 20, 1, 10000);
  if (!runs.ok()) return UsageError("gpu-bench", std::string(runs.status().message()));
  std::vector<int64_t> sizes;
  for (absl::string_view s : absl::StrSplit(args->Get("sizes").value_or("1,16,200"), ',')) {
    int64_t m;
    if (!absl::SimpleAtoi(s, &m) || m < 1 || m > 2000) {
      return UsageError("gpu-bench", "--sizes takes millions of weights from 1 to 2000, comma-separated");
    }
    sizes.push_back(m);
  }
  const std::string save_dir = args->Get("save-units").value_or("");
  if (!save_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(save_dir, ec);
  }
  absl::StatusOr<std::vector<cuda::DeviceInfo>> devices = cuda::ListDevices();
  if (!devices.ok()) return Fail("gpu-bench", devices.status());
  if (devices->empty()) return Fail("gpu-bench", absl::UnavailableError("no CUDA device"));
  int driver = 0;
  cudaDriverGetVersion(&driver);
  codec::ThreadPool pool(0);
  std::vector<Result> results;
  for (int64_t m : sizes) {
    absl::StatusOr<Result> r = BenchSize(m, static_cast<int>(*runs), save_dir, pool);
    if (!r.ok()) return Fail("gpu-bench", r.status());
    results.push_back(*r);
  }
  const cuda::DeviceInfo& d = devices->front();
  if (args->Has("json")) {
    std::printf("{\"gpu\": \"%s\", \"cuda_runtime\": \"%s\", \"driver\": %d, \"results\": [", d.name.c_str(),
                cuda::RuntimeVersion().c_str(), driver);
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      std::printf("%s{\"weights_per_unit\": %lld, \"units_per_launch\": %d, \"decode_gbps\": %.1f, "
                  "\"decode_ms\": %.3f, \"copy_gbps\": %.1f, \"decode_vs_copy\": %.3f, "
                  "\"bits_per_weight\": %.4f, \"layout_extra_bits_per_weight\": %.4f}",
                  i ? ", " : "", static_cast<long long>(r.weights_per_unit), r.units, r.decode_gbps,
                  r.decode_ms, r.copy_gbps, r.decode_gbps / r.copy_gbps, r.bits_per_weight,
                  r.layout_bits);
    }
    std::printf("]}\n");
  } else {
    std::printf("%s, CUDA runtime %s, driver %d\n", d.name.c_str(), cuda::RuntimeVersion().c_str(),
                driver);
    for (const Result& r : results) {
      std::printf("%6lldM weights x %3d units: decode %8.1f GB/s (%.3f ms), copy %8.1f GB/s, "
                  "%.3f bits/weight + %.3f layout\n",
                  static_cast<long long>(r.weights_per_unit / 1000000), r.units, r.decode_gbps,
                  r.decode_ms, r.copy_gbps, r.bits_per_weight, r.layout_bits);
    }
  }
  return kExitOk;
#else
  return Fail("gpu-bench", absl::UnavailableError("df11 was built without CUDA"));
#endif
}

}  // namespace df11::tool
