// df11 verify: decode every unit with both CPU decoders, check the structure, and optionally prove
// tensor by tensor (SHA-256) that the model decodes to a source checkpoint.
#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codec/decoder.h"
#include "codec/model.h"
#include "codec/thread_pool.h"
#include "tools/df11/cli.h"
#include "tools/df11/commands.h"

namespace df11::tool {
namespace {

constexpr char kHelp[] = R"(Usage: df11 verify DF11_DIR [--against SRC_DIR] [--threads N]

Opens a DFloat11 model, checks every structural invariant of the format, and decodes every unit
with both CPU decoders (the sequential reference, which checks every gap and block position, and
the block-parallel one), which must agree bit for bit.

With --against SRC_DIR (the BF16 model it was made from), also proves tensor by tensor that the
decoded model is SRC_DIR exactly: same names, dtypes and shapes, equal SHA-256 of the bytes, no
tensor missing or extra.

  --threads N   units verified at once (default: one per CPU); each holds two BF16 copies of
                its unit in memory

Exit status 0 when everything holds, 3 when a tensor differs, 1 on a corrupt or unreadable model.
)";

std::string Sha256(const void* data, size_t size) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data, size, md, &len, EVP_sha256(), nullptr);
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) {
    hex += kHex[md[i] >> 4];
    hex += kHex[md[i] & 15];
  }
  return hex;
}

std::string Shape(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

}  // namespace

int RunVerify(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args = Args::Parse(argv, {"against", "threads"}, {"help"});
  if (!args.ok()) return UsageError("verify", std::string(args.status().message()));
  if (args->Has("help")) return std::fputs(kHelp, stdout), kExitOk;
  if (args->positional().size() != 1) return UsageError("verify", "expected DF11_DIR");
  absl::StatusOr<int64_t> threads = args->GetInt("threads", 0, 0, 1024);
  if (!threads.ok()) return UsageError("verify", std::string(threads.status().message()));

  absl::StatusOr<codec::Df11Model> model = codec::Df11Model::Open(args->positional()[0]);
  if (!model.ok()) return Fail("verify", model.status());
  std::optional<codec::Checkpoint> source;
  if (std::optional<std::string> against = args->Get("against")) {
    absl::StatusOr<codec::Checkpoint> ckpt = codec::Checkpoint::Open(*against);
    if (!ckpt.ok()) return Fail("verify", ckpt.status());
    source = std::move(*ckpt);
  }

  // Decoded tensors' digests by name (units) and any differences found.
  std::mutex mu;
  std::map<std::string, std::pair<std::vector<int64_t>, std::string>> decoded;  // guarded by mu
  std::vector<std::string> differences;                                        // guarded by mu
  absl::Status failure;                                                        // guarded by mu
  uint64_t done = 0, total = 0, elements = 0;
  for (const auto& u : model->units()) total += 2 * u.unit->num_elements();
  Progress progress("verify");
  codec::ThreadPool pool(static_cast<int>(*threads));
  const auto& units = model->units();
  // One unit per task: a thread holds two decoded copies of one unit at a time.
  pool.ParallelFor(units.size(), /*grain=*/1, [&](size_t index, size_t) {
    const auto& u = units[index];
    std::vector<uint16_t> reference(u.unit->num_elements(), 0);
    std::vector<uint16_t> parallel(u.unit->num_elements(), 0xFFFF);
    absl::Status s = codec::DecodeReference(*u.unit, reference);
    if (s.ok()) s = codec::DecodeParallel(*u.unit, parallel, nullptr);
    std::vector<std::pair<std::string, std::string>> digests;
    if (s.ok() && source.has_value()) {
      int64_t begin = 0;
      for (size_t w = 0; w < u.weight_names.size(); ++w) {
        const int64_t end = w < u.split_positions->size() ? (*u.split_positions)[w]
                                                          : static_cast<int64_t>(reference.size());
        digests.push_back(
            {u.weight_names[w], Sha256(reference.data() + begin, 2 * size_t(end - begin))});
        begin = end;
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    if (!s.ok()) {
      if (failure.ok()) failure = s;
      return;
    }
    if (reference != parallel) {
      differences.push_back(
          absl::StrCat(u.path, ": the reference and block-parallel decoders disagree"));
    }
    for (size_t w = 0; w < digests.size(); ++w) {
      decoded[digests[w].first] = {u.shapes[w], digests[w].second};
    }
    elements += u.unit->num_elements();
    done += 2 * u.unit->num_elements();
    progress.Update(u.path, done, total);
  });
  progress.Done();
  if (!failure.ok()) return Fail("verify", failure);

  size_t identical = 0;
  if (source.has_value()) {
    std::map<std::string, bool> seen;
    for (const std::string& name : source->TensorNames()) seen[name] = false;
    auto compare = [&](const std::string& name, codec::DType dtype,
                       const std::vector<int64_t>& shape, const std::string& digest) {
      const codec::TensorView* t = source->Find(name);
      if (t == nullptr) {
        differences.push_back(absl::StrCat(name, ": not in the source checkpoint"));
        return;
      }
      seen[name] = true;
      if (t->dtype != dtype || t->shape != shape) {
        differences.push_back(absl::StrCat(name, ": ", std::string(codec::DTypeName(dtype)), " ",
                                           Shape(shape), ", source has ",
                                           std::string(codec::DTypeName(t->dtype)), " ",
                                           Shape(t->shape)));
      } else if (Sha256(t->data.data(), t->data.size()) != digest) {
        differences.push_back(absl::StrCat(name, ": SHA-256 differs from the source"));
      } else {
        ++identical;
      }
    };
    for (const auto& [name, shape_digest] : decoded) {
      compare(name, codec::DType::kBF16, shape_digest.first, shape_digest.second);
    }
    for (const codec::TensorView* t : model->passthrough()) {
      compare(t->name, t->dtype, t->shape, Sha256(t->data.data(), t->data.size()));
    }
    for (const auto& [name, found] : seen) {
      if (!found) differences.push_back(absl::StrCat(name, ": in the source, missing from the model"));
    }
  }
  std::sort(differences.begin(), differences.end());  // threads finish in any order
  for (const std::string& d : differences) std::printf("DIFFERS %s\n", d.c_str());
  std::printf("%s: %zu units (%llu weights) decoded by both decoders, %zu passthrough tensors",
              model->dir().c_str(), units.size(), static_cast<unsigned long long>(elements),
              model->passthrough().size());
  if (source.has_value()) {
    std::printf("; %zu tensors identical to %s (SHA-256)", identical, args->Get("against")->c_str());
  }
  std::printf("\n%s\n", differences.empty() ? "OK" : "FAILED");
  return differences.empty() ? kExitOk : kExitMismatch;
}

}  // namespace df11::tool
