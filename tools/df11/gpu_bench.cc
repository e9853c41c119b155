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
#include "codec/interleaved.h"
#include "codec/lane_unit.h"
#include "codec/safetensors.h"
#include "codec/synthetic.h"
#include "codec/thread_pool.h"
#include "nlohmann/json.hpp"
#include "tools/df11/cli.h"
#include "tools/df11/commands.h"
#ifdef DF11_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "codec/cuda/device_unit.h"
#include "codec/cuda/devices.h"
#include "codec/gpu_decoder.h"
#include "codec/gpu_interleaved.h"
#include "codec/gpu_lane.h"
#endif

namespace df11::tool {
namespace {

constexpr char kHelp[] =
    R"(Usage: df11 gpu-bench [--sizes 1,16,200] [--runs N] [--json] [--save-units DIR]
                      [--segment-elements 32768,8192] [--ctas-per-sm 4,6,8]

Measures the GPU decoders on the current CUDA device: the DF11 decoder (the official bitstream
with its GPU layout), the lane-stream decoder (the same weights re-encoded as codec::LaneUnit,
decoder v3) and the interleaved decoder (re-encoded as codec::InterleavedUnit, rows of 1000
weights). For each size (millions of weights per unit),
units of N(0, 0.02^2) BF16 weights are encoded, given both layouts and uploaded; enough distinct
units are decoded that the output exceeds 512 MB (well past L2), in one launch or, for small
units, in launches of at most 64 units. Timed with CUDA events after 3 warm-ups; the median of
--runs (default 20) timings is reported as GB/s of BF16 output, beside a device-to-device copy
of the same bytes in the same run, with each layout's stored bits per weight (sign and mantissa
included). Every decoder's output is checked against the input once.

  --segment-elements LIST  the interleaved layouts to build (elements per segment; default
                           32768, the CPU backend's)
  --ctas-per-sm LIST       the interleaved decoder's occupancies to time (4, 6 or 8; default 4)
  --save-units DIR         also write the first unit of each size, in the official layout with
                           its expected BF16 values, for tools/bench_official_kernel.py
)";

#ifdef DF11_HAVE_CUDA

// The interleaved decoder on one layout and occupancy.
struct InterleavedResult {
  int64_t segment_elements = 0;
  int ctas_per_sm = 0;
  double gbps = 0, ms = 0, bits_per_weight = 0;
};

struct Result {
  int64_t weights_per_unit = 0;
  int units = 0, launches = 0;
  double decode_gbps = 0, decode_ms = 0, copy_gbps = 0, bits_per_weight = 0, layout_bits = 0;
  std::vector<InterleavedResult> interleaved;
  // The lane-stream decoder (codec::LaneUnit, the resident layout of decoder v3).
  double lane_gbps = 0, lane_ms = 0, lane_bits_per_weight = 0;
};

// Rows of this many weights in the benchmark's units (segments of 32 rows).
constexpr int64_t kBenchRowLength = 1000;

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

// Launches `decode` over `views` in groups of at most kMaxUnitsPerLaunch, each group with its own
// workspace.
template <typename View, typename Decode>
absl::Status DecodeInGroups(const std::vector<View>& views,
                            const std::vector<codec::gpu::DeviceBuffer>& workspaces,
                            Decode&& decode) {
  for (size_t g = 0; g * codec::gpu::kMaxUnitsPerLaunch < views.size(); ++g) {
    const size_t first = g * codec::gpu::kMaxUnitsPerLaunch;
    const std::span<const View> group(
        views.data() + first, std::min(codec::gpu::kMaxUnitsPerLaunch, views.size() - first));
    DF11_RETURN_IF_ERROR(decode(group, workspaces[g]));
  }
  return absl::OkStatus();
}

absl::StatusOr<Result> BenchSize(int64_t millions, int runs, const std::string& save_dir,
                                 const std::vector<int64_t>& segment_elements,
                                 const std::vector<int64_t>& ctas_per_sm, codec::ThreadPool& pool) {
  using namespace codec;
  Result r;
  r.weights_per_unit = millions * 1'000'000;
  const uint64_t unit_bytes = 2 * uint64_t(r.weights_per_unit);
  r.units = static_cast<int>(std::max<uint64_t>(1, (512ull << 20) / unit_bytes + 1));
  const size_t layouts = segment_elements.size();
  std::vector<std::vector<uint16_t>> inputs;
  std::vector<gpu::DeviceUnit> device_units;
  std::vector<gpu::UnitView> views;
  std::vector<std::vector<gpu::DeviceInterleavedUnit>> interleaved_units(layouts);
  std::vector<std::vector<gpu::InterleavedView>> interleaved_views(layouts);
  std::vector<uint64_t> interleaved_stored(layouts, 0);
  std::vector<gpu::DeviceLaneUnit> lane_units;
  std::vector<gpu::LaneView> lane_views;
  uint64_t lane_stored = 0;
  DF11_ASSIGN_OR_RETURN(gpu::DeviceBuffer out, gpu::DeviceBuffer::Allocate(unit_bytes * r.units));
  uint16_t* const out_base = static_cast<uint16_t*>(out.data());
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
    views.push_back(d.view(out_base + r.weights_per_unit * i));
    device_units.push_back(std::move(d));
    // The interleaved layouts of the same unit: rows of kBenchRowLength, a shorter last row.
    std::vector<InterleavedUnit::Region> regions = {
        {.first = 0, .rows = r.weights_per_unit / kBenchRowLength, .row_length = kBenchRowLength}};
    if (r.weights_per_unit % kBenchRowLength != 0) {
      regions.push_back({.first = size_t(regions[0].rows * kBenchRowLength),
                         .rows = 1,
                         .row_length = r.weights_per_unit % kBenchRowLength});
    }
    const UnitDecoder decoder(unit);
    DF11_ASSIGN_OR_RETURN(LaneUnit lu, LaneUnit::FromDf11(decoder, &pool));
    DF11_ASSIGN_OR_RETURN(gpu::DeviceLaneUnit dl, gpu::DeviceLaneUnit::Upload(lu));
    lane_stored += lu.stored_bytes();
    lane_views.push_back(dl.view(out_base + r.weights_per_unit * i));
    lane_units.push_back(std::move(dl));
    for (size_t l = 0; l < layouts; ++l) {
      DF11_ASSIGN_OR_RETURN(InterleavedUnit il,
                            InterleavedUnit::Build(decoder, regions, &pool, segment_elements[l]));
      DF11_ASSIGN_OR_RETURN(gpu::DeviceInterleavedUnit di, gpu::DeviceInterleavedUnit::Upload(il));
      interleaved_stored[l] += il.stored_bytes() + il.sign_mantissa().size();
      interleaved_views[l].push_back(di.view(out_base + r.weights_per_unit * i));
      interleaved_units[l].push_back(std::move(di));
    }
    if (i < 2) inputs.push_back(std::move(input));  // checked below
  }
  const double weights = double(r.weights_per_unit) * r.units;
  r.bits_per_weight = 8.0 * stored / weights;
  r.layout_bits = 8.0 * extra / weights;

  r.launches =
      static_cast<int>((views.size() + gpu::kMaxUnitsPerLaunch - 1) / gpu::kMaxUnitsPerLaunch);
  std::vector<gpu::DeviceBuffer> workspaces;
  for (int g = 0; g < r.launches; ++g) {
    DF11_ASSIGN_OR_RETURN(gpu::DeviceBuffer w,
                          gpu::DeviceBuffer::Allocate(
                              std::max(gpu::DecodeWorkspaceBytes(gpu::kMaxUnitsPerLaunch),
                                       gpu::InterleavedWorkspaceBytes(gpu::kMaxUnitsPerLaunch))));
    workspaces.push_back(std::move(w));
  }
  auto decode_df11 = [&]() {
    return DecodeInGroups(views, workspaces, [](auto group, const gpu::DeviceBuffer& w) {
      return gpu::DecodeUnits(group, w.data(), w.size(), nullptr);
    });
  };
  auto decode_lanes = [&]() {
    return DecodeInGroups(lane_views, workspaces, [](auto group, const gpu::DeviceBuffer& w) {
      return gpu::DecodeLanes(group, w.data(), w.size(), nullptr);
    });
  };
  auto decode_interleaved = [&](size_t l, int ctas) {
    return [&, l, ctas]() {
      return DecodeInGroups(
          interleaved_views[l], workspaces, [ctas](auto group, const gpu::DeviceBuffer& w) {
            return gpu::DecodeInterleaved(group, w.data(), w.size(), nullptr, ctas);
          });
    };
  };
  // Correctness once per decoder and layout: poisoned output, decode, compare the first units.
  auto check_output = [&](const auto& decode, const std::string& name) -> absl::Status {
    DF11_RETURN_IF_ERROR(out.Fill(0xFF));
    DF11_RETURN_IF_ERROR(decode());
    for (const gpu::DeviceBuffer& w : workspaces) {
      DF11_RETURN_IF_ERROR(gpu::CheckDecoded(w.data(), nullptr));
    }
    std::vector<uint16_t> host(r.weights_per_unit);
    for (size_t i = 0; i < inputs.size(); ++i) {
      DF11_RETURN_IF_ERROR(Check(cudaMemcpy(host.data(), out_base + r.weights_per_unit * i,
                                            unit_bytes, cudaMemcpyDeviceToHost),
                                 "cudaMemcpy"));
      if (host != inputs[i]) {
        return absl::InternalError(absl::StrCat(name, ": GPU output differs from the input"));
      }
    }
    return absl::OkStatus();
  };
  DF11_RETURN_IF_ERROR(check_output(decode_df11, "DF11 decoder"));
  DF11_RETURN_IF_ERROR(check_output(decode_lanes, "lane-stream decoder"));
  for (size_t l = 0; l < layouts; ++l) {
    for (int64_t ctas : ctas_per_sm) {
      DF11_RETURN_IF_ERROR(
          check_output(decode_interleaved(l, static_cast<int>(ctas)),
                       absl::StrCat("interleaved decoder, segments of ", segment_elements[l], ", ",
                                    ctas, " CTAs per SM")));
    }
  }

  const double total = double(unit_bytes) * r.units;
  const auto gbps = [total](double ms) { return total / (ms * 1e-3) / 1e9; };
  DF11_ASSIGN_OR_RETURN(r.decode_ms, MedianMs(runs, decode_df11));
  r.decode_gbps = gbps(r.decode_ms);
  DF11_ASSIGN_OR_RETURN(r.lane_ms, MedianMs(runs, decode_lanes));
  r.lane_gbps = gbps(r.lane_ms);
  r.lane_bits_per_weight = 8.0 * lane_stored / weights;
  for (size_t l = 0; l < layouts; ++l) {
    for (int64_t ctas : ctas_per_sm) {
      InterleavedResult x;
      x.segment_elements = segment_elements[l];
      x.ctas_per_sm = static_cast<int>(ctas);
      DF11_ASSIGN_OR_RETURN(x.ms, MedianMs(runs, decode_interleaved(l, x.ctas_per_sm)));
      x.gbps = gbps(x.ms);
      x.bits_per_weight = 8.0 * interleaved_stored[l] / weights;
      r.interleaved.push_back(x);
    }
  }
  DF11_ASSIGN_OR_RETURN(gpu::DeviceBuffer copy, gpu::DeviceBuffer::Allocate(unit_bytes * r.units));
  DF11_ASSIGN_OR_RETURN(const double copy_ms, MedianMs(runs, [&] {
    return Check(cudaMemcpyAsync(copy.data(), out.data(), unit_bytes * r.units,
                                 cudaMemcpyDeviceToDevice), "cudaMemcpyAsync");
  }));
  r.copy_gbps = gbps(copy_ms);
  return r;
}


#endif  // DF11_HAVE_CUDA

}  // namespace

int RunGpuBench(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args = Args::Parse(
      argv, {"sizes", "runs", "save-units", "segment-elements", "ctas-per-sm"}, {"json", "help"});
  if (!args.ok()) return UsageError("gpu-bench", std::string(args.status().message()));
  if (args->Has("help")) return std::fputs(kHelp, stdout), kExitOk;
#ifdef DF11_HAVE_CUDA
  absl::StatusOr<int64_t> runs = args->GetInt("runs", 20, 1, 10000);
  if (!runs.ok()) return UsageError("gpu-bench", std::string(runs.status().message()));
  absl::StatusOr<std::vector<int64_t>> sizes =
      IntList(args->Get("sizes").value_or("1,16,200"), 1, 2000, "sizes");
  if (!sizes.ok()) return UsageError("gpu-bench", std::string(sizes.status().message()));
  absl::StatusOr<std::vector<int64_t>> segment_elements =
      IntList(args->Get("segment-elements").value_or("32768"), 64, 1 << 24, "segment-elements");
  if (!segment_elements.ok()) {
    return UsageError("gpu-bench", std::string(segment_elements.status().message()));
  }
  absl::StatusOr<std::vector<int64_t>> ctas = IntList(
      args->Get("ctas-per-sm").value_or(std::to_string(codec::gpu::kDefaultInterleavedCtasPerSm)),
      4, 8, "ctas-per-sm");
  if (!ctas.ok() || std::any_of(ctas->begin(), ctas->end(),
                                [](int64_t c) { return c != 4 && c != 6 && c != 8; })) {
    return UsageError("gpu-bench", "--ctas-per-sm takes 4, 6 or 8, comma-separated");
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
  for (int64_t m : *sizes) {
    absl::StatusOr<Result> r =
        BenchSize(m, static_cast<int>(*runs), save_dir, *segment_elements, *ctas, pool);
    if (!r.ok()) return Fail("gpu-bench", r.status());
    results.push_back(*r);
  }
  const cuda::DeviceInfo& d = devices->front();
  if (args->Has("json")) {
    nlohmann::ordered_json j;
    j["gpu"] = d.name;
    j["cuda_runtime"] = cuda::RuntimeVersion();
    j["driver"] = driver;
    for (const Result& r : results) {
      nlohmann::ordered_json x;
      x["weights_per_unit"] = r.weights_per_unit;
      x["units"] = r.units;
      x["launches"] = r.launches;
      x["decode_gbps"] = r.decode_gbps;
      x["decode_ms"] = r.decode_ms;
      x["copy_gbps"] = r.copy_gbps;
      x["decode_vs_copy"] = r.decode_gbps / r.copy_gbps;
      x["bits_per_weight"] = r.bits_per_weight;
      x["layout_extra_bits_per_weight"] = r.layout_bits;
      x["lane"] = {{"gbps", r.lane_gbps},
                   {"ms", r.lane_ms},
                   {"vs_copy", r.lane_gbps / r.copy_gbps},
                   {"vs_df11_decoder", r.lane_gbps / r.decode_gbps},
                   {"bits_per_weight", r.lane_bits_per_weight}};
      for (const InterleavedResult& i : r.interleaved) {
        x["interleaved"].push_back({{"segment_elements", i.segment_elements},
                                    {"ctas_per_sm", i.ctas_per_sm},
                                    {"gbps", i.gbps},
                                    {"ms", i.ms},
                                    {"vs_copy", i.gbps / r.copy_gbps},
                                    {"vs_df11_decoder", i.gbps / r.decode_gbps},
                                    {"bits_per_weight", i.bits_per_weight}});
      }
      j["results"].push_back(x);
    }
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s, CUDA runtime %s, driver %d\n", d.name.c_str(), cuda::RuntimeVersion().c_str(),
                driver);
    for (const Result& r : results) {
      std::printf(
          "%6lldM weights x %3d units: copy %8.1f GB/s; DF11 decoder %8.1f GB/s (%.3f ms), "
          "%.3f bits/weight + %.3f layout\n",
          static_cast<long long>(r.weights_per_unit / 1000000), r.units, r.copy_gbps, r.decode_gbps,
          r.decode_ms, r.bits_per_weight, r.layout_bits);
      std::printf("    lane streams (decoder v3): %8.1f GB/s (%.3f ms, %.2fx copy), %.3f bits/weight\n",
                  r.lane_gbps, r.lane_ms, r.lane_gbps / r.copy_gbps, r.lane_bits_per_weight);
      for (const InterleavedResult& i : r.interleaved) {
        std::printf(
            "    interleaved, segments of %lld, %d CTAs/SM: %8.1f GB/s (%.3f ms), "
            "%.3f bits/weight\n",
            static_cast<long long>(i.segment_elements), i.ctas_per_sm, i.gbps, i.ms,
            i.bits_per_weight);
      }
    }
  }
  return kExitOk;
#else
  return Fail("gpu-bench", absl::UnavailableError("df11 was built without CUDA"));
#endif
}

}  // namespace df11::tool
