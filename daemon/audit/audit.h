// The audit log: one JSON line for each security-relevant event, written by a JSON encoder to its
// own sink: a file (auth.audit_file) or, by default, stderr among df11d's other log lines, which
// log shippers pick out by its "audit" key:
//
//   {"audit":"load","time":"2026-11-25T04:30:00.123Z","tenant":"team-a","token":"ci",
//    "peer":"ipv4:10.0.0.7:51234","source":"org/name","model":"chat","outcome":"OK"}
//
// Events: load, unload, eviction, authentication_failure, permission_refusal, quota_refusal,
// model_failed. A token appears by its name in the tokens file, never itself. No field can break
// the line: the encoder escapes control characters, and the daemon's other log lines escape
// theirs (server/log.h), so no client-supplied string starts a line that parses as a record.
#ifndef DF11_DAEMON_AUDIT_AUDIT_H_
#define DF11_DAEMON_AUDIT_AUDIT_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace df11::audit {

struct Event {
  std::string event;
  std::string tenant;
  std::string token;  // the token's name
  std::string peer;   // the client's address
  std::string source;
  std::string model;
  absl::Status outcome;  // written as its code name: OK, PERMISSION_DENIED, ...
  std::string message;   // why, for what was refused or failed
};

// The record of `event` as one JSON line, '\n' included (empty fields left out; invalid UTF-8
// replaced).
std::string Encode(const Event& event);

// Writes `event` to the sink; safe from any thread.
void Record(const Event& event);

// From now on, records are appended to `path` (created with mode 0600), each flushed as it is
// written. kInvalidArgument naming the path and the reason when it cannot be opened for appending.
absl::Status UseFile(const std::string& path);

// `text` with line breaks and other control characters written as escapes, for the daemon's other
// log lines: \n, \r, \xNN, and the Unicode line breaks as \u0085, \u2028, \u2029. Tabs and other
// UTF-8 stay as they are.
std::string EscapeForLog(std::string_view text);

}  // namespace df11::audit

#endif  // DF11_DAEMON_AUDIT_AUDIT_H_
