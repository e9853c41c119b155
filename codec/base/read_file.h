// Reading a whole file into memory, with a cap: the one way the project reads configuration, token,
// certificate and model description files. A cap keeps a hostile or mistaken file (a 300 MB
// config.json, a FIFO, /dev/zero) from costing memory or blocking a thread.
//
//   DF11_ASSIGN_OR_RETURN(std::string text, base::ReadFile(dir / "config.json", 1 << 20));
#ifndef DF11_CODEC_BASE_READ_FILE_H_
#define DF11_CODEC_BASE_READ_FILE_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace df11::base {

// The bytes of the regular file at `path`. kNotFound when it does not exist; kInvalidArgument
// (with both sizes) when it holds more than `max_bytes`, or when it is not a regular file (a
// directory, a FIFO, a device); kPermissionDenied when it cannot be opened; kDataLoss on a read
// error. A file that grows while it is read is refused as too large, never read past the cap.
absl::StatusOr<std::string> ReadFile(const std::filesystem::path& path, uint64_t max_bytes);

// Caps by kind of file, each far above what real files hold.
// One bearer token, or a hub cache ref (a commit hash).
inline constexpr uint64_t kMaxTokenFileBytes = uint64_t{64} << 10;
// The daemon's YAML configuration, catalog and tokens files, PEM certificates and keys, a pattern
// dict.
inline constexpr uint64_t kMaxSettingsFileBytes = uint64_t{16} << 20;
// A model's config.json, generation_config.json and chat_template.jinja (real ones: under 100 KB;
// parsing costs several times the size, and any user can name a hub model).
inline constexpr uint64_t kMaxModelConfigBytes = uint64_t{1} << 20;
// tokenizer_config.json, which may list many added tokens.
inline constexpr uint64_t kMaxTokenizerConfigBytes = uint64_t{16} << 20;
// tokenizer.json (Gemma 3's: 33 MB), and any other JSON file of a model folder.
inline constexpr uint64_t kMaxTokenizerBytes = uint64_t{256} << 20;
// model.safetensors.index.json (the largest real ones: a few MB).
inline constexpr uint64_t kMaxIndexFileBytes = uint64_t{64} << 20;

// The cap of a model folder's description file `name` (config.json, tokenizer.json,
// chat_template.jinja, ...; any other .json or .jinja file too), which the hub client checks
// against a listing before downloading it.
uint64_t MaxModelFileBytes(std::string_view name);

}  // namespace df11::base

#endif  // DF11_CODEC_BASE_READ_FILE_H_
