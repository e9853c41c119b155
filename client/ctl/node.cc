// df11ctl status and top: the node's capacity, once or live.
#include <string>

#include "absl/strings/str_cat.h"
#include "client/ctl/commands.h"
#include "client/ctl/format.h"

namespace df11::ctl {
namespace {

// Moves the cursor home and clears the screen, so each frame replaces the last.
constexpr char kClearScreen[] = "\x1b[H\x1b[2J";

}  // namespace

int RunStatus(Context& c) {
  if (!c.args.positional().empty()) {
    return UsageError(c, absl::StrCat("unexpected argument '", c.args.positional()[0], "'"));
  }
  absl::StatusOr<v1::NodeStatus> status = c.client.GetNodeStatus();
  if (!status.ok()) return Fail(c, status.status());
  if (c.json) return PrintJson(c, *status);
  c.console.out << FormatNodeStatus(*status);
  return kExitOk;
}

int RunTop(Context& c) {
  if (!c.args.positional().empty()) {
    return UsageError(c, absl::StrCat("unexpected argument '", c.args.positional()[0], "'"));
  }
  absl::StatusOr<double> interval = c.args.GetSeconds("interval", 1);
  if (!interval.ok()) return UsageError(c, std::string(interval.status().message()));
  if (!(*interval > 0)) return UsageError(c, "--interval must be more than 0");
  const bool once = c.args.Has("once");

  v1::WatchNodeStatusRequest request;
  request.set_interval_seconds(*interval);
  int frames = 0;
  int exit_code = kExitOk;
  v1::NodeStatus previous;
  const absl::Status status = c.client.WatchNodeStatus(request, [&](const v1::NodeStatus& s) {
    const std::string frame = FormatTopFrame(s, frames > 0 ? &previous : nullptr);
    if (c.json) {
      exit_code = PrintJson(c, s);
      if (exit_code != kExitOk) return false;
    } else if (c.console.out_terminal) {
      c.console.out << kClearScreen << frame << std::flush;
    } else {
      c.console.out << (frames > 0 ? "\n" : "") << frame << std::flush;
    }
    previous = s;
    ++frames;
    return !once;
  });
  if (!status.ok()) return Fail(c, status);
  return exit_code;
}

}  // namespace df11::ctl
