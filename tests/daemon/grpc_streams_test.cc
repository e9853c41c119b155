// gRPC streams that wait hold no thread (callback streams): 10,000 idle WatchNodeStatus streams
// over 100 connections leave df11d with fewer than 200 threads, every stream gets its first
// status, the daemon keeps answering, cancelled streams let go, and SIGTERM ends every watch
// with OK at once (the shutdown wakes them) rather than cancelling them at the drain deadline.
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/df11_client.h"
#include "df11/v1/model_host.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/daemon/daemon_process.h"

namespace df11 {
namespace {

constexpr int kConnections = 100;
constexpr int kStreamsPerConnection = 100;

// The Threads: line of /proc/`pid`/status; -1 when unreadable.
int ThreadsOf(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(in, line);) {
    int threads;
    if (line.rfind("Threads:", 0) == 0 && absl::SimpleAtoi(line.substr(8), &threads)) {
      return threads;
    }
  }
  return -1;
}

struct Watch {
  grpc::ClientContext context;
  v1::NodeStatus status;
  std::unique_ptr<grpc::ClientAsyncReader<v1::NodeStatus>> reader;
  grpc::Status end;
};

// Completion-queue tags: the watch's index and what completed.
enum Step : uintptr_t { kStarted = 0, kRead = 1, kFinished = 2 };
void* Tag(size_t index, Step step) { return reinterpret_cast<void*>(index * 4 + step); }

TEST(GrpcStreamsTest, TenThousandIdleWatchesHoldNoThreadEach) {
  const std::string dir = testing::MakeTempDir();
  testing::DaemonProcess daemon;
  // A long drain: watches that the shutdown failed to end would be cancelled only after it.
  ASSERT_TRUE(daemon.Start("shutdown: {drain: 120s}\n", dir).ok());
  const int threads_idle = ThreadsOf(daemon.pid());
  ASSERT_GT(threads_idle, 0);

  std::vector<std::unique_ptr<v1::ModelHost::Stub>> stubs;
  for (int i = 0; i < kConnections; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
    stubs.push_back(v1::ModelHost::NewStub(
        grpc::CreateCustomChannel(daemon.address(), grpc::InsecureChannelCredentials(), args)));
  }
  grpc::CompletionQueue cq;
  std::vector<std::unique_ptr<Watch>> watches;
  v1::WatchNodeStatusRequest request;
  request.set_interval_seconds(3600);  // idle after the first status
  for (int i = 0; i < kConnections * kStreamsPerConnection; ++i) {
    auto& w = *watches.emplace_back(std::make_unique<Watch>());
    w.reader = stubs[i % kConnections]->PrepareAsyncWatchNodeStatus(&w.context, request, &cq);
    w.reader->StartCall(Tag(i, kStarted));
  }
  // Every stream's first status.
  size_t first_statuses = 0;
  const auto give_up = std::chrono::system_clock::now() + std::chrono::seconds(300);
  void* tag;
  bool ok;
  while (first_statuses < watches.size() &&
         cq.AsyncNext(&tag, &ok, give_up) == grpc::CompletionQueue::GOT_EVENT) {
    const auto value = reinterpret_cast<uintptr_t>(tag);
    Watch& w = *watches[value / 4];
    ASSERT_TRUE(ok) << "watch " << value / 4 << " failed at step " << value % 4;
    if (value % 4 == kStarted) {
      w.reader->Read(&w.status, Tag(value / 4, kRead));
    } else {
      EXPECT_FALSE(w.status.version().empty());
      ++first_statuses;
    }
  }
  ASSERT_EQ(first_statuses, watches.size());

  const int threads_watching = ThreadsOf(daemon.pid());
  RecordProperty("threads_idle", threads_idle);
  RecordProperty("threads_with_10000_watches", threads_watching);
  EXPECT_LT(threads_watching, 200) << "idle: " << threads_idle;

  // The daemon still answers.
  absl::StatusOr<std::unique_ptr<client::Df11Client>> c =
      client::Df11Client::Connect(daemon.address());
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE((*c)->GetNodeStatus().ok());

  // Half are cancelled by their clients; the others end with the shutdown.
  for (size_t i = 0; i < watches.size(); i += 2) watches[i]->context.TryCancel();
  daemon.SendTerm();
  for (size_t i = 0; i < watches.size(); ++i) {
    watches[i]->reader->Finish(&watches[i]->end, Tag(i, kFinished));
  }
  size_t ended = 0;
  while (ended < watches.size() &&
         cq.AsyncNext(&tag, &ok, give_up) == grpc::CompletionQueue::GOT_EVENT) {
    ++ended;
  }
  ASSERT_EQ(ended, watches.size());
  for (size_t i = 0; i < watches.size(); ++i) {
    const grpc::StatusCode want = i % 2 == 0 ? grpc::StatusCode::CANCELLED : grpc::StatusCode::OK;
    ASSERT_EQ(watches[i]->end.error_code(), want)
        << "watch " << i << ": " << watches[i]->end.error_message();
  }
  EXPECT_EQ(daemon.Wait(), 0);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

}  // namespace
}  // namespace df11
