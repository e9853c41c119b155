#include "codec/model.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "codec/base/status_macros.h"
#include "codec/decoder.h"
#include "codec/encoder.h"
#include "codec/format.h"
#include "codec/thread_pool.h"
#include "nlohmann/json.hpp"

namespace df11::codec {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// Tensor names longer than this are refused before any regular expression sees them: libstdc++'s
// std::regex recurses per character, and real names are under 100 bytes.
constexpr size_t kMaxTensorNameBytes = 1024;

absl::Status CheckNameLengths(const std::vector<std::string>& names, absl::StatusCode code) {
  for (const std::string& name : names) {
    if (name.size() > kMaxTensorNameBytes) {
      return absl::Status(
          code, absl::StrCat("a tensor name of ", name.size(), " bytes is longer than the ",
                             kMaxTensorNameBytes, "-byte limit: ", name.substr(0, 64), "..."));
    }
  }
  return absl::OkStatus();
}

// Unit files carry the shapes of their weights in this metadata key, so that models of any
// architecture decompress; official files have no metadata, and their shapes come from config.json.
constexpr char kShapesMetadataKey[] = "df11.weights";

absl::Status WriteTextFile(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) return absl::InternalError(absl::StrCat("cannot write ", tmp.string()));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec)
    return absl::InternalError(
        absl::StrCat("cannot rename to ", path.string(), ": ", ec.message()));
  return absl::OkStatus();
}

// A unit's file name: its path with dots replaced by underscores.
std::string UnitFileName(const std::string& path) {
  return absl::StrReplaceAll(path, {{".", "_"}}) + ".safetensors";
}

std::vector<std::string> UnitWeightNames(const std::string& path,
                                         const std::vector<std::string>& attrs) {
  if (attrs.empty()) return {path + ".weight"};
  std::vector<std::string> names;
  for (const std::string& a : attrs) names.push_back(absl::StrCat(path, ".", a, ".weight"));
  return names;
}

struct CompiledPattern {
  std::string key;
  std::vector<std::string> attrs;
  std::regex regex;
};

absl::StatusOr<std::vector<CompiledPattern>> Compile(const PatternDict& dict) {
  std::vector<CompiledPattern> out;
  for (const auto& [key, attrs] : dict) {
    try {
      out.push_back({key, attrs, std::regex(key, std::regex::ECMAScript)});
    } catch (const std::regex_error& e) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pattern_dict key `", key, "` is not a valid regular expression: ", e.what()));
    }
  }
  return out;
}

Json PatternDictJson(const PatternDict& dict) {
  Json j = Json::object();
  for (const auto& [key, attrs] : dict) j[key] = attrs;
  return j;
}

// Regular files of `dir`, sorted. std::filesystem's non-throwing overloads only: a directory we
// cannot read is an error status, never an exception.
absl::StatusOr<std::vector<fs::path>> ListFiles(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> files;
  fs::directory_iterator it(dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_regular_file(type_ec)) files.push_back(it->path());
  }
  if (ec)
    return absl::InternalError(absl::StrCat("cannot list ", dir.string(), ": ", ec.message()));
  std::sort(files.begin(), files.end());
  return files;
}

// Files of `dir` that a conversion copies as they are: tokenizer, generation config, README, ...
// Not the weights in any format (they are converted, or would duplicate gigabytes), not
// config.json (rewritten), not temporary or hidden files.
absl::StatusOr<std::vector<fs::path>> FilesToCopy(const fs::path& dir) {
  DF11_ASSIGN_OR_RETURN(std::vector<fs::path> all, ListFiles(dir));
  static constexpr const char* kWeightSuffixes[] = {
      ".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack", ".onnx", ".pkl"};
  std::vector<fs::path> files;
  for (const fs::path& f : all) {
    const std::string name = f.filename().string();
    const bool weights =
        std::any_of(std::begin(kWeightSuffixes), std::end(kWeightSuffixes),
                    [&](const char* suffix) { return absl::EndsWith(name, suffix); });
    if (weights || name == "model.safetensors.index.json" || name == "config.json" ||
        absl::StartsWith(name, ".") || absl::StrContains(name, ".tmp")) {
      continue;
    }
    files.push_back(f);
  }
  return files;
}

absl::Status PrepareDestination(const fs::path& dst) {
  std::error_code ec;
  fs::create_directories(dst, ec);
  if (ec)
    return absl::InternalError(absl::StrCat("cannot create ", dst.string(), ": ", ec.message()));
  DF11_ASSIGN_OR_RETURN(std::vector<fs::path> existing, ListFiles(dst));
  for (const fs::path& f : existing) {
    if (f.extension() == ".safetensors") {
      return absl::FailedPreconditionError(
          absl::StrCat(dst.string(), " already holds safetensors files (", f.filename().string(),
                       "); choose an empty directory"));
    }
  }
  return absl::OkStatus();
}

// The files a conversion writes into its destination. Unless Commit() is called, the destructor
// removes them, so that a failed conversion leaves no half-written model behind. Thread-safe.
class OutputFiles {
 public:
  explicit OutputFiles(fs::path dir) : dir_(std::move(dir)) {}
  ~OutputFiles() {
    absl::MutexLock lock(&mu_);
    if (committed_) return;
    std::error_code ec;
    for (const std::string& name : names_) fs::remove(dir_ / name, ec);
  }
  // The path of `name` in the destination, recorded for removal.
  std::string Add(const std::string& name) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    names_.push_back(name);
    return (dir_ / name).string();
  }
  void Commit() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    committed_ = true;
  }

 private:
  const fs::path dir_;
  absl::Mutex mu_;
  std::vector<std::string> names_ ABSL_GUARDED_BY(mu_);
  bool committed_ ABSL_GUARDED_BY(mu_) = false;
};

absl::Status CopyFiles(const fs::path& src, OutputFiles& out, std::vector<std::string>* names) {
  DF11_ASSIGN_OR_RETURN(std::vector<fs::path> files, FilesToCopy(src));
  for (const fs::path& f : files) {
    std::error_code ec;
    fs::copy_file(f, out.Add(f.filename().string()), fs::copy_options::overwrite_existing, ec);
    if (ec)
      return absl::InternalError(absl::StrCat("cannot copy ", f.string(), ": ", ec.message()));
    if (names != nullptr) names->push_back(f.filename().string());
  }
  return absl::OkStatus();
}

// BF16 values of a tensor as uint16; copies when the mapped bytes are not 2-byte aligned.
std::span<const uint16_t> Bf16Values(const TensorView& t, std::vector<uint16_t>& copy) {
  if (reinterpret_cast<uintptr_t>(t.data.data()) % alignof(uint16_t) == 0) {
    return {reinterpret_cast<const uint16_t*>(t.data.data()), t.data.size() / 2};
  }
  copy.resize(t.data.size() / 2);
  std::memcpy(copy.data(), t.data.data(), t.data.size());
  return copy;
}

std::span<const std::byte> AsBytes(const void* data, size_t size) {
  return {static_cast<const std::byte*>(data), size};
}

// The plan of a compression: which weights form which unit, and where every other tensor goes.
struct UnitPlan {
  std::string path;
  std::string pattern;
  std::vector<const TensorView*> weights;
  std::vector<const TensorView*> others;  // the module's other tensors (norms, biases)
  uint64_t bf16_bytes = 0;
};

absl::StatusOr<std::vector<UnitPlan>> PlanUnits(const Checkpoint& source,
                                                const std::vector<CompiledPattern>& patterns,
                                                std::vector<const TensorView*>* remainder) {
  const std::vector<std::string> names = source.TensorNames();
  DF11_RETURN_IF_ERROR(CheckNameLengths(names, absl::StatusCode::kInvalidArgument));
  std::set<std::string> modules;  // every dotted prefix of every tensor name
  for (const std::string& name : names) {
    for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1)) {
      modules.insert(name.substr(0, dot));
    }
  }
  std::vector<UnitPlan> plans;
  std::map<std::string, std::string> claimed;  // weight -> unit
  for (const std::string& module : modules) {
    const CompiledPattern* match = nullptr;
    for (const CompiledPattern& p : patterns) {
      if (!std::regex_match(module, p.regex)) continue;
      if (match != nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "module ", module, " matches two patterns: `", match->key, "` and `", p.key, "`"));
      }
      match = &p;
    }
    if (match == nullptr) continue;
    const std::vector<std::string> weights = UnitWeightNames(module, match->attrs);
    // An empty list names the module's own weight; a module without one (a container matched by
    // a single-weight pattern) is not a unit.
    if (match->attrs.empty() && source.Find(weights[0]) == nullptr) continue;
    UnitPlan plan{module, match->key, {}, {}, 0};
    for (const std::string& w : weights) {
      const TensorView* t = source.Find(w);
      if (t == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("unit ", module, " (pattern `", match->key,
                                                       "`) needs ", w,
                                                       ", which the checkpoint does not have"));
      }
      if (t->dtype != DType::kBF16 || t->shape.size() != 2) {
        return absl::InvalidArgumentError(
            absl::StrCat("unit weight ", w, " is ", std::string(DTypeName(t->dtype)), " with ",
                         t->shape.size(), " dimensions; DF11 compresses 2-D BF16 weights"));
      }
      if (!claimed.emplace(w, module).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(w, " belongs to two units: ", claimed[w], " and ", module));
      }
      plan.weights.push_back(t);
      plan.bf16_bytes += t->data.size();
    }
    plans.push_back(std::move(plan));
  }
  // Two paths can give one file name ("a.b_c" and "a_b.c").
  std::map<std::string, std::string> files;
  for (const UnitPlan& plan : plans) {
    auto [it, inserted] = files.emplace(UnitFileName(plan.path), plan.path);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat("units ", it->second, " and ", plan.path,
                                                     " would both be written to ", it->first));
    }
  }
  // Every other tensor goes with the innermost unit whose module holds it, else to the remainder.
  for (const std::string& name : names) {
    if (claimed.count(name)) continue;
    UnitPlan* owner = nullptr;
    for (UnitPlan& plan : plans) {
      if (absl::StartsWith(name, plan.path + ".") &&
          (owner == nullptr || plan.path.size() > owner->path.size())) {
        owner = &plan;
      }
    }
    (owner != nullptr ? owner->others : *remainder).push_back(source.Find(name));
  }
  return plans;
}

std::string ShapesMetadata(const std::vector<std::string>& names,
                           const std::vector<std::vector<int64_t>>& shapes) {
  Json j = Json::array();
  for (size_t i = 0; i < names.size(); ++i) j.push_back({names[i], shapes[i]});
  return j.dump();
}

// Encodes one planned unit and writes its file. Returns the unit's stored bytes, or
// kFailedPrecondition when the unit cannot be DF11-coded (the caller keeps it BF16).
absl::StatusOr<uint64_t> WriteUnit(const UnitPlan& plan, OutputFiles& out) {
  std::vector<std::vector<uint16_t>> copies(plan.weights.size());
  std::vector<std::span<const uint16_t>> parts;
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  for (size_t i = 0; i < plan.weights.size(); ++i) {
    parts.push_back(Bf16Values(*plan.weights[i], copies[i]));
    names.push_back(plan.weights[i]->name);
    shapes.push_back(plan.weights[i]->shape);
  }
  absl::StatusOr<EncodedUnit> unit = EncodeUnit(parts);
  if (!unit.ok()) return unit.status();
  SafetensorsWriter writer;
  auto add_u8 = [&](const char* field, const std::vector<uint8_t>& v, std::vector<int64_t> shape) {
    return writer.Add(absl::StrCat(plan.path, ".", field), DType::kU8, std::move(shape),
                      AsBytes(v.data(), v.size()));
  };
  const int64_t rows = unit->lut_rows;
  DF11_RETURN_IF_ERROR(add_u8(format::kLuts, unit->luts, {rows, format::kLutRowBytes}));
  DF11_RETURN_IF_ERROR(add_u8(format::kEncodedExponent, unit->encoded_exponent,
                              {static_cast<int64_t>(unit->encoded_exponent.size())}));
  DF11_RETURN_IF_ERROR(add_u8(format::kSignMantissa, unit->sign_mantissa,
                              {static_cast<int64_t>(unit->sign_mantissa.size())}));
  DF11_RETURN_IF_ERROR(add_u8(format::kOutputPositions, unit->output_positions,
                              {static_cast<int64_t>(unit->output_positions.size())}));
  DF11_RETURN_IF_ERROR(
      add_u8(format::kGaps, unit->gaps, {static_cast<int64_t>(unit->gaps.size())}));
  DF11_RETURN_IF_ERROR(writer.Add(
      absl::StrCat(plan.path, ".", format::kSplitPositions), DType::kI64,
      {static_cast<int64_t>(unit->split_positions.size())},
      AsBytes(unit->split_positions.data(), unit->split_positions.size() * sizeof(int64_t))));
  for (const TensorView* t : plan.others) {
    DF11_RETURN_IF_ERROR(writer.Add(t->name, t->dtype, t->shape, t->data));
  }
  writer.SetMetadata({{kShapesMetadataKey, ShapesMetadata(names, shapes)}});
  DF11_RETURN_IF_ERROR(writer.WriteFile(out.Add(UnitFileName(plan.path))));
  return unit->stored_bytes();
}

// Excludes `paths` from `pattern` with a negative lookahead, so that loaders treat those modules
// as plain BF16 (the official way to keep a matched unit uncompressed is a narrower pattern).
std::string ExcludePaths(const std::string& pattern, const std::vector<std::string>& paths) {
  std::vector<std::string> escaped;
  for (const std::string& p : paths) escaped.push_back(absl::StrReplaceAll(p, {{".", "\\."}}));
  return absl::StrCat("(?!(?:", absl::StrJoin(escaped, "|"), ")$)", pattern);
}

// kFailedPrecondition when `dir` holds the pickle files of a DFloat11 v0.1 release.
absl::Status RefuseLegacyRepository(const std::string& dir) {
  DF11_ASSIGN_OR_RETURN(std::vector<fs::path> files, ListFiles(dir));
  for (const fs::path& p : files) {
    if (p.extension() == ".pkl" || p.filename() == "decode.ptx") {
      return absl::FailedPreconditionError(absl::StrCat(
          dir, " is a legacy DFloat11 v0.1 repository (", p.filename().string(),
          "): its pickle files are not supported and are never loaded; use a v0.2+ release"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<UnitTensors> FindUnitTensors(const SafetensorsFile& file, const std::string& path,
                                            std::vector<int64_t>& split_storage) {
  auto get = [&](const char* field, DType dtype, size_t rank) -> absl::StatusOr<const TensorView*> {
    const std::string name = absl::StrCat(path, ".", field);
    const TensorView* v = file.Find(name);
    if (v == nullptr || v->dtype != dtype || v->shape.size() != rank) {
      return absl::DataLossError(
          absl::StrCat("unit ", path, " in ", file.path(), ": ", name, " must be a ", rank, "-D ",
                       std::string(DTypeName(dtype)), " tensor", v == nullptr ? " (missing)" : ""));
    }
    return v;
  };
  DF11_ASSIGN_OR_RETURN(const TensorView* luts, get(format::kLuts, DType::kU8, 2));
  DF11_ASSIGN_OR_RETURN(const TensorView* codes, get(format::kEncodedExponent, DType::kU8, 1));
  DF11_ASSIGN_OR_RETURN(const TensorView* sm, get(format::kSignMantissa, DType::kU8, 1));
  DF11_ASSIGN_OR_RETURN(const TensorView* positions, get(format::kOutputPositions, DType::kU8, 1));
  DF11_ASSIGN_OR_RETURN(const TensorView* gaps, get(format::kGaps, DType::kU8, 1));
  DF11_ASSIGN_OR_RETURN(const TensorView* splits, get(format::kSplitPositions, DType::kI64, 1));
  if (luts->shape[1] != format::kLutRowBytes) {
    return absl::DataLossError(
        absl::StrCat("unit ", path, ": luts rows hold ", luts->shape[1], " bytes, not 256"));
  }
  // Copied: the mapped I64 bytes need not be 8-byte aligned.
  split_storage.resize(splits->data.size() / sizeof(int64_t));
  if (!split_storage.empty()) {  // memcpy from an empty tensor's null pointer is undefined
    std::memcpy(split_storage.data(), splits->data.data(), splits->data.size());
  }
  auto u8 = [](const TensorView* v) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v->data.data()),
                                    v->data.size());
  };
  return UnitTensors{u8(luts),      luts->shape[0], u8(codes),    u8(sm),
                     u8(positions), u8(gaps),       split_storage};
}

absl::StatusOr<PatternDict> ParsePatternDict(const std::string& json_text) {
  Json j = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        "a pattern dict is a JSON object mapping regular expressions to lists of attribute paths");
  }
  PatternDict dict;
  for (const auto& [key, value] : j.items()) {
    if (!value.is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat("pattern `", key, "`: the value is not a list"));
    }
    std::vector<std::string> attrs;
    for (const auto& a : value) {
      if (!a.is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat("pattern `", key, "`: attribute paths must be strings"));
      }
      attrs.push_back(a.get<std::string>());
    }
    dict.push_back({key, std::move(attrs)});
  }
  DF11_RETURN_IF_ERROR(Compile(dict).status());
  return dict;
}

absl::StatusOr<CompressReport> CompressModel(const std::string& src_dir, const std::string& dst_dir,
                                             const CompressOptions& options) {
  const fs::path src(src_dir), dst(dst_dir);
  DF11_ASSIGN_OR_RETURN(const ModelDirectory source_dir, ModelDirectory::Read(src_dir));
  Json config = source_dir.config();
  if (source_dir.is_df11()) {
    return absl::InvalidArgumentError(absl::StrCat(src_dir, " is already a DF11 model"));
  }
  DF11_ASSIGN_OR_RETURN(Checkpoint source, Checkpoint::Open(src_dir));
  PatternDict dict;
  if (options.pattern_dict.has_value()) {
    dict = *options.pattern_dict;
  } else {
    absl::StatusOr<ArchitectureInfo> parsed = ParseArchitecture(config);
    if (!parsed.ok()) {
      return absl::Status(parsed.status().code(),
                          absl::StrCat(parsed.status().message(),
                                       " (or give a pattern dict with --pattern-dict)"));
    }
    ArchitectureInfo arch = *std::move(parsed);
    if (source.Find("model.language_model.embed_tokens.weight") != nullptr) {
      arch.text_tower_prefix = "model.language_model.";
    }
    dict = DefaultPatternDict(arch);
  }
  DF11_ASSIGN_OR_RETURN(std::vector<CompiledPattern> patterns, Compile(dict));
  std::vector<const TensorView*> remainder;
  DF11_ASSIGN_OR_RETURN(std::vector<UnitPlan> plans, PlanUnits(source, patterns, &remainder));
  if (plans.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no module of ", src_dir, " matches the pattern dict; nothing to compress"));
  }
  DF11_RETURN_IF_ERROR(PrepareDestination(dst));
  OutputFiles out(dst);

  uint64_t total = 0;
  for (const UnitPlan& p : plans) total += p.bf16_bytes;
  // What the workers found, in the order they finished; progress is reported under the lock too.
  struct Tally {
    absl::Mutex mu;
    CompressReport report ABSL_GUARDED_BY(mu);
    std::vector<const UnitPlan*> kept_bf16 ABSL_GUARDED_BY(mu);
    uint64_t done ABSL_GUARDED_BY(mu) = 0;
    absl::Status failure ABSL_GUARDED_BY(mu);
  } tally;
  ThreadPool pool(options.threads);
  // One unit at a time per thread, so at most pool.size() units are held.
  pool.ParallelFor(plans.size(), /*grain=*/1, [&](size_t index, size_t) {
    const UnitPlan& plan = plans[index];
    absl::StatusOr<uint64_t> stored = WriteUnit(plan, out);
    absl::MutexLock lock(&tally.mu);
    CompressReport& report = tally.report;
    if (stored.ok()) {
      ++report.units;
      report.unit_bf16_bytes += plan.bf16_bytes;
      report.unit_stored_bytes += *stored;
      for (const TensorView* t : plan.others) report.passthrough_bytes += t->data.size();
    } else if (stored.status().code() == absl::StatusCode::kFailedPrecondition) {
      tally.kept_bf16.push_back(&plan);
      report.kept_bf16.push_back(absl::StrCat(plan.path, ": ", stored.status().message()));
    } else if (tally.failure.ok()) {
      tally.failure = stored.status();
    }
    tally.done += plan.bf16_bytes;
    if (options.progress) options.progress(plan.path, tally.done, total);
  });
  CompressReport report;
  std::vector<const UnitPlan*> kept_bf16;
  {
    absl::MutexLock lock(&tally.mu);  // every worker has finished
    DF11_RETURN_IF_ERROR(tally.failure);
    report = std::move(tally.report);
    kept_bf16 = std::move(tally.kept_bf16);
  }

  // Units kept BF16 go to the remainder, and their patterns exclude them; in path order, whatever
  // order the threads finished in.
  std::sort(kept_bf16.begin(), kept_bf16.end(),
            [](const UnitPlan* a, const UnitPlan* b) { return a->path < b->path; });
  std::sort(report.kept_bf16.begin(), report.kept_bf16.end());
  std::map<std::string, std::vector<std::string>> excluded;  // pattern -> paths
  for (const UnitPlan* p : kept_bf16) {
    excluded[p->pattern].push_back(p->path);
    remainder.insert(remainder.end(), p->weights.begin(), p->weights.end());
    remainder.insert(remainder.end(), p->others.begin(), p->others.end());
  }
  for (auto& [key, attrs] : dict) {
    auto it = excluded.find(key);
    if (it != excluded.end()) key = ExcludePaths(key, it->second);
  }
  if (!remainder.empty()) {
    std::sort(remainder.begin(), remainder.end(),
              [](const TensorView* a, const TensorView* b) { return a->name < b->name; });
    SafetensorsWriter writer;
    for (const TensorView* t : remainder) {
      DF11_RETURN_IF_ERROR(writer.Add(t->name, t->dtype, t->shape, t->data));
      report.passthrough_bytes += t->data.size();
    }
    writer.SetMetadata({{"format", "pt"}});
    DF11_RETURN_IF_ERROR(writer.WriteFile(out.Add("model.safetensors")));
  }
  config[format::kConfigKey] = {{"version", format::kWriterVersion},
                                {"threads_per_block", {format::kThreadsPerBlock}},
                                {"bytes_per_thread", format::kBytesPerThread},
                                {"pattern_dict", PatternDictJson(dict)}};
  DF11_RETURN_IF_ERROR(WriteTextFile(out.Add("config.json"), config.dump(2) + "\n"));
  DF11_RETURN_IF_ERROR(CopyFiles(src, out, &report.copied_files));
  out.Commit();
  return report;
}

absl::StatusOr<Df11Model> Df11Model::Open(const std::string& dir) {
  DF11_ASSIGN_OR_RETURN(const ModelDirectory directory, ModelDirectory::Read(dir));
  return Open(directory);
}

absl::StatusOr<Df11Model> Df11Model::Open(const ModelDirectory& directory) {
  const std::string& dir_name = directory.path();
  if (!directory.is_df11()) {
    DF11_RETURN_IF_ERROR(RefuseLegacyRepository(dir_name));
    return absl::FailedPreconditionError(
        absl::StrCat(dir_name, " is not a DF11 model: config.json has no dfloat11_config"));
  }
  Df11Model model;
  model.dir_ = dir_name;
  model.config_ = directory.config();
  const Json& df11 = model.config_[format::kConfigKey];
  if (!df11.is_object()) return absl::DataLossError("dfloat11_config is not an object");
  if (df11.value("threads_per_block", Json()) != Json::array({format::kThreadsPerBlock}) ||
      df11.value("bytes_per_thread", Json()) != Json(format::kBytesPerThread)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "dfloat11_config has threads_per_block ", df11.value("threads_per_block", Json()).dump(),
        " and bytes_per_thread ", df11.value("bytes_per_thread", Json()).dump(),
        "; df11 reads [512] and 8 only"));
  }
  model.version_ = df11.value("version", Json("")).is_string()
                       ? df11.value("version", Json("")).get<std::string>()
                       : "";
  if (!df11.contains("pattern_dict"))
    return absl::DataLossError("dfloat11_config has no pattern_dict");
  // A malformed pattern dict inside a model's own config is a corrupt file.
  absl::StatusOr<PatternDict> dict = ParsePatternDict(df11["pattern_dict"].dump());
  if (!dict.ok()) {
    return absl::DataLossError(absl::StrCat(dir_name, "/config.json: ", dict.status().message()));
  }
  model.pattern_dict_ = std::move(*dict);
  DF11_ASSIGN_OR_RETURN(std::vector<CompiledPattern> patterns, Compile(model.pattern_dict_));
  DF11_ASSIGN_OR_RETURN(Checkpoint checkpoint, Checkpoint::Open(dir_name, /*all_files=*/true));
  model.checkpoint_ = std::make_unique<Checkpoint>(std::move(checkpoint));
  const Checkpoint& ckpt = *model.checkpoint_;
  DF11_RETURN_IF_ERROR(CheckNameLengths(ckpt.TensorNames(), absl::StatusCode::kDataLoss));
  absl::StatusOr<ArchitectureInfo> arch = ParseArchitecture(model.config_);

  const std::string suffix = absl::StrCat(".", format::kEncodedExponent);
  std::set<std::string> unit_tensors;
  for (const SafetensorsFile& file : ckpt.files()) {
    for (const TensorView& t : file.tensors()) {
      if (!absl::EndsWith(t.name, suffix)) continue;
      UnitEntry entry;
      entry.path = t.name.substr(0, t.name.size() - suffix.size());
      entry.file = &file;
      const CompiledPattern* match = nullptr;
      for (const CompiledPattern& p : patterns) {
        if (!std::regex_match(entry.path, p.regex)) continue;
        if (match != nullptr) {
          return absl::DataLossError(absl::StrCat("unit ", entry.path, " matches two patterns: `",
                                                  match->key, "` and `", p.key, "`"));
        }
        match = &p;
      }
      if (match == nullptr) {
        return absl::DataLossError(
            absl::StrCat("unit ", entry.path, " in ", file.path(), " matches no pattern_dict key"));
      }
      entry.pattern = match->key;
      entry.split_positions = std::make_unique<std::vector<int64_t>>();
      DF11_ASSIGN_OR_RETURN(UnitTensors tensors,
                            FindUnitTensors(file, entry.path, *entry.split_positions));
      for (const char* field : {format::kLuts, format::kEncodedExponent, format::kSignMantissa,
                                format::kOutputPositions, format::kGaps, format::kSplitPositions}) {
        unit_tensors.insert(absl::StrCat(entry.path, ".", field));
      }
      DF11_ASSIGN_OR_RETURN(Unit unit, Unit::Validate(tensors, entry.path));
      entry.unit = std::make_unique<Unit>(std::move(unit));

      // Weights and their shapes: from the file's own metadata when df11 wrote it, else from the
      // architecture in config.json.
      entry.weight_names = UnitWeightNames(entry.path, match->attrs);
      const size_t pieces = entry.split_positions->size() + 1;
      if (pieces != entry.weight_names.size()) {
        return absl::DataLossError(absl::StrCat("unit ", entry.path, " has ", pieces,
                                                " weights; its pattern lists ",
                                                entry.weight_names.size()));
      }
      // Shapes: from the file's own metadata when df11 wrote it, else from the architecture.
      Json listed = Json::array();
      if (auto meta = file.metadata().find(kShapesMetadataKey); meta != file.metadata().end()) {
        listed = Json::parse(meta->second, nullptr, /*allow_exceptions=*/false);
      }
      for (const std::string& w : entry.weight_names) {
        std::optional<std::vector<int64_t>> shape;
        for (const Json& item : listed.is_array() ? listed : Json::array()) {
          if (item.is_array() && item.size() == 2 && item[0] == w && item[1].is_array()) {
            shape.emplace();
            for (const Json& d : item[1])
              shape->push_back(d.is_number_integer() ? d.get<int64_t>() : -1);
          }
        }
        if (!shape.has_value() && arch.ok()) shape = WeightShape(*arch, w);
        if (!shape.has_value()) {
          return absl::DataLossError(
              absl::StrCat("unit ", entry.path, ": the shape of ", w, " is not known (",
                           arch.ok() ? "not a weight of " + arch->architecture
                                     : std::string(arch.status().message()),
                           ")"));
        }
        entry.shapes.push_back(*shape);
      }
      // The pieces between split points must have exactly the elements of their shapes.
      int64_t begin = 0;
      for (size_t i = 0; i < pieces; ++i) {
        const int64_t end = i + 1 < pieces ? (*entry.split_positions)[i]
                                           : static_cast<int64_t>(entry.unit->num_elements());
        int64_t elements = 1;
        for (int64_t d : entry.shapes[i]) {
          if (d <= 0 || __builtin_mul_overflow(elements, d, &elements)) elements = -1;
        }
        if (entry.shapes[i].empty() || elements != end - begin) {
          return absl::DataLossError(absl::StrCat("unit ", entry.path, ": ", entry.weight_names[i],
                                                  " has ", end - begin,
                                                  " elements, which does not fit its shape [",
                                                  absl::StrJoin(entry.shapes[i], ", "), "]"));
        }
        begin = end;
      }
      model.units_.push_back(std::move(entry));
    }
  }
  std::sort(model.units_.begin(), model.units_.end(),
            [](const UnitEntry& a, const UnitEntry& b) { return a.path < b.path; });
  std::set<std::string> weights;
  for (const UnitEntry& u : model.units_) {
    for (const std::string& w : u.weight_names) {
      if (!weights.insert(w).second) {
        return absl::DataLossError(absl::StrCat(w, " is produced by two DF11 units"));
      }
    }
  }
  for (const std::string& name : ckpt.TensorNames()) {
    if (unit_tensors.count(name)) continue;
    if (weights.count(name)) {
      return absl::DataLossError(
          absl::StrCat(name, " is stored both as a plain tensor and inside a DF11 unit"));
    }
    model.passthrough_.push_back(ckpt.Find(name));
  }
  return model;
}

absl::StatusOr<DecompressReport> DecompressModel(const Df11Model& model, const std::string& dst_dir,
                                                 const DecompressOptions& options) {
  const fs::path dst(dst_dir);
  DF11_RETURN_IF_ERROR(PrepareDestination(dst));
  OutputFiles out(dst);
  // Shards: one per unit (its weights and the other tensors of its file), one for the rest.
  std::map<const SafetensorsFile*, std::vector<const TensorView*>> others_by_file;
  std::vector<const TensorView*> rest;
  std::set<const SafetensorsFile*> unit_files;
  for (const auto& u : model.units()) unit_files.insert(u.file);
  for (const TensorView* t : model.passthrough()) {
    const SafetensorsFile* owner = nullptr;
    for (const SafetensorsFile& f : model.checkpoint().files()) {
      if (unit_files.count(&f) && f.Find(t->name) == t) owner = &f;
    }
    (owner != nullptr ? others_by_file[owner] : rest).push_back(t);
  }
  const int shards = static_cast<int>(model.units().size()) + (rest.empty() ? 0 : 1);
  auto shard_name = [shards](int i) {
    return shards == 1 ? std::string("model.safetensors")
                       : absl::StrFormat("model-%05d-of-%05d.safetensors", i + 1, shards);
  };
  Json weight_map = Json::object();
  DecompressReport report;
  report.shards = shards;
  uint64_t total = 0, done = 0;
  for (const auto& u : model.units()) total += 2 * u.unit->num_elements();
  ThreadPool pool(options.threads);
  std::vector<uint16_t> bf16;
  int shard = 0;
  for (const auto& u : model.units()) {
    bf16.assign(u.unit->num_elements(), 0);
    DF11_RETURN_IF_ERROR(DecodeParallel(*u.unit, bf16, &pool));
    SafetensorsWriter writer;
    int64_t begin = 0;
    for (size_t i = 0; i < u.weight_names.size(); ++i) {
      const int64_t end = i < u.split_positions->size() ? (*u.split_positions)[i]
                                                        : static_cast<int64_t>(bf16.size());
      DF11_RETURN_IF_ERROR(writer.Add(u.weight_names[i], DType::kBF16, u.shapes[i],
                                      AsBytes(bf16.data() + begin, 2 * (end - begin))));
      weight_map[u.weight_names[i]] = shard_name(shard);
      begin = end;
    }
    // A file may hold several units; its other tensors go with the first of them only.
    for (const TensorView* t : std::exchange(others_by_file[u.file], {})) {
      DF11_RETURN_IF_ERROR(writer.Add(t->name, t->dtype, t->shape, t->data));
      weight_map[t->name] = shard_name(shard);
    }
    writer.SetMetadata({{"format", "pt"}});
    DF11_RETURN_IF_ERROR(writer.WriteFile(out.Add(shard_name(shard))));
    report.bf16_bytes += writer.SerializedSize();
    ++report.units;
    ++shard;
    done += 2 * u.unit->num_elements();
    if (options.progress) options.progress(u.path, done, total);
  }
  bf16 = {};
  if (!rest.empty()) {
    SafetensorsWriter writer;
    for (const TensorView* t : rest) {
      DF11_RETURN_IF_ERROR(writer.Add(t->name, t->dtype, t->shape, t->data));
      weight_map[t->name] = shard_name(shard);
    }
    writer.SetMetadata({{"format", "pt"}});
    DF11_RETURN_IF_ERROR(writer.WriteFile(out.Add(shard_name(shard))));
    report.bf16_bytes += writer.SerializedSize();
  }
  if (shards > 1) {
    uint64_t tensor_bytes = 0;
    for (const auto& u : model.units()) tensor_bytes += 2 * u.unit->num_elements();
    for (const TensorView* t : model.passthrough()) tensor_bytes += t->data.size();
    Json index = {{"metadata", {{"total_size", tensor_bytes}}}, {"weight_map", weight_map}};
    DF11_RETURN_IF_ERROR(
        WriteTextFile(out.Add("model.safetensors.index.json"), index.dump(2) + "\n"));
  }
  Json config = model.config();
  config.erase(std::string(format::kConfigKey));
  DF11_RETURN_IF_ERROR(WriteTextFile(out.Add("config.json"), config.dump(2) + "\n"));
  DF11_RETURN_IF_ERROR(CopyFiles(model.dir(), out, nullptr));
  out.Commit();
  return report;
}

}  // namespace df11::codec
