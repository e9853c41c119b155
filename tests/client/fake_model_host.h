// A fake df11d for client tests: an in-process ModelHost service on 127.0.0.1 (a free port) that
// answers from canned replies and records the requests it got.
//
//   FakeServer server;
//   server.host().Set([](FakeModelHost::Replies& r) { r.list.add_models()->set_name("demo"); });
//   auto client = Df11Client::Connect(server.address());
//   EXPECT_EQ(server.host().Requests().generate.model(), "demo");
#ifndef DF11_TESTS_CLIENT_FAKE_MODEL_HOST_H_
#define DF11_TESTS_CLIENT_FAKE_MODEL_HOST_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "df11/v1/model_host.grpc.pb.h"

namespace df11::testing {

namespace v1 = ::df11::v1;

class FakeModelHost final : public v1::ModelHost::Service {
 public:
  // What the fake answers. Streams send their messages in order, then end with `error`.
  struct Replies {
    grpc::Status error;  // every RPC ends with it (after the streamed messages)
    std::vector<v1::LoadModelProgress> load;
    v1::UnloadModelResponse unload;
    v1::ListModelsResponse list;
    std::vector<v1::ModelInfo> models;  // GetModel finds these by name, else NOT_FOUND
    v1::EstimateModelResponse estimate;
    std::vector<v1::GenerateResponse> generate;
    // Generate: after the messages above, repeat the last one until the client cancels (at most
    // 10000 times, 1 ms apart).
    bool generate_until_cancelled = false;
    std::vector<v1::NodeStatus> node;  // GetNodeStatus: the first; WatchNodeStatus: all
    absl::Duration unary_delay;        // unary RPCs wait this long (or until cancelled) first
  };
  // The last request of each kind.
  struct Requests {
    v1::LoadModelRequest load;
    v1::UnloadModelRequest unload;
    v1::GetModelRequest get;
    v1::EstimateModelRequest estimate;
    v1::GenerateRequest generate;
    v1::WatchNodeStatusRequest watch;
    int calls = 0;
    bool generate_saw_cancel = false;  // a Generate stream ended by the client's cancellation
  };

  void Set(const std::function<void(Replies&)>& edit) {
    absl::MutexLock lock(&mu_);
    edit(replies_);
  }
  Requests requests() {
    absl::MutexLock lock(&mu_);
    return requests_;
  }
  // Waits up to `timeout` for a Generate stream to see the client's cancellation.
  bool AwaitGenerateCancelled(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&requests_.generate_saw_cancel), timeout);
  }

  grpc::Status LoadModel(grpc::ServerContext*, const v1::LoadModelRequest* request,
                         grpc::ServerWriter<v1::LoadModelProgress>* writer) override {
    const Replies r = Record([&](Requests& q) { q.load = *request; });
    for (const v1::LoadModelProgress& p : r.load) writer->Write(p);
    return r.error;
  }
  grpc::Status UnloadModel(grpc::ServerContext* context, const v1::UnloadModelRequest* request,
                           v1::UnloadModelResponse* response) override {
    const Replies r = Record([&](Requests& q) { q.unload = *request; });
    return Unary(context, r, r.unload, response);
  }
  grpc::Status ListModels(grpc::ServerContext* context, const v1::ListModelsRequest*,
                          v1::ListModelsResponse* response) override {
    const Replies r = Record([](Requests&) {});
    return Unary(context, r, r.list, response);
  }
  grpc::Status GetModel(grpc::ServerContext* context, const v1::GetModelRequest* request,
                        v1::ModelInfo* response) override {
    const Replies r = Record([&](Requests& q) { q.get = *request; });
    for (const v1::ModelInfo& m : r.models) {
      if (m.name() == request->name()) return Unary(context, r, m, response);
    }
    if (!r.error.ok()) return r.error;
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown model " + request->name());
  }
  grpc::Status EstimateModel(grpc::ServerContext* context, const v1::EstimateModelRequest* request,
                             v1::EstimateModelResponse* response) override {
    const Replies r = Record([&](Requests& q) { q.estimate = *request; });
    return Unary(context, r, r.estimate, response);
  }
  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override {
    const Replies r = Record([&](Requests& q) { q.generate = *request; });
    for (const v1::GenerateResponse& g : r.generate) writer->Write(g);
    if (r.generate_until_cancelled && !r.generate.empty()) {
      for (int i = 0; i < 10000; ++i) {
        if (context->IsCancelled() || !writer->Write(r.generate.back())) {
          absl::MutexLock lock(&mu_);
          requests_.generate_saw_cancel = true;
          return grpc::Status::CANCELLED;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    return r.error;
  }
  grpc::Status GetNodeStatus(grpc::ServerContext* context, const v1::GetNodeStatusRequest*,
                             v1::NodeStatus* response) override {
    const Replies r = Record([](Requests&) {});
    return Unary(context, r, r.node.empty() ? v1::NodeStatus() : r.node[0], response);
  }
  grpc::Status WatchNodeStatus(grpc::ServerContext* context,
                               const v1::WatchNodeStatusRequest* request,
                               grpc::ServerWriter<v1::NodeStatus>* writer) override {
    const Replies r = Record([&](Requests& q) { q.watch = *request; });
    for (const v1::NodeStatus& s : r.node) {
      if (!writer->Write(s)) return grpc::Status::CANCELLED;
    }
    return r.error;
  }

 private:
  // Records the request and returns a copy of the replies, so handlers run without the lock.
  Replies Record(const std::function<void(Requests&)>& record) {
    absl::MutexLock lock(&mu_);
    record(requests_);
    ++requests_.calls;
    return replies_;
  }
  template <typename M>
  static grpc::Status Unary(grpc::ServerContext* context, const Replies& r, const M& reply,
                            M* response) {
    const absl::Time until = absl::Now() + r.unary_delay;
    while (absl::Now() < until && !context->IsCancelled()) absl::SleepFor(absl::Milliseconds(5));
    if (!r.error.ok()) return r.error;
    *response = reply;
    return grpc::Status::OK;
  }

  absl::Mutex mu_;
  Replies replies_ ABSL_GUARDED_BY(mu_);
  Requests requests_ ABSL_GUARDED_BY(mu_);
};

// The fake served on 127.0.0.1 at a port the system picks; shut down on destruction.
class FakeServer {
 public:
  FakeServer() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&host_);
    server_ = builder.BuildAndStart();
  }
  ~FakeServer() {
    // Streams still open (a test that failed half-way) are cancelled after a moment.
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
  bool ok() const { return server_ != nullptr && port_ > 0; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  FakeModelHost& host() { return host_; }

 private:
  FakeModelHost host_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace df11::testing

#endif  // DF11_TESTS_CLIENT_FAKE_MODEL_HOST_H_
