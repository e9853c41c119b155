// Shared pieces of the df11 subcommands: argument parsing, progress display, error reporting.
#ifndef DF11_TOOLS_DF11_CLI_H_
#define DF11_TOOLS_DF11_CLI_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace df11::tool {

// Exit codes of every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;     // the operation failed (the message says why)
inline constexpr int kExitUsage = 2;     // bad command line
inline constexpr int kExitMismatch = 3;  // verify: the data differs from what it should be

// Command-line arguments: positionals, `--name value`, `--name=value` and boolean `--name`.
class Args {
 public:
  // `value_flags` take a value, `bool_flags` do not ("-h" counts as --help when "help" is one).
  // kInvalidArgument for an unknown flag or a missing value.
  static absl::StatusOr<Args> Parse(const std::vector<std::string>& argv,
                                    const std::set<std::string>& value_flags,
                                    const std::set<std::string>& bool_flags);

  const std::vector<std::string>& positional() const { return positional_; }
  bool Has(const std::string& flag) const { return values_.count(flag) > 0; }
  std::optional<std::string> Get(const std::string& flag) const;
  // The flag's value as an integer within [min, max]; `fallback` when absent.
  absl::StatusOr<int64_t> GetInt(const std::string& flag, int64_t fallback, int64_t min,
                                 int64_t max) const;
  // The flag's value as a number within [min, max]; `fallback` when absent.
  absl::StatusOr<double> GetDouble(const std::string& flag, double fallback, double min,
                                   double max) const;

 private:
  std::vector<std::string> positional_;
  std::map<std::string, std::string> values_;
};

// A progress bar on stderr when it is a terminal; otherwise one line per tenth of the work.
class Progress {
 public:
  explicit Progress(std::string label);
  ~Progress();
  void Update(const std::string& item, uint64_t done, uint64_t total);
  void Done();

 private:
  std::string label_;
  bool tty_;
  bool open_ = false;
  int last_permille_ = -1;
};

// Prints "df11 <command>: <status>" on stderr and returns kExitError.
int Fail(const std::string& command, const absl::Status& status);
// Prints "df11 <command>: <message>" and the command's usage hint; returns kExitUsage.
int UsageError(const std::string& command, const std::string& message);

std::string HumanBytes(uint64_t bytes);

}  // namespace df11::tool

#endif  // DF11_TOOLS_DF11_CLI_H_
