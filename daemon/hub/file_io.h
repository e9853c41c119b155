// Whole reads and writes at an offset (pread/pwrite until done, EINTR retried), as the hub cache's
// blob writer and the peers' blob reader need them.
#ifndef DF11_DAEMON_HUB_FILE_IO_H_
#define DF11_DAEMON_HUB_FILE_IO_H_

#include <cstddef>
#include <cstdint>

namespace df11::hub {

// False on an error (errno says which) or, for a read, an early end of the file.
bool PreadAll(int fd, char* data, size_t size, uint64_t offset);
bool PwriteAll(int fd, const char* data, size_t size, uint64_t offset);

}  // namespace df11::hub

#endif  // DF11_DAEMON_HUB_FILE_IO_H_
