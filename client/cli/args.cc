#include "client/cli/args.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "codec/base/duration.h"

namespace df11::cli {

absl::StatusOr<Args> Args::Parse(const std::vector<std::string>& argv,
                                 const std::set<std::string>& value_flags,
                                 const std::set<std::string>& bool_flags) {
  Args args;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "-h" && bool_flags.count("help")) {
      args.values_["help"] = {""};
      continue;
    }
    if (a.size() < 3 || a.compare(0, 2, "--") != 0) {
      args.positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2);
    std::optional<std::string> value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (bool_flags.count(name)) {
      if (value.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
      }
      args.values_[name] = {""};
    } else if (value_flags.count(name)) {
      if (!value.has_value()) {
        if (i + 1 >= argv.size()) {
          return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
        }
        value = argv[++i];
      }
      args.values_[name].push_back(*value);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown option --", name));
    }
  }
  return args;
}

std::optional<std::string> Args::Get(const std::string& flag) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> Args::GetAll(const std::string& flag) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return {};
  return it->second;
}

absl::StatusOr<int64_t> Args::GetInt(const std::string& flag, int64_t fallback, int64_t min,
                                     int64_t max) const {
  std::optional<std::string> v = Get(flag);
  if (!v.has_value()) return fallback;
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || errno != 0 || n < min || n > max) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " must be an integer from ", min,
                                                   " to ", max, ", not '", *v, "'"));
  }
  return n;
}

absl::StatusOr<double> Args::GetDouble(const std::string& flag, double fallback, double min,
                                       double max) const {
  std::optional<std::string> v = Get(flag);
  if (!v.has_value()) return fallback;
  errno = 0;
  char* end = nullptr;
  const double x = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0' || errno != 0 || !(x >= min && x <= max)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " must be a number from ", min, " to ", max, ", not '", *v, "'"));
  }
  return x;
}

absl::StatusOr<double> Args::GetSeconds(const std::string& flag, double fallback) const {
  std::optional<std::string> v = Get(flag);
  if (!v.has_value()) return fallback;
  absl::StatusOr<double> seconds = base::ParseDuration(*v);
  if (!seconds.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", seconds.status().message()));
  }
  return seconds;
}

}  // namespace df11::cli
