#include "daemon/server/model_roots.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/hub/cache.h"

namespace df11::server {
namespace {

namespace fs = std::filesystem;

// A model folder has a handful of files; a walk this long is not one.
constexpr int kMaxEntries = 10000;

bool Within(const fs::path& path, const fs::path& root) {
  auto [r, p] = std::mismatch(root.begin(), root.end(), path.begin(), path.end());
  return r == root.end();
}

}  // namespace

absl::StatusOr<CheckedSource> CheckModelRoots(const std::string& source,
                                              const std::vector<std::string>& roots) {
  std::error_code ec;
  // A hub id that is not also a directory here is fetched from the hub, not read from disk.
  if (!fs::is_directory(source, ec) && hub::ParseModelSource(source, false).ok()) {
    return CheckedSource{.source = source, .hub = true};
  }
  std::vector<fs::path> real_roots;
  for (const std::string& r : roots) {
    const fs::path real = fs::canonical(r, ec);
    if (!ec) real_roots.push_back(real);
  }
  auto allowed = [&](const fs::path& p) {
    return std::any_of(real_roots.begin(), real_roots.end(),
                       [&](const fs::path& r) { return Within(p, r); });
  };
  const std::string roots_text = roots.empty() ? "none" : absl::StrJoin(roots, ", ");
  auto denied = [&](const std::string& what) {
    return absl::PermissionDeniedError(
        absl::StrCat(what, " is not under model_roots (", roots_text, ")"));
  };
  const fs::path dir = fs::canonical(source, ec);
  if (ec) {
    // Say "not found" only where the caller may look: no probing for paths elsewhere.
    if (allowed(fs::absolute(source, ec).lexically_normal())) {
      return absl::NotFoundError(absl::StrCat("source: no directory ", source));
    }
    return denied(absl::StrCat("source ", source));
  }
  if (!allowed(dir)) return denied(absl::StrCat("source ", source));
  if (!fs::is_directory(dir, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("source: ", source, " is not a directory"));
  }
  int entries = 0;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (++entries > kMaxEntries) {
      return absl::InvalidArgumentError(
          absl::StrCat("source: ", source, " holds more than ", kMaxEntries, " entries"));
    }
    std::error_code entry_ec;
    const fs::path real = fs::canonical(it->path(), entry_ec);
    // A link to nothing: what it names could appear later, anywhere.
    if (entry_ec) return denied(absl::StrCat(it->path().string(), ", a link to nothing,"));
    // Where the link leads is not the caller's to learn: only the path it gave is named.
    if (!allowed(real)) return denied(absl::StrCat(it->path().string(), ", a link out of them,"));
  }
  if (ec) return absl::PermissionDeniedError(absl::StrCat("source: cannot list ", source));
  return CheckedSource{.source = dir.string(), .hub = false};
}

}  // namespace df11::server
