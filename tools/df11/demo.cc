// df11 demo: the whole codec on a generated model, end to end.
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "codec/safetensors.h"
#include "tools/df11/cli.h"
#include "tools/df11/commands.h"
#include "tools/df11/synth.h"

namespace df11::tool {
namespace {

constexpr char kHelp[] = R"(Usage: df11 demo [DIR]

Generates a small Qwen3-shaped BF16 model in DIR/bf16 (default DIR: ./df11-demo), compresses it
to DIR/df11, inspects it, verifies it against the source tensor by tensor, decompresses it to
DIR/restored and checks that every restored tensor equals the source byte for byte.
)";

int Step(const char* title, int code) {
  if (code != kExitOk) std::fprintf(stderr, "df11 demo: step '%s' failed\n", title);
  return code;
}

}  // namespace

int RunDemo(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args = Args::Parse(argv, {}, {"help"});
  if (!args.ok()) return UsageError("demo", std::string(args.status().message()));
  if (args->Has("help")) return std::fputs(kHelp, stdout), kExitOk;
  if (args->positional().size() > 1) return UsageError("demo", "expected at most one DIR");
  const std::filesystem::path dir = args->positional().empty() ? "df11-demo" : args->positional()[0];
  const std::string bf16 = (dir / "bf16").string(), df11 = (dir / "df11").string(),
                    restored = (dir / "restored").string();
  std::error_code ec;
  for (const std::string& d : {bf16, df11, restored}) std::filesystem::remove_all(d, ec);

  std::printf("== 1. synthetic Qwen3-shaped BF16 model -> %s\n", bf16.c_str());
  SynthSpec spec;
  spec.shards = true;
  if (absl::Status s = WriteSyntheticModel(bf16, spec); !s.ok()) return Fail("demo", s);
  std::printf("== 2. df11 compress\n");
  if (int c = Step("compress", RunCompress({bf16, df11})); c) return c;
  std::printf("== 3. df11 inspect\n");
  if (int c = Step("inspect", RunInspect({df11})); c) return c;
  std::printf("== 4. df11 verify --against the source\n");
  if (int c = Step("verify", RunVerify({df11, "--against", bf16})); c) return c;
  std::printf("== 5. df11 decompress\n");
  if (int c = Step("decompress", RunDecompress({df11, restored})); c) return c;
  std::printf("== 6. restored == source, tensor by tensor\n");
  absl::StatusOr<codec::Checkpoint> a = codec::Checkpoint::Open(bf16);
  absl::StatusOr<codec::Checkpoint> b = codec::Checkpoint::Open(restored);
  if (!a.ok()) return Fail("demo", a.status());
  if (!b.ok()) return Fail("demo", b.status());
  if (a->TensorNames() != b->TensorNames()) {
    std::printf("FAILED: the restored model has other tensor names\n");
    return kExitMismatch;
  }
  for (const std::string& name : a->TensorNames()) {
    const codec::TensorView* x = a->Find(name);
    const codec::TensorView* y = b->Find(name);
    if (x->dtype != y->dtype || x->shape != y->shape || x->data.size() != y->data.size() ||
        std::memcmp(x->data.data(), y->data.data(), x->data.size()) != 0) {
      std::printf("FAILED: %s differs\n", name.c_str());
      return kExitMismatch;
    }
  }
  std::printf("%zu tensors identical. OK\n", a->TensorNames().size());
  return kExitOk;
}

}  // namespace df11::tool
