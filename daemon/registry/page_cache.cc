#include "daemon/registry/page_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace df11::registry {
namespace {

absl::Status FileError(const char* what, const std::string& path) {
  const int error = errno;
  const std::string message = absl::StrCat("cannot ", what, " ", path, ": ", std::strerror(error));
  return error == ENOENT ? absl::NotFoundError(message) : absl::InternalError(message);
}

}  // namespace

absl::StatusOr<uint64_t> PopulateFile(const std::string& path, uint64_t step,
                                      const std::function<bool(uint64_t)>& on_progress) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return FileError("open", path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    absl::Status error = FileError("stat", path);
    ::close(fd);
    return error;
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  void* mapped = size > 0 ? ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0) : nullptr;
  if (mapped == MAP_FAILED) {
    absl::Status error = FileError("map", path);
    ::close(fd);
    return error;
  }
  ::close(fd);  // the mapping keeps the file
  absl::Status status;
  char* bytes = static_cast<char*>(mapped);
  for (uint64_t done = 0; done < size && status.ok();) {
    const uint64_t n = std::min(step, size - done);
    if (::madvise(bytes + done, n, MADV_POPULATE_READ) != 0) {
      // A file cut short under the mapping (EFAULT), an I/O error (EIO), or a kernel older than
      // Linux 5.14, which lacks MADV_POPULATE_READ (EINVAL).
      status =
          errno == EINVAL
              ? absl::FailedPreconditionError(absl::StrCat(
                    "cannot read ", path, ": this kernel lacks MADV_POPULATE_READ (Linux 5.14+)"))
              : FileError("read", path);
      break;
    }
    done += n;
    if (!on_progress(done)) status = absl::CancelledError("load cancelled");
  }
  if (size == 0 && !on_progress(0)) status = absl::CancelledError("load cancelled");
  if (mapped != nullptr) ::munmap(mapped, size);
  if (!status.ok()) return status;
  return size;
}

}  // namespace df11::registry
