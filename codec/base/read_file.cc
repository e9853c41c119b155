#include "codec/base/read_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace df11::base {

uint64_t MaxModelFileBytes(std::string_view name) {
  if (name == "config.json" || name == "generation_config.json" || name.ends_with(".jinja")) {
    return kMaxModelConfigBytes;
  }
  if (name == "tokenizer_config.json") return kMaxTokenizerConfigBytes;
  if (name == "model.safetensors.index.json") return kMaxIndexFileBytes;
  return kMaxTokenizerBytes;
}

absl::StatusOr<std::string> ReadFile(const std::filesystem::path& path, uint64_t max_bytes) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (status.type() == std::filesystem::file_type::not_found) {
    return absl::NotFoundError(absl::StrCat(path.string(), " does not exist"));
  }
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot read ", path.string(), ": ", ec.message()));
  }
  if (status.type() != std::filesystem::file_type::regular) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), " is not a regular file"));
  }
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (!ec && size > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), " is ", size,
                                                   " bytes, more than the ", max_bytes,
                                                   " bytes this file may hold"));
  }
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (file == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot open ", path.string(), ": ", std::strerror(errno)));
  }
  // Read to the end, never past the cap: the size seen above may be stale (the file grew) or
  // wrong (/proc files say 0).
  std::string text;
  text.reserve(static_cast<size_t>(ec ? 0 : size));
  char chunk[64 * 1024];
  for (size_t got; (got = std::fread(chunk, 1, sizeof(chunk), file.get())) > 0;) {
    if (text.size() + got > max_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(path.string(), " holds more than the ",
                                                     max_bytes, " bytes this file may hold"));
    }
    text.append(chunk, got);
  }
  if (std::ferror(file.get())) {
    return absl::DataLossError(absl::StrCat("error reading ", path.string()));
  }
  return text;
}

}  // namespace df11::base
