// df11ctl, the command-line client of the df11d daemon, as a library: RunDf11ctl() is the whole
// program minus main(), writing to the streams it is given so that tests can run any command
// against a fake daemon and compare what it printed.
//
//   Console console{std::cout, std::cerr, isatty(1) != 0, isatty(2) != 0};
//   return RunDf11ctl({"--addr", "127.0.0.1:7411", "list"}, getenv("DF11_ADDR"), console);
#ifndef DF11_CLIENT_CTL_CTL_H_
#define DF11_CLIENT_CTL_CTL_H_

#include <ostream>
#include <string>
#include <vector>

namespace df11::ctl {

// Exit codes of every command.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;  // the call failed; stderr has "df11ctl CMD: CODE: message"
inline constexpr int kExitUsage = 2;   // bad command line

// Used when neither --addr nor DF11_ADDR names the daemon: its default gRPC listen address.
inline constexpr char kDefaultAddress[] = "127.0.0.1:7411";

// Where a command writes: results on `out`, progress, summaries and errors on `err`. The
// terminal flags choose progress bars and in-place redraws over plain lines.
struct Console {
  std::ostream& out;
  std::ostream& err;
  bool out_terminal = false;
  bool err_terminal = false;
};

// Runs `df11ctl ARGS...` (`args` excludes the program name) and returns its exit code. The daemon
// is --addr, else `env_address` when not null or empty, else kDefaultAddress.
// `env_token`: $DF11_TOKEN, the token sent when --token-file is not given (nullptr: none).
int RunDf11ctl(const std::vector<std::string>& args, const char* env_address, Console& console,
               const char* env_token = nullptr);

}  // namespace df11::ctl

#endif  // DF11_CLIENT_CTL_CTL_H_
