// df11 bench: encode and decode speed of the CPU codec on synthetic LLM-like weights, against
// memcpy of the same bytes in the same run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "absl/strings/str_format.h"
#include "codec/decoder.h"
#include "codec/encoder.h"
#include "codec/gpu_layout.h"
#include "codec/interleaved.h"
#include "codec/synthetic.h"
#include "codec/thread_pool.h"
#include "codec/tiled_matrix.h"
#include "tools/df11/cli.h"
#include "tools/df11/commands.h"

namespace df11::tool {
namespace {

constexpr char kHelp[] = R"(Usage: df11 bench [--mb N] [--threads N] [--runs N] [--json]

Generates N MB (default 256) of BF16 weights drawn from N(0, 0.02^2) (about 2.6 bits of exponent
entropy, like trained LLM layers), encodes them as one DF11 unit, and reports the median of --runs
(default 7) timings of:
  encode (one thread)               MB/s of BF16 input
  decode, block-parallel decoder    GB/s of BF16 output, on one thread and on --threads threads
                                    (alternating; the scaling is the median ratio of the pairs)
  decode, sequential reference      GB/s of BF16 output
  memcpy of the same BF16 bytes     GB/s, the machine's copy speed in this same run
  GPU layout build (1 thread)       GB/s of BF16 weights: the load-time cost of the GPU decoder
  interleaved build (1 thread)      GB/s of BF16 weights: InterleavedUnit::Build from the DF11
                                    unit (rows of 4096), the load-time cost of that layout
  tiled build (1 thread)            GB/s of BF16 weights: TiledMatrix::Build (rows of 4096) from
                                    the decoded weights, the CUDA backend's load-time re-encode
                                    of projections (after a DF11 decode)
and the stored bits per weight. Every decode is checked against the input before timing.

  --threads N   threads for the multi-threaded decode (default: one per CPU)
  --json        one JSON object instead of text
)";

using Clock = std::chrono::steady_clock;

template <typename Fn>
double Seconds(Fn&& fn) {
  const auto start = Clock::now();
  fn();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename Fn>
double MedianSeconds(int runs, Fn&& fn) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) t.push_back(Seconds(fn));
  return Median(std::move(t));
}

}  // namespace

int RunBench(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args = Args::Parse(argv, {"mb", "threads", "runs"}, {"json", "help"});
  if (!args.ok()) return UsageError("bench", std::string(args.status().message()));
  if (args->Has("help")) return std::fputs(kHelp, stdout), kExitOk;
  absl::StatusOr<int64_t> mb = args->GetInt("mb", 256, 1, 4000);
  absl::StatusOr<int64_t> threads =
      args->GetInt("threads", std::max(1u, std::thread::hardware_concurrency()), 1, 1024);
  absl::StatusOr<int64_t> runs = args->GetInt("runs", 7, 1, 1000);
  for (const auto* v : {&mb, &threads, &runs}) {
    if (!v->ok()) return UsageError("bench", std::string(v->status().message()));
  }
  const bool json = args->Has("json");
  const size_t n = static_cast<size_t>(*mb) * 1000 * 1000 / 2;
  if (!json) std::fprintf(stderr, "generating %zu BF16 weights...\n", n);
  const std::vector<uint16_t> weights = codec::NormalBf16(/*seed=*/1, 0.02f, n);
  const std::span<const uint16_t> part(weights);

  absl::StatusOr<codec::EncodedUnit> encoded;
  const double encode_s = MedianSeconds(std::max<int>(1, *runs / 2), [&] {
    encoded = codec::EncodeUnit(std::span(&part, 1));
  });
  if (!encoded.ok()) return Fail("bench", encoded.status());
  absl::StatusOr<codec::Unit> unit = codec::Unit::Validate(encoded->tensors(), "bench");
  if (!unit.ok()) return Fail("bench", unit.status());

  std::vector<uint16_t> out(n);
  codec::ThreadPool pool(static_cast<int>(*threads));
  // Correctness once, before any timing.
  for (codec::ThreadPool* p : {static_cast<codec::ThreadPool*>(nullptr), &pool}) {
    std::fill(out.begin(), out.end(), 0xFFFF);
    if (absl::Status s = codec::DecodeParallel(*unit, out, p); !s.ok()) return Fail("bench", s);
    if (out != weights) return Fail("bench", absl::InternalError("decoded weights differ"));
  }
  if (absl::Status s = codec::DecodeReference(*unit, out); !s.ok() || out != weights) {
    return Fail("bench", s.ok() ? absl::InternalError("reference decode differs") : s);
  }
  absl::Status status;
  // One and all threads alternate, so that both see the same load from other tenants of the
  // machine; the scaling is the median of the per-pair ratios.
  std::vector<double> one_thread, all_threads, ratios;
  for (int r = 0; r < *runs; ++r) {
    one_thread.push_back(Seconds([&] { status.Update(codec::DecodeParallel(*unit, out, nullptr)); }));
    all_threads.push_back(Seconds([&] { status.Update(codec::DecodeParallel(*unit, out, &pool)); }));
    ratios.push_back(one_thread.back() / all_threads.back());
  }
  const double decode1_s = Median(one_thread);
  const double decode_all_s = Median(all_threads);
  const double scaling = Median(ratios);
  const double reference_s = MedianSeconds(std::max<int>(1, *runs / 3), [&] {
    status.Update(codec::DecodeReference(*unit, out));
  });
  if (!status.ok()) return Fail("bench", status);
  // The GPU decoder's resident layout is built on the CPU at load: it must cost far less than
  // reading the file.
  absl::Status layout_status;
  const double layout_s = MedianSeconds(std::max<int>(1, *runs / 2), [&] {
    layout_status.Update(codec::BuildGpuLayout(*unit, nullptr).status());
  });
  if (!layout_status.ok()) return Fail("bench", layout_status);
  // The interleaved layout (the CPU backend's, and the interleaved GPU decoder's) is built at
  // load from the DF11 unit, rows of 4096 weights.
  const codec::UnitDecoder decoder(*unit);
  std::vector<codec::InterleavedUnit::Region> regions = {
      {.first = 0, .rows = static_cast<int64_t>(n / 4096), .row_length = 4096}};
  if (n % 4096 != 0) {
    regions.push_back(
        {.first = n / 4096 * 4096, .rows = 1, .row_length = static_cast<int64_t>(n % 4096)});
  }
  absl::Status interleaved_status;
  const double interleaved_s = MedianSeconds(std::max<int>(1, *runs / 2), [&] {
    interleaved_status.Update(codec::InterleavedUnit::Build(decoder, regions, nullptr).status());
  });
  if (!interleaved_status.ok()) return Fail("bench", interleaved_status);
  // The tiled layout (the fused GPU product's) is built at load from the decoded weights.
  const int64_t tiled_rows = static_cast<int64_t>(n / 4096 / 16 * 16);
  absl::Status tiled_status;
  double tiled_gbps = 0;
  if (tiled_rows > 0) {
    const std::span<const uint16_t> matrix(weights.data(), tiled_rows * 4096);
    const double tiled_s = MedianSeconds(std::max<int>(1, *runs / 2), [&] {
      tiled_status.Update(codec::TiledMatrix::Build(matrix, tiled_rows, 4096, nullptr).status());
    });
    if (!tiled_status.ok()) return Fail("bench", tiled_status);
    tiled_gbps = 2.0 * matrix.size() / tiled_s / 1e9;
  }
  std::vector<uint16_t> copy(n);
  const double memcpy_s = MedianSeconds(*runs, [&] {
    std::memcpy(copy.data(), weights.data(), 2 * n);
  });

  const double bytes = 2.0 * n;
  const double encode_mbps = bytes / encode_s / 1e6;
  const double decode1 = bytes / decode1_s / 1e9;
  const double decode_all = bytes / decode_all_s / 1e9;
  const double reference = bytes / reference_s / 1e9;
  const double memcpy_gbps = bytes / memcpy_s / 1e9;
  const double bits = 8.0 * encoded->stored_bytes() / n;
  const double layout_gbps = bytes / layout_s / 1e9;
  const double interleaved_gbps = bytes / interleaved_s / 1e9;
  if (json) {
    std::printf(
        "{\"encode_mbps_per_thread\": %.1f, \"decode_gbps_per_thread\": %.3f, "
        "\"decode_gbps_all_threads\": %.3f, \"memcpy_gbps\": %.3f, \"bits_per_weight\": %.4f, "
        "\"threads\": %lld, \"decode_reference_gbps\": %.3f, \"thread_scaling\": %.3f, "
        "\"mb\": %lld, \"max_code_length\": %d, \"gpu_layout_gbps_per_thread\": %.3f, "
        "\"interleaved_build_gbps_per_thread\": %.3f, \"tiled_build_gbps_per_thread\": %.3f}\n",
        encode_mbps, decode1, decode_all, memcpy_gbps, bits, static_cast<long long>(*threads),
        reference, scaling, static_cast<long long>(*mb), encoded->max_code_length, layout_gbps,
        interleaved_gbps, tiled_gbps);
  } else {
    std::printf("weights            %zu (%.0f MB of BF16), %.4f bits/weight stored (%.2f%%)\n", n,
                bytes / 1e6, bits, 100 * bits / 16);
    std::printf("encode, 1 thread   %8.1f MB/s\n", encode_mbps);
    std::printf("decode, 1 thread   %8.3f GB/s\n", decode1);
    std::printf("decode, %lld threads %8.3f GB/s (%.2fx)\n", static_cast<long long>(*threads),
                decode_all, scaling);
    std::printf("reference decoder  %8.3f GB/s\n", reference);
    std::printf("memcpy             %8.3f GB/s\n", memcpy_gbps);
    std::printf("GPU layout build   %8.3f GB/s of BF16 weights, 1 thread\n", layout_gbps);
    std::printf("interleaved build  %8.3f GB/s of BF16 weights, 1 thread\n", interleaved_gbps);
    std::printf("tiled build        %8.3f GB/s of BF16 weights, 1 thread\n", tiled_gbps);
  }
  return kExitOk;
}

}  // namespace df11::tool
