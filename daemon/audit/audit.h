// The audit log: one JSON line on stderr for each security-relevant event, among df11d's other log
// lines, which log shippers pick out by its "audit" key:
//
//   {"audit":"load","time":"2026-11-25T04:30:00.123Z","tenant":"team-a","token":"ci",
//    "peer":"ipv4:10.0.0.7:51234","source":"org/name","model":"chat","outcome":"OK"}
//
// Events: load, unload, eviction, authentication_failure, permission_refusal. A token appears by
// its name in the tokens file, never itself.
#ifndef DF11_DAEMON_AUDIT_AUDIT_H_
#define DF11_DAEMON_AUDIT_AUDIT_H_

#include <string>

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

// Writes `event` as one line (empty fields left out); safe from any thread.
void Record(const Event& event);

}  // namespace df11::audit

#endif  // DF11_DAEMON_AUDIT_AUDIT_H_
