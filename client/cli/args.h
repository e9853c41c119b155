// Command-line arguments shared by the df11 and df11ctl programs: positionals, `--name value`,
// `--name=value` and boolean `--name`, with typed getters that return kInvalidArgument naming the
// flag, and durations such as "30s".
//
//   absl::StatusOr<Args> args = Args::Parse(argv, {"threads"}, {"json", "help"});
//   if (!args.ok()) return UsageError(...);
//   absl::StatusOr<int64_t> threads = args->GetInt("threads", 4, 1, 1024);
#ifndef DF11_CLIENT_CLI_ARGS_H_
#define DF11_CLIENT_CLI_ARGS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace df11::cli {

class Args {
 public:
  // `value_flags` take a value, `bool_flags` do not ("-h" counts as --help when "help" is one).
  // A value flag may be given more than once (GetAll). kInvalidArgument for an unknown flag, a
  // missing value or a value given to a boolean flag.
  static absl::StatusOr<Args> Parse(const std::vector<std::string>& argv,
                                    const std::set<std::string>& value_flags,
                                    const std::set<std::string>& bool_flags);

  const std::vector<std::string>& positional() const { return positional_; }
  bool Has(const std::string& flag) const { return values_.count(flag) > 0; }
  // The flag's last value; nullopt when absent ("" for a boolean flag that is present).
  std::optional<std::string> Get(const std::string& flag) const;
  // Every value of the flag in command-line order; empty when absent.
  std::vector<std::string> GetAll(const std::string& flag) const;
  // The flag's value as an integer within [min, max]; `fallback` when absent.
  absl::StatusOr<int64_t> GetInt(const std::string& flag, int64_t fallback, int64_t min,
                                 int64_t max) const;
  // The flag's value as a number within [min, max]; `fallback` when absent.
  absl::StatusOr<double> GetDouble(const std::string& flag, double fallback, double min,
                                   double max) const;
  // The flag's value as a duration in seconds (base::ParseDuration), at least 0; `fallback` when absent.
  absl::StatusOr<double> GetSeconds(const std::string& flag, double fallback) const;

 private:
  std::vector<std::string> positional_;
  std::map<std::string, std::vector<std::string>> values_;
};

}  // namespace df11::cli

#endif  // DF11_CLIENT_CLI_ARGS_H_
