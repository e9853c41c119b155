// df11ctl: the command-line client of the df11d daemon (client/ctl/ctl.h).
//
//   df11ctl load models/demo --name demo
//   df11ctl generate demo --prompt 'def '
//   df11ctl --addr 10.0.0.7:7411 top
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "client/ctl/ctl.h"

int main(int argc, char** argv) {
  df11::ctl::Console console{std::cout, std::cerr, isatty(STDOUT_FILENO) != 0,
                             isatty(STDERR_FILENO) != 0};
  const std::vector<std::string> args(argv + 1, argv + argc);
  return df11::ctl::RunDf11ctl(args, std::getenv("DF11_ADDR"), console, std::getenv("DF11_TOKEN"));
}
