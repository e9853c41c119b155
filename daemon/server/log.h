// The daemon's log: one line per event on stderr, with a UTC timestamp, safe from any thread. A
// message is escaped (audit::EscapeForLog), so that no client-supplied string in it (a model
// name, a source, an error) can end the line and start another, such as a forged audit record.
//
//   Log("loaded demo (6365914 bytes)");
#ifndef DF11_DAEMON_SERVER_LOG_H_
#define DF11_DAEMON_SERVER_LOG_H_

#include <string>

namespace df11::server {

void Log(const std::string& message);

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_LOG_H_
