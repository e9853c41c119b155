#include "daemon/hub/cache.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "codec/base/read_file.h"

namespace df11::hub {
namespace {

namespace fs = std::filesystem;

// The characters of repo id parts and revision parts.
bool IsNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
}

// A part of a repo id: letters, digits, '-', '_', '.', not starting with '.'.
bool IsRepoPart(absl::string_view part) {
  return !part.empty() && part.front() != '.' && part.size() <= 96 &&
         std::all_of(part.begin(), part.end(), IsNameChar);
}

bool IsLowerHex(absl::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) {
    return absl::ascii_isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f');
  });
}

// A branch, tag or commit as the hub names them, kept inside refs/: letters, digits, '-', '_',
// '.', and '/' between non-empty parts (refs/pr/1); no part "." or "..".
bool IsRevision(absl::string_view revision) {
  if (revision.empty() || revision.size() > 256) return false;
  for (absl::string_view part : absl::StrSplit(revision, '/')) {
    if (part.empty() || part == "." || part == ".." ||
        !std::all_of(part.begin(), part.end(), IsNameChar)) {
      return false;
    }
  }
  return true;
}

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

}  // namespace

bool IsCommit(absl::string_view revision) { return revision.size() == 40 && IsLowerHex(revision); }

bool IsEtag(absl::string_view etag) {
  return (etag.size() == 40 || etag.size() == 64) && IsLowerHex(etag);
}

bool IsRepoFilePath(absl::string_view path) {
  if (path.empty() || path.size() > 1024) return false;
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part.empty() || part == "." || part == "..") return false;
  }
  return std::none_of(path.begin(), path.end(), [](char c) {
    return c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
}

std::string RepoFolderName(const std::string& repo_id) {
  return absl::StrCat("models--", absl::StrReplaceAll(repo_id, {{"/", "--"}}));
}

absl::StatusOr<ModelSource> ParseModelSource(const std::string& source, bool allow_local) {
  if (source.empty()) return absl::InvalidArgumentError("source: empty");
  std::error_code ec;
  if (allow_local && fs::is_directory(source, ec)) {
    return ModelSource{.is_hub = false, .directory = source, .repo_id = "", .revision = ""};
  }
  absl::string_view id = source, revision = "main";
  if (const size_t at = source.find('@'); at != std::string::npos) {
    id = absl::string_view(source).substr(0, at);
    revision = absl::string_view(source).substr(at + 1);
  }
  const std::vector<absl::string_view> parts = absl::StrSplit(id, '/');
  if (parts.size() != 2 || !IsRepoPart(parts[0]) || !IsRepoPart(parts[1])) {
    if (!allow_local) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", id, "\" is not a hub id org/name (letters, digits, '-', '_', '.')"));
    }
    return absl::NotFoundError(absl::StrCat(
        "source: ", source, " is neither a directory nor a hub id org/name[@revision]"));
  }
  if (!IsRevision(revision)) {
    return absl::InvalidArgumentError(
        absl::StrCat("source: revision \"", revision, "\" of ", id,
                     " is not a branch, tag or commit (letters, digits, '-', '_', '.', '/')"));
  }
  return ModelSource{.is_hub = true,
                     .directory = "",
                     .repo_id = std::string(id),
                     .revision = std::string(revision)};
}

std::string HubCacheDir(const std::string& configured) {
  if (!configured.empty()) return configured;
  if (std::string v = Env("HF_HUB_CACHE"); !v.empty()) return v;
  if (std::string v = Env("HUGGINGFACE_HUB_CACHE"); !v.empty()) return v;
  if (std::string v = Env("HF_HOME"); !v.empty()) return (fs::path(v) / "hub").string();
  if (std::string v = Env("XDG_CACHE_HOME"); !v.empty()) {
    return (fs::path(v) / "huggingface" / "hub").string();
  }
  return (fs::path(Env("HOME")) / ".cache" / "huggingface" / "hub").string();
}

absl::StatusOr<CachedSnapshot> FindCachedSnapshot(const std::string& cache_dir,
                                                  const ModelSource& source) {
  const fs::path repo = fs::path(cache_dir) / RepoFolderName(source.repo_id);
  const std::string not_cached =
      absl::StrCat(source.repo_id, "@", source.revision, " is not in the hub cache ", cache_dir,
                   " and downloading from the hub is not available in this build");
  std::error_code ec;
  if (!fs::is_directory(repo, ec)) return absl::UnavailableError(not_cached);
  CachedSnapshot snapshot;
  if (IsCommit(source.revision)) {
    snapshot.commit = source.revision;
  } else {
    const absl::StatusOr<std::string> ref =
        base::ReadFile(repo / "refs" / source.revision, base::kMaxTokenFileBytes);
    if (ref.ok()) snapshot.commit = std::string(absl::StripAsciiWhitespace(*ref));
    if (!ref.ok() || !IsCommit(snapshot.commit)) {
      return absl::UnavailableError(absl::StrCat(not_cached, " (no refs/", source.revision, ")"));
    }
  }
  const fs::path dir = repo / "snapshots" / snapshot.commit;
  if (!fs::is_regular_file(dir / "config.json", ec)) {
    return absl::UnavailableError(
        absl::StrCat(not_cached, " (snapshot ", snapshot.commit, " has no config.json)"));
  }
  snapshot.directory = dir.string();
  return snapshot;
}

}  // namespace df11::hub
