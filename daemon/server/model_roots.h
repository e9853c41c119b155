// Where a client may point df11d at local files: the model_roots of the configuration. A
// LoadModel or EstimateModel source that is a path must resolve (symlinks and ".." followed) to a
// directory under one of the roots, and so must every file and folder below it, so that a client
// cannot make df11d read a file outside them. Hub ids pass: they name no local file.
//
//   if (absl::Status s = CheckModelRoots(request.source(), config.model_roots); !s.ok()) ...
#ifndef DF11_DAEMON_SERVER_MODEL_ROOTS_H_
#define DF11_DAEMON_SERVER_MODEL_ROOTS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace df11::server {

// OK for a hub id, or a directory whose real path, and every entry's below it, lies under a root
// (compared by whole path components: /models does not contain /models-evil). PERMISSION_DENIED
// naming the roots otherwise; NOT_FOUND for a path under a root that does not exist.
absl::Status CheckModelRoots(const std::string& source, const std::vector<std::string>& roots);

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_MODEL_ROOTS_H_
