// df11: compress, decompress, verify, inspect and benchmark DFloat11 models; generate text offline.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tools/df11/cli.h"
#include "tools/df11/commands.h"

namespace {

constexpr char kUsage[] = R"(df11: lossless DFloat11 (DF11) compression of BF16 language models

Usage: df11 COMMAND [ARGS...]    (df11 COMMAND --help for details; df11 --version)

Commands:
  compress SRC_DIR DST_DIR [--threads N] [--pattern-dict FILE]
                                compress a Hugging Face BF16 model into the official DF11 layout
  decompress DF11_DIR DST_DIR [--threads N]
                                decode a DF11 model back to BF16 safetensors
  verify DF11_DIR [--against SRC_DIR] [--threads N]
                                decode everything, check the structure, compare with the source
  inspect PATH                  per-unit sizes, bits per weight, code lengths, LUT rows
  bench [--mb N] [--threads N] [--runs N] [--json]
                                encode/decode speed on synthetic LLM-like weights
  synth DIR [options]           write a synthetic BF16 model (Qwen3, Qwen2 or Llama shapes)
  demo [DIR]                    synth, compress, verify and inspect a small model
  generate MODEL_DIR --prompt TEXT [--chat] [--max-tokens N] [--temperature T] [--top-p P]
           [--top-k K] [--seed S] [--json]
                                generate text on the CPU engine, without the daemon
  download REPO_ID [--revision R] [--cache-dir D] [--include GLOB]
                                download a hub repository into the Hugging Face cache; prints
                                the snapshot directory
  engine-bench [--df11 DIR] [--bf16 DIR] [--json]
                                CPU engine tokens/s with DF11 weights against BF16
  daemon-bench --addr HOST:PORT --model DIR [--json]
                                serving costs of a running df11d: swaps, gRPC, requests/s,
                                idle streams
  soak --addr HOST:PORT [--duration D] [--streams N] [--models M] [--json]
                                sustained mixed load on a running df11d, every outcome checked
  devices                       the CUDA devices this build can use
  gpu-bench [--sizes 1,16,200] [--json]
                                GPU decoder speed against a device copy, on the current GPU
  gemv-bench [--columns 1,2,4,8] [--json]
                                fused decode + matrix product against cuBLAS on BF16, on one
                                layer's shapes, on the current GPU
  gpu-load-bench MODEL_DIR [--bf16 DIR] [--json]
                                the CUDA backend: load to GPU-resident against the host-to-device
                                copy, per-layer decode, models that fit in the budget
  token new | token hash --name N --tenant T [--role user|admin]
                                API tokens for df11d's auth.tokens_file: a new one, or the
                                tokens-file entry of one read from stdin

Exit codes: 0 success, 1 failure, 2 bad command line, 3 verify found a difference.
)";

}  // namespace

int main(int argc, char** argv) {
  using namespace df11::tool;
  if (argc >= 2 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("df11 %s\n", DF11_VERSION);
    return kExitOk;
  }
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0 ||
      std::strcmp(argv[1], "help") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? kExitUsage : kExitOk;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "compress") return RunCompress(args);
  if (command == "decompress") return RunDecompress(args);
  if (command == "verify") return RunVerify(args);
  if (command == "inspect") return RunInspect(args);
  if (command == "bench") return RunBench(args);
  if (command == "synth") return RunSynth(args);
  if (command == "demo") return RunDemo(args);
  if (command == "generate") return RunGenerate(args);
  if (command == "download") return RunDownload(args);
  if (command == "engine-bench") return RunEngineBench(args);
  if (command == "daemon-bench") return RunDaemonBench(args);
  if (command == "soak") return RunSoak(args);
  if (command == "devices") return RunDevices(args);
  if (command == "gpu-bench") return RunGpuBench(args);
  if (command == "gemv-bench") return RunGemvBench(args);
  if (command == "gpu-load-bench") return RunGpuLoadBench(args);
  if (command == "token") return RunToken(args);
  std::fprintf(stderr, "df11: unknown command '%s'\n\n%s", command.c_str(), kUsage);
  return kExitUsage;
}
