#include "tools/df11/cli.h"

#include <cstdio>

namespace df11::tool {

int Fail(const std::string& command, const absl::Status& status) {
  std::fprintf(stderr, "df11 %s: %s\n", command.c_str(), status.ToString().c_str());
  return kExitError;
}

int UsageError(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "df11 %s: %s\nRun 'df11 %s --help' for usage.\n", command.c_str(),
               message.c_str(), command.c_str());
  return kExitUsage;
}

}  // namespace df11::tool
