// The df11 subcommands. Each takes the arguments after its name and returns an exit code
// (tools/df11/cli.h).
#ifndef DF11_TOOLS_DF11_COMMANDS_H_
#define DF11_TOOLS_DF11_COMMANDS_H_

#include <string>
#include <vector>

namespace df11::tool {

int RunCompress(const std::vector<std::string>& args);
int RunDecompress(const std::vector<std::string>& args);
int RunVerify(const std::vector<std::string>& args);
int RunInspect(const std::vector<std::string>& args);
int RunBench(const std::vector<std::string>& args);
int RunSynth(const std::vector<std::string>& args);
int RunDemo(const std::vector<std::string>& args);
int RunDevices(const std::vector<std::string>& args);
int RunGpuBench(const std::vector<std::string>& args);
int RunGemvBench(const std::vector<std::string>& args);
int RunGpuLoadBench(const std::vector<std::string>& args);
int RunGenerate(const std::vector<std::string>& args);
int RunDownload(const std::vector<std::string>& args);
int RunEngineBench(const std::vector<std::string>& args);
int RunDaemonBench(const std::vector<std::string>& args);
int RunSoak(const std::vector<std::string>& args);
int RunToken(const std::vector<std::string>& args);

}  // namespace df11::tool

#endif  // DF11_TOOLS_DF11_COMMANDS_H_
