// fake_hub: serves directories as Hugging Face Hub model repos on 127.0.0.1 (see fake_hub.h), for
// Python interop tests and download benchmarks.
//
//   fake_hub --repo org/name=DIR [--repo ...] [--branch main] [--port-file FILE]
//            [--throttle BYTES_PER_S] [--gated-token T] [--tree-page-size N]
//
// Each DIR becomes one commit on the branch holding every regular file under it; *.safetensors
// and files of 10 MiB or more are LFS files (redirected to the CDN port). Prints the endpoint,
// writes it to FILE once serving, and runs until SIGTERM or SIGINT (exit 0). Bad arguments: usage
// on stderr, exit 2. Unreadable directories: exit 1.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "tests/hub/fake_hub.h"

namespace {

namespace fs = std::filesystem;

// The Hub stores files of this size or more in LFS.
constexpr std::uintmax_t kLfsThreshold = 10 * 1024 * 1024;

constexpr char kUsage[] =
    "usage: fake_hub --repo org/name=DIR [--repo org/name=DIR ...] [--branch main]\n"
    "                [--port-file FILE] [--throttle BYTES_PER_S] [--gated-token TOKEN]\n"
    "                [--tree-page-size N]\n"
    "Serves every regular file under each DIR as one commit of repo org/name on the branch\n"
    "(*.safetensors and files >= 10 MiB as LFS files, served from a second CDN port), prints\n"
    "the endpoint http://127.0.0.1:PORT, writes it to FILE once serving, and runs until\n"
    "SIGTERM or SIGINT.\n";

int Usage(const std::string& error) {
  if (!error.empty()) std::fprintf(stderr, "fake_hub: %s\n", error.c_str());
  std::fputs(kUsage, stderr);
  return 2;
}

bool ValidRepoId(absl::string_view id) {
  const size_t slash = id.find('/');
  return slash != absl::string_view::npos && slash > 0 && slash + 1 < id.size() &&
         id.find('/', slash + 1) == absl::string_view::npos;
}

// Every regular file under `dir`, by path relative to it; nullopt if `dir` cannot be walked.
std::optional<std::vector<df11::testing::FakeFile>> ListFiles(const fs::path& dir) {
  std::vector<df11::testing::FakeFile> files;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return std::nullopt;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    df11::testing::FakeFile f;
    f.path = it->path().lexically_relative(dir).generic_string();
    f.disk_path = it->path().string();
    const std::uintmax_t size = it->file_size(ec);
    if (ec) return std::nullopt;
    f.lfs = absl::EndsWith(f.path, ".safetensors") || size >= kLfsThreshold;
    files.push_back(std::move(f));
  }
  if (ec) return std::nullopt;
  std::sort(files.begin(), files.end(),
            [](const auto& a, const auto& b) { return a.path < b.path; });
  return files;
}

// Written to a temporary name and renamed, so a poller never reads half a line.
bool WritePortFile(const std::string& path, const std::string& endpoint) {
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << endpoint << "\n";
    if (!out.flush()) return false;
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  return !ec;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::pair<std::string, std::string>> repos;  // id, directory
  std::string branch = "main";
  std::string port_file;
  std::string gated_token;
  int64_t throttle = 0;
  int page_size = 0;

  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    // Both "--flag value" and "--flag=value".
    std::string value;
    if (const size_t eq = arg.find('='); absl::StartsWith(arg, "--") && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg.resize(eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return Usage(arg + " needs a value");
    }
    if (arg == "--repo") {
      const size_t eq = value.find('=');
      if (eq == std::string::npos || !ValidRepoId(value.substr(0, eq)) || eq + 1 == value.size()) {
        return Usage("--repo wants org/name=DIR, got '" + value + "'");
      }
      repos.emplace_back(value.substr(0, eq), value.substr(eq + 1));
    } else if (arg == "--branch" && !value.empty()) {
      branch = value;
    } else if (arg == "--port-file" && !value.empty()) {
      port_file = value;
    } else if (arg == "--gated-token" && !value.empty()) {
      gated_token = value;
    } else if (arg == "--throttle") {
      if (!absl::SimpleAtoi(value, &throttle) || throttle < 0) {
        return Usage("bad --throttle '" + value + "'");
      }
    } else if (arg == "--tree-page-size") {
      if (!absl::SimpleAtoi(value, &page_size) || page_size < 1) {
        return Usage("bad --tree-page-size '" + value + "'");
      }
    } else {
      return Usage("unknown or empty argument " + arg);
    }
  }
  if (repos.empty()) return Usage("at least one --repo is needed");

  std::vector<std::vector<df11::testing::FakeFile>> contents;
  for (const auto& [id, dir] : repos) {
    std::optional<std::vector<df11::testing::FakeFile>> files = ListFiles(dir);
    if (!files) {
      std::fprintf(stderr, "fake_hub: cannot read directory %s\n", dir.c_str());
      return 1;
    }
    contents.push_back(std::move(*files));
  }

  // Blocked before the servers start their threads, which inherit the mask, so that only
  // sigwait below sees the signals.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  df11::testing::FakeHub hub;
  for (size_t i = 0; i < repos.size(); ++i) {
    const size_t count = contents[i].size();
    const std::string commit = hub.AddCommit(repos[i].first, branch, std::move(contents[i]));
    if (!gated_token.empty()) hub.SetGated(repos[i].first, gated_token);
    std::fprintf(stderr, "fake_hub: %s@%s = %s (%zu files) at commit %s\n", repos[i].first.c_str(),
                 branch.c_str(), repos[i].second.c_str(), count, commit.c_str());
  }
  hub.SetThrottle(throttle);
  if (page_size > 0) hub.SetTreePageSize(page_size);

  if (!port_file.empty() && !WritePortFile(port_file, hub.endpoint())) {
    std::fprintf(stderr, "fake_hub: cannot write %s\n", port_file.c_str());
    return 1;
  }
  std::fprintf(stderr, "fake_hub: hub %s, cdn %s\n", hub.endpoint().c_str(),
               hub.cdn_endpoint().c_str());
  std::printf("%s\n", hub.endpoint().c_str());
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  std::fprintf(stderr, "fake_hub: stopping on signal %d\n", signal_number);
  return 0;
}
