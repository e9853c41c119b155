// df11 devices: the CUDA devices df11 sees.
#include <cstdio>

#include "tools/df11/cli.h"
#include "tools/df11/commands.h"
#ifdef DF11_HAVE_CUDA
#include "codec/cuda/devices.h"
#endif

namespace df11::tool {
namespace {

constexpr char kHelp[] = R"(Usage: df11 devices

Lists the CUDA devices this build can use: index, name, compute capability, memory and SMs.
Prints "no CUDA device" on machines without a GPU or driver, and says so when df11 was built
without CUDA.
)";

}  // namespace

int RunDevices(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args = Args::Parse(argv, {}, {"help"});
  if (!args.ok()) return UsageError("devices", std::string(args.status().message()));
  if (args->Has("help")) return std::fputs(kHelp, stdout), kExitOk;
#ifdef DF11_HAVE_CUDA
  absl::StatusOr<std::vector<cuda::DeviceInfo>> devices = cuda::ListDevices();
  if (!devices.ok()) return Fail("devices", devices.status());
  std::printf("CUDA runtime %s, %zu device(s)\n", cuda::RuntimeVersion().c_str(), devices->size());
  if (devices->empty()) std::printf("no CUDA device\n");
  for (const cuda::DeviceInfo& d : *devices) {
    std::printf("%d: %s, compute %d.%d, %s total, %s free, %d SMs\n", d.index, d.name.c_str(),
                d.compute_major, d.compute_minor, HumanBytes(d.total_bytes).c_str(),
                HumanBytes(d.free_bytes).c_str(), d.multiprocessors);
  }
#else
  std::printf("df11 was built without CUDA (-DDF11_CUDA=OFF or no nvcc found)\n");
#endif
  return kExitOk;
}

}  // namespace df11::tool
