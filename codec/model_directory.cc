#include "codec/model_directory.h"

#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "codec/base/read_file.h"
#include "codec/format.h"

namespace df11::codec {
namespace {

using Json = nlohmann::ordered_json;

absl::StatusOr<Json> ReadJsonObject(const std::filesystem::path& path) {
  absl::StatusOr<std::string> text = base::ReadFile(path, base::kMaxModelConfigBytes);
  if (!text.ok()) return text.status();
  Json j = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), " is not a JSON object"));
  }
  return j;
}

}  // namespace

absl::StatusOr<ModelDirectory> ModelDirectory::Read(const std::string& path) {
  const std::filesystem::path dir(path);
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat(path, " has no config.json (it is not a directory)"));
  }
  ModelDirectory d;
  d.path_ = path;
  absl::StatusOr<Json> config = ReadJsonObject(dir / "config.json");
  if (absl::IsNotFound(config.status())) {
    return absl::NotFoundError(absl::StrCat(path, " has no config.json"));
  }
  if (!config.ok()) return config.status();
  d.config_ = *std::move(config);
  absl::StatusOr<Json> generation = ReadJsonObject(dir / "generation_config.json");
  if (generation.ok()) {
    d.generation_config_ = *std::move(generation);
  } else if (!absl::IsNotFound(generation.status())) {
    return generation.status();
  }
  return d;
}

bool ModelDirectory::is_df11() const { return config_.contains(format::kConfigKey); }

}  // namespace df11::codec
