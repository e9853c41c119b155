// The df11ctl commands, each a function of its parsed arguments, a client and the console
// (client/ctl/ctl.h). Internal to df11ctl; a new command is a Run function plus an entry in
// AllCommands() (ctl.cc):
//
//   int RunGet(Context& c) {
//     absl::StatusOr<v1::ModelInfo> m = c.client.GetModel(c.args.positional()[0]);
//     if (!m.ok()) return Fail(c, m.status());
//     if (c.json) return PrintJson(c, *m);
//     c.console.out << FormatModelInfo(*m);
//     return kExitOk;
//   }
#ifndef DF11_CLIENT_CTL_COMMANDS_H_
#define DF11_CLIENT_CTL_COMMANDS_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/cli/args.h"
#include "client/ctl/ctl.h"
#include "client/df11_client.h"
#include "google/protobuf/message.h"

namespace df11::ctl {

struct Context {
  std::string command;  // its name, for messages
  const cli::Args& args;
  client::Df11Client& client;
  Console& console;
  bool json;  // --json
};

struct Command {
  std::string name;
  std::string synopsis;  // the usage line's arguments
  std::string summary;   // one line for `df11ctl --help`
  std::string help;      // the rest of `df11ctl NAME --help`
  std::set<std::string> value_flags;
  std::set<std::string> bool_flags;  // --json and --help are added to every command
  int (*run)(Context& context);
};

// Every command, in the order `df11ctl --help` lists them.
const std::vector<Command>& AllCommands();

// Prints "df11ctl CMD: CODE: message" on stderr; returns kExitFailed.
int Fail(Context& context, const absl::Status& status);
// Prints "df11ctl CMD: message" and the help hint on stderr; returns kExitUsage.
int UsageError(Context& context, const std::string& message);
// Prints `message` as one JSON line on stdout; kExitOk, or Fail() if it cannot be printed.
int PrintJson(Context& context, const google::protobuf::Message& message);

int RunLoad(Context& context);
int RunUnload(Context& context);
int RunList(Context& context);
int RunGet(Context& context);
int RunEstimate(Context& context);
int RunGenerate(Context& context);
int RunStatus(Context& context);
int RunTop(Context& context);

}  // namespace df11::ctl

#endif  // DF11_CLIENT_CTL_COMMANDS_H_
