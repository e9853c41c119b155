#include "tools/df11/cli.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace df11::tool {

absl::StatusOr<Args> Args::Parse(const std::vector<std::string>& argv,
                                 const std::set<std::string>& value_flags,
                                 const std::set<std::string>& bool_flags) {
  Args args;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "-h" && bool_flags.count("help")) {
      args.values_["help"] = "";
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
      if (value.has_value()) return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
      args.values_[name] = "";
    } else if (value_flags.count(name)) {
      if (!value.has_value()) {
        if (i + 1 >= argv.size()) return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
        value = argv[++i];
      }
      args.values_[name] = *value;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown option --", name));
    }
  }
  return args;
}

std::optional<std::string> Args::Get(const std::string& flag) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return std::nullopt;
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
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " must be an integer from ", min, " to ", max, ", not '", *v, "'"));
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

Progress::Progress(std::string label) : label_(std::move(label)), tty_(isatty(STDERR_FILENO)) {}

Progress::~Progress() { Done(); }

void Progress::Update(const std::string& item, uint64_t done, uint64_t total) {
  const int permille = total == 0 ? 1000 : static_cast<int>(1000 * done / total);
  if (!tty_) {
    // Logs (CI, nohup) get one line per tenth.
    if (permille / 100 == last_permille_ / 100) return;
    last_permille_ = permille;
    std::fprintf(stderr, "%s: %3d%% %s / %s %s\n", label_.c_str(), permille / 10,
                 HumanBytes(done).c_str(), HumanBytes(total).c_str(), item.c_str());
    return;
  }
  if (permille == last_permille_) return;
  last_permille_ = permille;
  constexpr int kWidth = 30;
  const int filled = permille * kWidth / 1000;
  std::fprintf(stderr, "\r%s [%s%s] %5.1f%% %s / %s  %-32.32s", label_.c_str(),
               std::string(filled, '#').c_str(), std::string(kWidth - filled, ' ').c_str(),
               permille / 10.0, HumanBytes(done).c_str(), HumanBytes(total).c_str(), item.c_str());
  std::fflush(stderr);
  open_ = true;
}

void Progress::Done() {
  if (open_) std::fputc('\n', stderr);
  open_ = false;
}

int Fail(const std::string& command, const absl::Status& status) {
  std::fprintf(stderr, "df11 %s: %s\n", command.c_str(), status.ToString().c_str());
  return kExitError;
}

int UsageError(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "df11 %s: %s\nRun 'df11 %s --help' for usage.\n", command.c_str(),
               message.c_str(), command.c_str());
  return kExitUsage;
}

std::string HumanBytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? absl::StrCat(bytes, " B") : absl::StrFormat("%.1f %s", v, units[u]);
}

}  // namespace df11::tool
