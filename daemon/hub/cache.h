// Model sources and the Hugging Face hub cache shared with the `huggingface_hub` Python library
// (models--{org}--{name}/refs/{revision} holding a commit, snapshots/{commit}/ holding the files):
// finding a hub model that is already in the cache, with no network access. Downloading into the
// cache is the hub client's work.
//
//   DF11_ASSIGN_OR_RETURN(ModelSource s, ParseModelSource("org/name@main"));
//   DF11_ASSIGN_OR_RETURN(CachedSnapshot snap, FindCachedSnapshot(HubCacheDir(""), s));
//   Load(snap.directory);
#ifndef DF11_DAEMON_HUB_CACHE_H_
#define DF11_DAEMON_HUB_CACHE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace df11::hub {

// What LoadModel was given: a local directory, or a hub repository at a revision.
struct ModelSource {
  bool is_hub = false;
  std::string directory;  // local
  std::string repo_id;    // hub: org/name
  std::string revision;   // hub: a branch, tag or commit; "main" when not given
};

// A path that names an existing directory is local; otherwise `org/name[@revision]` (letters,
// digits, '-', '_', '.'; no leading '.') is a hub id, whose revision (default "main") may also hold
// '/' between parts, none of them "." or "..". kInvalidArgument for an empty source or a revision
// outside that; kNotFound for anything else (a path that does not exist), naming it. With
// `allow_local` false only hub ids are accepted (kInvalidArgument otherwise).
absl::StatusOr<ModelSource> ParseModelSource(const std::string& source, bool allow_local = true);

// The hub cache directory: `configured` if not empty, else $HF_HUB_CACHE, else
// $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub.
std::string HubCacheDir(const std::string& configured);

struct CachedSnapshot {
  std::string directory;  // snapshots/{commit}
  std::string commit;     // 40 hex digits
};

// models--{org}--{name}: the repository's folder in the cache (and under .locks/).
std::string RepoFolderName(const std::string& repo_id);

// A full commit id: 40 lower-case hex digits.
bool IsCommit(absl::string_view revision);

// A blob name: a git blob sha1 (40 hex) or a sha256 (64 hex), lower case.
bool IsEtag(absl::string_view etag);

// A file path inside a repository that stays inside it: relative, '/'-separated non-empty parts,
// none "." or "..", no '\\' or control characters, at most 1024 bytes.
bool IsRepoFilePath(absl::string_view path);

// The snapshot of `source` (a hub source) in `cache_dir`: `revision` itself when it is a full
// commit, else the commit that refs/{revision} names. kUnavailable when the repository or the
// revision is not in the cache or the snapshot has no config.json (the message says what is
// missing and that downloading is not available).
absl::StatusOr<CachedSnapshot> FindCachedSnapshot(const std::string& cache_dir,
                                                  const ModelSource& source);

}  // namespace df11::hub

#endif  // DF11_DAEMON_HUB_CACHE_H_
