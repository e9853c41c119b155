// Shared pieces of the df11 subcommands: exit codes and error reporting; argument parsing and
// progress display come from client/cli.
#ifndef DF11_TOOLS_DF11_CLI_H_
#define DF11_TOOLS_DF11_CLI_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/cli/args.h"
#include "client/cli/progress.h"

namespace df11::tool {

// Exit codes of every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;     // the operation failed (the message says why)
inline constexpr int kExitUsage = 2;     // bad command line
inline constexpr int kExitMismatch = 3;  // verify: the data differs from what it should be

// Generic pieces from client/cli (shared with df11ctl), named unqualified by the subcommands.
using ::df11::cli::Args;
using ::df11::cli::HumanBytes;
using ::df11::cli::Progress;

// Prints "df11 <command>: <status>" on stderr and returns kExitError.
int Fail(const std::string& command, const absl::Status& status);
// Prints "df11 <command>: <message>" and the command's usage hint; returns kExitUsage.
int UsageError(const std::string& command, const std::string& message);
// A comma-separated list of integers in [lo, hi]; kInvalidArgument naming `flag` otherwise.
absl::StatusOr<std::vector<int64_t>> IntList(const std::string& text, int64_t lo, int64_t hi,
                                             const std::string& flag);

}  // namespace df11::tool

#endif  // DF11_TOOLS_DF11_CLI_H_
