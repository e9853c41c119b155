// df11 download: a hub repository into the shared Hugging Face cache, as huggingface_hub's
// snapshot_download does; prints the snapshot directory as the last line of stdout.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/hub/cache.h"
#include "daemon/hub/settings.h"
#include "daemon/hub/snapshot_download.h"
#include "tools/df11/cli.h"
#include "tools/df11/commands.h"

namespace df11::tool {
namespace {

constexpr char kHelp[] =
    R"(Usage: df11 download REPO_ID [--revision R] [--cache-dir D] [--include GLOB]...

Downloads a Hugging Face hub repository (org/name) at a revision into the hub cache shared with
the huggingface_hub Python library, and prints the snapshot directory as the last line of stdout.
Files already in the cache are not downloaded again; an interrupted download resumes. Large files
are checked against their sha256 while they arrive; a corrupt one never enters the cache.

  --revision R     branch, tag or commit (default: main)
  --cache-dir D    the hub cache (default: $HF_HUB_CACHE, else $HF_HOME/hub, else
                   ~/.cache/huggingface/hub)
  --include GLOB   only files matching GLOB (fnmatch; '*' also matches '/'); may be repeated
  --token-file F   read the token from F (default: $HF_TOKEN, else $HF_HOME/token)
  --connections N  files downloaded at once (default 8)
  --quiet          no progress on stderr

Environment: HF_ENDPOINT (default https://huggingface.co), HF_HOME, HF_HUB_CACHE, HF_TOKEN,
HF_TOKEN_PATH, HF_HUB_OFFLINE (resolve from the cache only), HF_HUB_ETAG_TIMEOUT,
HF_HUB_DOWNLOAD_TIMEOUT.

Exit codes: 0 success, 1 failure (the message says why), 2 bad command line.
)";

}  // namespace

int RunDownload(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args = Args::Parse(
      argv, {"revision", "cache-dir", "include", "token-file", "connections"}, {"quiet", "help"});
  if (!args.ok()) return UsageError("download", std::string(args.status().message()));
  if (args->Has("help")) return std::fputs(kHelp, stdout), kExitOk;
  if (args->positional().size() != 1) return UsageError("download", "expected REPO_ID");
  absl::StatusOr<int64_t> connections = args->GetInt("connections", 8, 1, 64);
  if (!connections.ok()) return UsageError("download", std::string(connections.status().message()));

  const std::string repo_id = args->positional()[0];
  // A hub id only: a local directory of the same name is not what a download means.
  absl::StatusOr<hub::ModelSource> source = hub::ParseModelSource(
      absl::StrCat(repo_id, "@", args->Get("revision").value_or("main")), /*allow_local=*/false);
  if (!source.ok()) return UsageError("download", std::string(source.status().message()));

  hub::HubSettings settings =
      hub::ResolveHubSettings({.endpoint = "",
                               .cache_dir = args->Get("cache-dir").value_or(""),
                               .token_file = args->Get("token-file").value_or(""),
                               .offline = false,
                               .max_connections = static_cast<int>(*connections),
                               .max_download_bytes = 0});
  hub::SnapshotDownloader downloader(settings);
  absl::StatusOr<hub::Snapshot> snapshot = downloader.Resolve(*source, args->GetAll("include"));
  if (!snapshot.ok()) return Fail("download", snapshot.status());
  if (!snapshot->offline_reason.empty()) {
    std::fprintf(stderr, "df11 download: using the cache: %s\n", snapshot->offline_reason.c_str());
  }

  // Progress over all files together; callbacks come from the transfer threads.
  std::mutex mu;
  std::map<std::string, uint64_t> done;
  uint64_t total = 0;
  for (const hub::SnapshotFile& f : snapshot->files) total += f.size;
  const bool quiet = args->Has("quiet");
  Progress progress("download");
  const auto started = std::chrono::steady_clock::now();
  absl::Status fetched =
      downloader.Fetch(*snapshot, snapshot->files,
                       {.progress =
                            [&](const std::string& path, uint64_t bytes, uint64_t) {
                              if (quiet) return;
                              std::lock_guard lock(mu);
                              done[path] = bytes;
                              uint64_t sum = 0;
                              for (const auto& [p, b] : done) sum += b;
                              progress.Update(path, std::min(sum, total), total);
                            },
                        .file_ready = nullptr});
  progress.Done();
  if (!fetched.ok()) return Fail("download", fetched);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!quiet) {
    std::fprintf(stderr, "df11 download: %s@%s (commit %s): %zu files, %s, %.1f s\n",
                 repo_id.c_str(), source->revision.c_str(), snapshot->commit.c_str(),
                 snapshot->files.size(), HumanBytes(total).c_str(), seconds);
  }
  std::cout << snapshot->directory << std::endl;
  return kExitOk;
}

}  // namespace df11::tool
