// df11 compress and df11 decompress.
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codec/base/read_file.h"
#include "codec/model.h"
#include "tools/df11/cli.h"
#include "tools/df11/commands.h"

namespace df11::tool {
namespace {

constexpr char kCompressHelp[] = R"(Usage: df11 compress SRC_DIR DST_DIR [--threads N] [--pattern-dict FILE]

Compresses a Hugging Face model directory (config.json + BF16 safetensors, sharded or not) into
DST_DIR in the official DFloat11 layout: config.json with dfloat11_config, one safetensors file per
unit (model_layers_0.safetensors, lm_head.safetensors, ...), the other tensors unchanged in
model.safetensors, tokenizer and other files copied (not weights in other formats such as
*.bin or *.gguf, nor hidden or temporary files). On failure DST_DIR is left without the files
written so far.

The units come from the architecture, as the official DF11 releases: each decoder layer's
q,k,v,o,gate,up,down (Phi3ForCausalLM: o,qkv,gate_up,down); lm_head and embed_tokens unless the
embeddings are tied; Gemma3ForConditionalGeneration: the text layers only. Or they come from
--pattern-dict FILE, a JSON object {"regex": ["attr.path", ...]} as in dfloat11_config.
A unit holding Inf, NaN or |x| >= 2^113 cannot be DF11-coded and stays BF16 (reported).

  --threads N         units compressed at once (default: one per CPU); memory holds N units
  --pattern-dict FILE pattern dict as JSON
)";

constexpr char kDecompressHelp[] = R"(Usage: df11 decompress DF11_DIR DST_DIR [--threads N]

Decodes a DFloat11 model (official layout, v0.2 or later) into a BF16 Hugging Face checkpoint in
DST_DIR: the original tensor names and shapes, one shard per unit plus one for the other tensors,
model.safetensors.index.json, config.json without dfloat11_config, other files copied. Holds one
unit's BF16 output in memory at a time.

  --threads N   decoder threads (default: one per CPU)
)";

}  // namespace

int RunCompress(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args = Args::Parse(argv, {"threads", "pattern-dict"}, {"help"});
  if (!args.ok()) return UsageError("compress", std::string(args.status().message()));
  if (args->Has("help")) return std::fputs(kCompressHelp, stdout), kExitOk;
  if (args->positional().size() != 2) return UsageError("compress", "expected SRC_DIR DST_DIR");
  absl::StatusOr<int64_t> threads = args->GetInt("threads", 0, 0, 1024);
  if (!threads.ok()) return UsageError("compress", std::string(threads.status().message()));
  codec::CompressOptions options;
  options.threads = static_cast<int>(*threads);
  if (std::optional<std::string> file = args->Get("pattern-dict")) {
    const absl::StatusOr<std::string> text = base::ReadFile(*file, base::kMaxSettingsFileBytes);
    if (!text.ok()) return Fail("compress", text.status());
    absl::StatusOr<codec::PatternDict> dict = codec::ParsePatternDict(*text);
    if (!dict.ok()) return Fail("compress", dict.status());
    options.pattern_dict = *dict;
  }
  Progress progress("compress");
  options.progress = [&](const std::string& item, uint64_t done, uint64_t total) {
    progress.Update(item, done, total);
  };
  absl::StatusOr<codec::CompressReport> report =
      codec::CompressModel(args->positional()[0], args->positional()[1], options);
  progress.Done();
  if (!report.ok()) return Fail("compress", report.status());
  for (const std::string& kept : report->kept_bf16) {
    std::fprintf(stderr, "df11 compress: kept in BF16: %s\n", kept.c_str());
  }
  const uint64_t before = report->unit_bf16_bytes + report->passthrough_bytes;
  const uint64_t after = report->unit_stored_bytes + report->passthrough_bytes;
  std::printf("%d units: %s -> %s (%.2f%% of BF16, %.3f bits/weight in units); %s passthrough\n",
              report->units, HumanBytes(before).c_str(), HumanBytes(after).c_str(),
              100.0 * after / std::max<uint64_t>(before, 1),
              16.0 * report->unit_stored_bytes / std::max<uint64_t>(report->unit_bf16_bytes, 1),
              HumanBytes(report->passthrough_bytes).c_str());
  if (!report->copied_files.empty()) {
    std::printf("copied: %s\n", absl::StrJoin(report->copied_files, ", ").c_str());
  }
  return kExitOk;
}

int RunDecompress(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args = Args::Parse(argv, {"threads"}, {"help"});
  if (!args.ok()) return UsageError("decompress", std::string(args.status().message()));
  if (args->Has("help")) return std::fputs(kDecompressHelp, stdout), kExitOk;
  if (args->positional().size() != 2) return UsageError("decompress", "expected DF11_DIR DST_DIR");
  absl::StatusOr<int64_t> threads = args->GetInt("threads", 0, 0, 1024);
  if (!threads.ok()) return UsageError("decompress", std::string(threads.status().message()));
  absl::StatusOr<codec::Df11Model> model = codec::Df11Model::Open(args->positional()[0]);
  if (!model.ok()) return Fail("decompress", model.status());
  Progress progress("decompress");
  codec::DecompressOptions options;
  options.threads = static_cast<int>(*threads);
  options.progress = [&](const std::string& item, uint64_t done, uint64_t total) {
    progress.Update(item, done, total);
  };
  absl::StatusOr<codec::DecompressReport> report =
      codec::DecompressModel(*model, args->positional()[1], options);
  progress.Done();
  if (!report.ok()) return Fail("decompress", report.status());
  std::printf("%d units decoded; %s of BF16 checkpoint in %d shard(s)\n", report->units,
              HumanBytes(report->bf16_bytes).c_str(), report->shards);
  return kExitOk;
}

}  // namespace df11::tool
