// Helpers of the tests that serve the demo model from the fake hub and compare tokens with it.
#ifndef DF11_TESTS_DAEMON_DEMO_HUB_H_
#define DF11_TESTS_DAEMON_DEMO_HUB_H_

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/df11_client.h"
#include "tests/hub/fake_hub.h"

namespace df11::testing {

inline std::string DemoDir() {
  return (std::filesystem::path(DF11_SOURCE_DIR) / "models" / "demo").string();
}

// The demo model's files (five safetensors shards) as fake hub files, the shards as LFS.
inline std::vector<FakeFile> DemoHubFiles() {
  std::vector<FakeFile> files;
  for (const auto& e : std::filesystem::directory_iterator(DemoDir())) {
    files.push_back({.path = e.path().filename().string(),
                     .content = "",
                     .disk_path = e.path().string(),
                     .lfs = e.path().extension() == ".safetensors"});
  }
  return files;
}

// Six greedy tokens of `model` after "def main(".
inline absl::StatusOr<std::vector<int32_t>> GreedyTokens(client::Df11Client& c,
                                                         const std::string& model) {
  v1::GenerateRequest r;
  r.set_model(model);
  r.set_text("def main(");
  r.set_max_tokens(6);
  r.set_ignore_eos(true);
  r.mutable_sampling()->set_temperature(0);
  std::vector<int32_t> tokens;
  absl::Status s = c.Generate(r,
                              [&](const v1::GenerateResponse& response) {
                                tokens.insert(tokens.end(), response.token_ids().begin(),
                                              response.token_ids().end());
                                return true;
                              },
                              {.timeout = absl::Seconds(60)});
  if (!s.ok()) return s;
  return tokens;
}

}  // namespace df11::testing

#endif  // DF11_TESTS_DAEMON_DEMO_HUB_H_
