// Raw TCP to a server on 127.0.0.1, for tests that must send what an HTTP client library would
// not (trickled headers, endless chunked bodies, malformed requests) or hold connections open.
//
//   const int fd = ConnectLoopback(port);
//   SendAll(fd, "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
//   const std::string answer = ReadUntilClosed(fd, std::chrono::seconds(10));
#ifndef DF11_TESTS_TESTING_LOOPBACK_H_
#define DF11_TESTS_TESTING_LOOPBACK_H_

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <string_view>

namespace df11::testing {

// A blocking TCP connection to 127.0.0.1:`port`; -1 on failure.
inline int ConnectLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Sends all of `data`; false once the connection fails.
inline bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Everything the server sends until it closes the connection, or until `timeout` passes.
inline std::string ReadUntilClosed(int fd, std::chrono::milliseconds timeout) {
  std::string out;
  const auto until = std::chrono::steady_clock::now() + timeout;
  char buf[65536];
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace df11::testing

#endif  // DF11_TESTS_TESTING_LOOPBACK_H_
