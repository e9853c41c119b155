// Where a client may point df11d at local files: the model_roots of the configuration. A
// LoadModel or EstimateModel source that is a path must resolve (symlinks and ".." followed) to a
// directory under one of the roots, and so must every file and folder below it, so that a client
// cannot make df11d read a file outside them. Hub ids pass: they name no local file.
//
//   DF11_ASSIGN_OR_RETURN(CheckedSource checked, CheckModelRoots(request.source(), roots));
//   ... load checked.source (hub only when checked.hub) ...
#ifndef DF11_DAEMON_SERVER_MODEL_ROOTS_H_
#define DF11_DAEMON_SERVER_MODEL_ROOTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace df11::server {

// What a load may read: a hub id as given (`hub`: never to be taken for a directory that appears
// later), or a directory by its real path, so that the load opens the folder that was checked.
struct CheckedSource {
  std::string source;
  bool hub = false;
};

// A hub id, or a directory whose real path, and every entry's below it, lies under a root
// (compared by whole path components: /models does not contain /models-evil); a dangling link
// below it is refused, since what it names could appear later. PERMISSION_DENIED naming the roots
// otherwise; NOT_FOUND for a path under a root that does not exist. Whoever may write under a root
// is trusted: files added there after the check are read as they are.
absl::StatusOr<CheckedSource> CheckModelRoots(const std::string& source,
                                              const std::vector<std::string>& roots);

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_MODEL_ROOTS_H_
