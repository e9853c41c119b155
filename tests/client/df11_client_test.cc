// libdf11client against a fake daemon on 127.0.0.1: replies and errors arrive unchanged, streams
// arrive in order, and a callback can cancel a generation or stop a watch.
#include "client/df11_client.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/fake_model_host.h"
#include "tests/testing/status_matchers.h"

namespace df11::client {
namespace {

using ::df11::testing::FakeModelHost;
using ::df11::testing::FakeServer;
using ::df11::testing::IsOk;
using ::df11::testing::StatusIs;
using ::testing::ElementsAre;

class Df11ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.ok());
    absl::StatusOr<std::unique_ptr<Df11Client>> client = Df11Client::Connect(server_.address());
    ASSERT_THAT(client, IsOk());
    client_ = std::move(*client);
  }
  FakeModelHost& host() { return server_.host(); }

  FakeServer server_;
  std::unique_ptr<Df11Client> client_;
};

v1::GenerateResponse Delta(const std::string& text, std::vector<int32_t> ids) {
  v1::GenerateResponse r;
  r.set_text(text);
  for (int32_t id : ids) r.add_token_ids(id);
  return r;
}

TEST(FromGrpcStatusTest, KeepsEveryCodeAndTheMessage) {
  EXPECT_THAT(FromGrpcStatus(grpc::Status::OK), IsOk());
  for (int code = 1; code <= 16; ++code) {
    SCOPED_TRACE(code);
    const absl::Status s =
        FromGrpcStatus(grpc::Status(static_cast<grpc::StatusCode>(code), "what happened"));
    EXPECT_EQ(static_cast<int>(s.code()), code);
    EXPECT_EQ(s.message(), "what happened");
  }
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown model x")),
            absl::NotFoundError("unknown model x"));
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "need 5 GiB")),
            absl::ResourceExhaustedError("need 5 GiB"));
}

TEST(FromGrpcStatusTest, UnknownCodeBecomesUnknown) {
  EXPECT_EQ(FromGrpcStatus(grpc::Status(static_cast<grpc::StatusCode>(42), "odd")),
            absl::UnknownError("odd"));
}

TEST(Df11ClientConnectTest, EmptyAddressIsInvalidArgument) {
  EXPECT_THAT(Df11Client::Connect(""), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(Df11ClientConnectTest, NoDaemonIsUnavailable) {
  std::string address;
  {
    FakeServer gone;  // a loopback port that was just free, and is closed again
    address = gone.address();
  }
  absl::StatusOr<std::unique_ptr<Df11Client>> client = Df11Client::Connect(address);
  ASSERT_THAT(client, IsOk());
  EXPECT_THAT((*client)->ListModels({.timeout = absl::Seconds(10)}),
              StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(Df11ClientTest, UnaryRepliesArriveUnchanged) {
  host().Set([](FakeModelHost::Replies& r) {
    r.list.add_models()->set_name("demo");
    r.list.add_models()->set_name("other");
    v1::ModelInfo m;
    m.set_name("demo");
    m.set_tokens_generated(77);
    r.models.push_back(m);
    r.estimate.set_total(123456789);
    r.unload.set_bytes_freed(4096);
    r.node.emplace_back().set_version("0.1.0");
  });
  absl::StatusOr<v1::ListModelsResponse> list = client_->ListModels();
  ASSERT_THAT(list, IsOk());
  ASSERT_EQ(list->models_size(), 2);
  EXPECT_EQ(list->models(1).name(), "other");

  absl::StatusOr<v1::ModelInfo> model = client_->GetModel("demo");
  ASSERT_THAT(model, IsOk());
  EXPECT_EQ(model->tokens_generated(), 77u);
  EXPECT_EQ(host().requests().get.name(), "demo");

  absl::StatusOr<v1::EstimateModelResponse> estimate = client_->EstimateModel("org/m@rev");
  ASSERT_THAT(estimate, IsOk());
  EXPECT_EQ(estimate->total(), 123456789u);
  EXPECT_EQ(host().requests().estimate.source(), "org/m@rev");

  v1::UnloadModelRequest unload;
  unload.set_name("demo");
  unload.set_drain_seconds(2.5);
  absl::StatusOr<v1::UnloadModelResponse> unloaded = client_->UnloadModel(unload);
  ASSERT_THAT(unloaded, IsOk());
  EXPECT_EQ(unloaded->bytes_freed(), 4096u);
  EXPECT_EQ(host().requests().unload.drain_seconds(), 2.5);

  absl::StatusOr<v1::NodeStatus> node = client_->GetNodeStatus();
  ASSERT_THAT(node, IsOk());
  EXPECT_EQ(node->version(), "0.1.0");
}

TEST_F(Df11ClientTest, DaemonErrorsKeepTheirCodeAndMessage) {
  EXPECT_EQ(client_->GetModel("nope").status(), absl::NotFoundError("unknown model nope"));
  host().Set([](FakeModelHost::Replies& r) {
    r.error = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "needs 9 GiB, 2 GiB free");
  });
  EXPECT_EQ(client_->ListModels().status(),
            absl::ResourceExhaustedError("needs 9 GiB, 2 GiB free"));
  EXPECT_EQ(client_->EstimateModel("x").status(),
            absl::ResourceExhaustedError("needs 9 GiB, 2 GiB free"));
  EXPECT_EQ(
      client_->Generate(v1::GenerateRequest(), [](const v1::GenerateResponse&) { return true; }),
      absl::ResourceExhaustedError("needs 9 GiB, 2 GiB free"));
}

TEST_F(Df11ClientTest, DeadlinePassedIsDeadlineExceeded) {
  host().Set([](FakeModelHost::Replies& r) { r.unary_delay = absl::Seconds(5); });
  EXPECT_THAT(client_->ListModels({.timeout = absl::Milliseconds(100)}),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
}

TEST_F(Df11ClientTest, LoadModelStreamsProgressAndReturnsTheLastMessage) {
  host().Set([](FakeModelHost::Replies& r) {
    for (int i = 0; i <= 2; ++i) {
      v1::LoadModelProgress& p = r.load.emplace_back();
      p.set_phase(v1::LOAD_PHASE_PLACING);
      p.set_bytes_done(50 * i);
      p.set_bytes_total(100);
    }
    v1::LoadModelProgress& done = r.load.emplace_back();
    done.set_phase(v1::LOAD_PHASE_DONE);
    done.mutable_model()->set_name("demo");
    done.mutable_model()->set_state(v1::MODEL_STATE_READY);
  });
  v1::LoadModelRequest request;
  request.set_source("models/demo");
  request.set_pin(true);
  std::vector<uint64_t> done;
  absl::StatusOr<v1::LoadModelProgress> last = client_->LoadModel(
      request, [&](const v1::LoadModelProgress& p) { done.push_back(p.bytes_done()); });
  ASSERT_THAT(last, IsOk());
  EXPECT_THAT(done, ElementsAre(0, 50, 100, 0));
  EXPECT_EQ(last->phase(), v1::LOAD_PHASE_DONE);
  EXPECT_EQ(last->model().state(), v1::MODEL_STATE_READY);
  EXPECT_EQ(host().requests().load.source(), "models/demo");
  EXPECT_TRUE(host().requests().load.pin());
}

TEST_F(Df11ClientTest, LoadModelWithoutProgressIsInternal) {
  v1::LoadModelRequest request;
  request.set_source("models/demo");
  EXPECT_THAT(client_->LoadModel(request, nullptr), StatusIs(absl::StatusCode::kInternal));
}

TEST_F(Df11ClientTest, LoadModelErrorAfterProgressIsTheError) {
  host().Set([](FakeModelHost::Replies& r) {
    r.load.emplace_back().set_phase(v1::LOAD_PHASE_RESOLVING);
    r.error = grpc::Status(grpc::StatusCode::UNAVAILABLE, "hub unreachable");
  });
  int calls = 0;
  EXPECT_EQ(
      client_->LoadModel(v1::LoadModelRequest(), [&](const v1::LoadModelProgress&) { ++calls; })
          .status(),
      absl::UnavailableError("hub unreachable"));
  EXPECT_EQ(calls, 1);
}

TEST_F(Df11ClientTest, GenerateStreamsEveryMessageInOrder) {
  host().Set([](FakeModelHost::Replies& r) {
    r.generate = {Delta("Hel", {1, 2}), Delta("lo", {3}), Delta("", {})};
    r.generate.back().set_finish_reason(v1::FINISH_REASON_STOP);
  });
  v1::GenerateRequest request;
  request.set_model("demo");
  request.set_text("Say hello");
  std::string text;
  std::vector<int32_t> ids;
  v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED;
  EXPECT_THAT(client_->Generate(request,
                                [&](const v1::GenerateResponse& r) {
                                  text += r.text();
                                  ids.insert(ids.end(), r.token_ids().begin(), r.token_ids().end());
                                  finish = r.finish_reason();
                                  return true;
                                }),
              IsOk());
  EXPECT_EQ(text, "Hello");
  EXPECT_THAT(ids, ElementsAre(1, 2, 3));
  EXPECT_EQ(finish, v1::FINISH_REASON_STOP);
  EXPECT_EQ(host().requests().generate.text(), "Say hello");
}

TEST_F(Df11ClientTest, GenerateCallbackReturningFalseCancelsTheCall) {
  host().Set([](FakeModelHost::Replies& r) {
    r.generate = {Delta("a", {1}), Delta("b", {2})};
    r.generate_until_cancelled = true;  // the daemon would go on for a long time
  });
  int calls = 0;
  const absl::Status s = client_->Generate(
      v1::GenerateRequest(), [&](const v1::GenerateResponse&) { return ++calls < 2; });
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(calls, 2);  // nothing is delivered after the callback said stop
  EXPECT_TRUE(host().AwaitGenerateCancelled(absl::Seconds(10)));
}

TEST_F(Df11ClientTest, WatchNodeStatusStopsWhenTheCallbackSaysSo) {
  host().Set([](FakeModelHost::Replies& r) {
    for (int i = 0; i < 3; ++i) r.node.emplace_back().set_queued_requests(i);
  });
  v1::WatchNodeStatusRequest request;
  request.set_interval_seconds(0.25);
  std::vector<int> queued;
  EXPECT_THAT(client_->WatchNodeStatus(request,
                                       [&](const v1::NodeStatus& s) {
                                         queued.push_back(s.queued_requests());
                                         return queued.size() < 2;
                                       }),
              IsOk());
  EXPECT_THAT(queued, ElementsAre(0, 1));
  EXPECT_EQ(host().requests().watch.interval_seconds(), 0.25);

  // The daemon ending the stream ends the watch too.
  queued.clear();
  EXPECT_THAT(client_->WatchNodeStatus(request,
                                       [&](const v1::NodeStatus& s) {
                                         queued.push_back(s.queued_requests());
                                         return true;
                                       }),
              IsOk());
  EXPECT_THAT(queued, ElementsAre(0, 1, 2));
}

}  // namespace
}  // namespace df11::client
