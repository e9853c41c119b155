// Helpers of the tests that serve the demo model from the fake hub and compare tokens with it.
#ifndef DF11_TESTS_DAEMON_DEMO_HUB_H_
#define DF11_TESTS_DAEMON_DEMO_HUB_H_

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "client/df11_client.h"
#include "tests/hub/fake_hub.h"
#include "tests/testing/test_models.h"  // DemoDir

namespace df11::testing {

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

// Greedy requests of `model`, one after another on a thread of its own until stopped, as the
// traffic that must go on unharmed while a test breaks something else. Counts the requests that
// gave `expected` and keeps what else came back.
class GreedyTraffic {
 public:
  GreedyTraffic(std::string address, std::string model, std::vector<int32_t> expected)
      : address_(std::move(address)),
        model_(std::move(model)),
        expected_(std::move(expected)),
        thread_([this] { Run(); }) {}
  ~GreedyTraffic() { Stop(); }
  GreedyTraffic(const GreedyTraffic&) = delete;
  GreedyTraffic& operator=(const GreedyTraffic&) = delete;

  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int ok() const { return ok_; }
  // Read after Stop.
  const std::vector<std::string>& failures() const { return failures_; }

 private:
  void Run() {
    std::unique_ptr<client::Df11Client> c = *client::Df11Client::Connect(address_);
    while (!stop_) {
      absl::StatusOr<std::vector<int32_t>> tokens = GreedyTokens(*c, model_);
      if (tokens.ok() && *tokens == expected_) {
        ++ok_;
      } else {
        failures_.push_back(tokens.ok() ? "other tokens" : tokens.status().ToString());
      }
    }
  }

  const std::string address_, model_;
  const std::vector<int32_t> expected_;
  std::atomic<bool> stop_{false};
  std::atomic<int> ok_{0};
  std::vector<std::string> failures_;
  std::thread thread_;  // last: it starts once the rest is ready
};

}  // namespace df11::testing

#endif  // DF11_TESTS_DAEMON_DEMO_HUB_H_
