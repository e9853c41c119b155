// df11 inspect: what is inside a DF11 model directory or a single unit file.
#include <cstdio>
#include <filesystem>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "codec/format.h"
#include "codec/unit.h"
#include "codec/model.h"
#include "tools/df11/cli.h"
#include "tools/df11/commands.h"

namespace df11::tool {
namespace {

constexpr char kHelp[] = R"(Usage: df11 inspect PATH

PATH is a DFloat11 model directory or one safetensors file holding DF11 units. Prints, per unit:
elements, stored bytes, bits per weight, the longest code, the number of LUT rows and the
code-length histogram (how many exponents have a code of each length); then totals and the
size against BF16.
)";

struct Totals {
  uint64_t elements = 0;
  uint64_t stored = 0;
};

void PrintUnit(const codec::Unit& unit, Totals& totals) {
  const auto& t = unit.tensors();
  const uint64_t stored = t.luts.size() + t.encoded_exponent.size() + t.sign_mantissa.size() +
                          t.output_positions.size() + t.gaps.size() +
                          t.split_positions.size() * sizeof(int64_t);
  std::map<int, int> histogram;  // code length -> exponents
  int max_length = 0;
  for (int v = 0; v < 256; ++v) {
    if (int len = unit.code_lengths()[v]; len > 0) {
      ++histogram[len];
      max_length = std::max(max_length, len);
    }
  }
  std::string lengths;
  for (const auto& [len, count] : histogram) absl::StrAppend(&lengths, " ", len, ":", count);
  std::printf("%-34s %13zu %13s %7.3f %6d %5d %s\n", unit.name().c_str(), unit.num_elements(),
              HumanBytes(stored).c_str(), 8.0 * stored / unit.num_elements(), max_length,
              unit.lut_rows(), lengths.c_str());
  totals.elements += unit.num_elements();
  totals.stored += stored;
}

void PrintHeader() {
  std::printf("%-34s %13s %13s %7s %6s %5s %s\n", "unit", "elements", "stored", "bits/w", "maxlen",
              "luts", "code lengths (length:exponents)");
}

}  // namespace

int RunInspect(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args = Args::Parse(argv, {}, {"help"});
  if (!args.ok()) return UsageError("inspect", std::string(args.status().message()));
  if (args->Has("help")) return std::fputs(kHelp, stdout), kExitOk;
  if (args->positional().size() != 1) return UsageError("inspect", "expected PATH");
  const std::string path = args->positional()[0];
  Totals totals;
  uint64_t passthrough = 0;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    absl::StatusOr<codec::Df11Model> model = codec::Df11Model::Open(path);
    if (!model.ok()) return Fail("inspect", model.status());
    std::printf("%s: DF11 version %s, %zu units, %zu passthrough tensors\n", path.c_str(),
                model->version().c_str(), model->units().size(), model->passthrough().size());
    for (const auto& [pattern, attrs] : model->pattern_dict()) {
      std::printf("  pattern %-30s %zu weight(s)\n", pattern.c_str(),
                  attrs.empty() ? size_t{1} : attrs.size());
    }
    PrintHeader();
    for (const auto& u : model->units()) PrintUnit(*u.unit, totals);
    for (const codec::TensorView* t : model->passthrough()) passthrough += t->data.size();
  } else {
    absl::StatusOr<codec::SafetensorsFile> file = codec::SafetensorsFile::Open(path);
    if (!file.ok()) return Fail("inspect", file.status());
    PrintHeader();
    const std::string suffix = absl::StrCat(".", format::kEncodedExponent);
    int units = 0;
    for (const codec::TensorView& t : file->tensors()) {
      if (!absl::EndsWith(t.name, suffix)) {
        continue;
      }
      const std::string unit_path = t.name.substr(0, t.name.size() - suffix.size());
      std::vector<int64_t> splits;
      absl::StatusOr<codec::UnitTensors> tensors = codec::FindUnitTensors(*file, unit_path, splits);
      if (!tensors.ok()) return Fail("inspect", tensors.status());
      absl::StatusOr<codec::Unit> unit = codec::Unit::Validate(*tensors, unit_path);
      if (!unit.ok()) return Fail("inspect", unit.status());
      PrintUnit(*unit, totals);
      ++units;
    }
    if (units == 0) {
      return Fail("inspect", absl::NotFoundError(absl::StrCat(path, " holds no DF11 unit")));
    }
  }
  const uint64_t bf16 = 2 * totals.elements;
  std::printf("total: %llu weights in units, %s as BF16 -> %s as DF11 (%.2f%%, %.3f bits/weight)",
              static_cast<unsigned long long>(totals.elements), HumanBytes(bf16).c_str(),
              HumanBytes(totals.stored).c_str(), 100.0 * totals.stored / std::max<uint64_t>(bf16, 1),
              8.0 * totals.stored / std::max<uint64_t>(totals.elements, 1));
  if (passthrough > 0) {
    std::printf("; model with %s passthrough: %.2f%% of BF16", HumanBytes(passthrough).c_str(),
                100.0 * (totals.stored + passthrough) / (bf16 + passthrough));
  }
  std::printf("\n");
  return kExitOk;
}

}  // namespace df11::tool
