#include "client/cli/progress.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace df11::cli {

Progress::Progress(std::string label)
    : Progress(std::move(label), std::cerr, isatty(STDERR_FILENO) != 0) {}

Progress::Progress(std::string label, std::ostream& out, bool terminal)
    : label_(std::move(label)), out_(out), terminal_(terminal) {}

Progress::~Progress() { Done(); }

void Progress::Update(const std::string& item, uint64_t done, uint64_t total) {
  const int permille = total == 0 ? 1000 : static_cast<int>(1000 * std::min(done, total) / total);
  if (!terminal_) {
    // Logs (CI, nohup) get one line per tenth.
    if (last_permille_ >= 0 && permille / 100 == last_permille_ / 100) return;
    last_permille_ = permille;
    out_ << absl::StrFormat("%s: %3d%% %s / %s %s\n", label_, permille / 10, HumanBytes(done),
                            HumanBytes(total), item);
    out_.flush();
    return;
  }
  if (permille == last_permille_) return;
  last_permille_ = permille;
  constexpr int kWidth = 30;
  const int filled = permille * kWidth / 1000;
  out_ << absl::StrFormat("\r%s [%s%s] %5.1f%% %s / %s  %-32.32s", label_, std::string(filled, '#'),
                          std::string(kWidth - filled, ' '), permille / 10.0, HumanBytes(done),
                          HumanBytes(total), item);
  out_.flush();
  open_ = true;
}

void Progress::Done() {
  if (open_) out_ << '\n' << std::flush;
  open_ = false;
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

}  // namespace df11::cli
