#include "tools/df11/front_door_bench.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "df11/v1/model_host.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tools/df11/process_sample.h"
#include "tools/df11/stats.h"

namespace df11::tool {
namespace {

namespace v1 = ::df11::v1;

// ---- idle watch streams ----------------------------------------------------------------------

struct Watch {
  grpc::ClientContext context;
  v1::NodeStatus status;
  std::unique_ptr<grpc::ClientAsyncReader<v1::NodeStatus>> reader;
  grpc::Status end;
  bool opened = false;
};

// Completion-queue tags: the watch's index and what completed.
enum Step : uintptr_t { kStarted = 0, kRead = 1, kFinished = 2 };
void* Tag(size_t index, Step step) { return reinterpret_cast<void*>(index * 4 + step); }

}  // namespace

absl::StatusOr<nlohmann::json> BenchIdleStreams(const std::string& address, int streams,
                                                int connections, double hold,
                                                const ServedRequest& served, int daemon_pid) {
  const ProcessSample before = SampleProcess(daemon_pid);
  std::vector<std::unique_ptr<v1::ModelHost::Stub>> stubs;
  for (int i = 0; i < connections; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
    stubs.push_back(v1::ModelHost::NewStub(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args)));
  }
  // What the driver thread uses, shared with it: when streams fail to end, the thread is left
  // behind with it rather than with this frame's variables.
  struct Streams {
    grpc::CompletionQueue cq;
    std::vector<std::unique_ptr<Watch>> watches;
    std::atomic<int> opened{0}, failed_to_open{0}, ended{0};
  };
  const auto shared = std::make_shared<Streams>();
  shared->watches.resize(streams);
  grpc::CompletionQueue& cq = shared->cq;
  std::vector<std::unique_ptr<Watch>>& watches = shared->watches;
  std::atomic<int>& opened = shared->opened;
  std::atomic<int>& failed_to_open = shared->failed_to_open;
  std::atomic<int>& ended = shared->ended;

  // One thread drives every stream: open, read the first status, keep a read pending (it ends
  // when the stream does), then collect the final status.
  std::thread driver([shared] {
    grpc::CompletionQueue& cq = shared->cq;
    std::vector<std::unique_ptr<Watch>>& watches = shared->watches;
    void* tag;
    bool ok;
    while (cq.Next(&tag, &ok)) {
      const auto value = reinterpret_cast<uintptr_t>(tag);
      const size_t index = value / 4;
      Watch& w = *watches[index];
      switch (static_cast<Step>(value % 4)) {
        case kStarted:
          if (ok) {
            w.reader->Read(&w.status, Tag(index, kRead));
          } else {
            ++shared->failed_to_open;
            w.reader->Finish(&w.end, Tag(index, kFinished));
          }
          break;
        case kRead:
          if (ok) {
            if (!w.opened) {
              w.opened = true;
              ++shared->opened;
            }
            w.reader->Read(&w.status, Tag(index, kRead));
          } else {
            if (!w.opened) ++shared->failed_to_open;
            w.reader->Finish(&w.end, Tag(index, kFinished));
          }
          break;
        case kFinished:
          ++shared->ended;
          break;
      }
    }
  });

  v1::WatchNodeStatusRequest request;
  request.set_interval_seconds(3600);  // one status now, then nothing while held
  const Clock::time_point open_start = Clock::now();
  for (int i = 0; i < streams; ++i) {
    watches[i] = std::make_unique<Watch>();
    watches[i]->reader =
        stubs[i % connections]->PrepareAsyncWatchNodeStatus(&watches[i]->context, request, &cq);
    watches[i]->reader->StartCall(Tag(i, kStarted));
  }
  // Every stream has its first status (or has failed) before the hold starts.
  while (opened.load() + failed_to_open.load() < streams &&
         Seconds(Clock::now() - open_start) < 300) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double open_seconds = Seconds(Clock::now() - open_start);
  const int ended_early = ended.load();

  // The streams alone, for a quarter of the hold: what holding them costs the daemon.
  const ProcessSample quiet_start = SampleProcess(daemon_pid);
  const Clock::time_point quiet_begin = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(hold / 4));
  const ProcessSample quiet_end = SampleProcess(daemon_pid);
  const double quiet_seconds = Seconds(Clock::now() - quiet_begin);

  // Requests served while the streams are held.
  const ProcessSample held_start = SampleProcess(daemon_pid);
  std::vector<double> latencies;
  int request_errors = 0;
  const Clock::time_point hold_start = Clock::now();
  while (Seconds(Clock::now() - hold_start) < hold) {
    const Clock::time_point t = Clock::now();
    if (served()) {
      latencies.push_back(Seconds(Clock::now() - t));
    } else {
      ++request_errors;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const ProcessSample held_end = SampleProcess(daemon_pid);
  const double held_seconds = Seconds(Clock::now() - hold_start);

  for (auto& w : watches) w->context.TryCancel();
  const Clock::time_point cancel_start = Clock::now();
  while (ended.load() < streams && Seconds(Clock::now() - cancel_start) < 120) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const bool all_ended = ended.load() == streams;
  if (all_ended) {
    cq.Shutdown();
    driver.join();
  } else {
    driver.detach();  // with the streams it drives: see Streams
  }
  if (!all_ended) {
    return absl::DeadlineExceededError(absl::StrCat(streams - ended.load(), " of ", streams,
                                                    " watch streams did not end within 120 s of ",
                                                    "their cancellation"));
  }
  int cancelled = 0;
  std::map<std::string, int> errors;
  for (const auto& w : watches) {
    if (w->end.error_code() == grpc::StatusCode::CANCELLED) {
      ++cancelled;
    } else {
      ++errors[absl::StrCat(w->end.error_code(), ": ", w->end.error_message())];
    }
  }
  nlohmann::json out = {{"streams", streams},
                        {"connections", connections},
                        {"opened", opened.load()},
                        {"ended_before_cancellation", ended_early},
                        {"ended_by_cancellation", cancelled},
                        {"errors", streams - cancelled},
                        {"errors_by_status", errors},
                        {"open_seconds", open_seconds},
                        {"hold_seconds", held_seconds},
                        {"requests_during_hold", latencies.size()},
                        {"request_errors_during_hold", request_errors},
                        {"request_ms_during_hold_p50", Median(latencies) * 1e3},
                        {"request_ms_during_hold_p99", Percentile(latencies, 0.99) * 1e3}};
  if (daemon_pid > 0) {
    out["daemon_before"] = ToJson(before);
    out["daemon_streams_alone"] = ToJson(quiet_end);
    out["daemon_held"] = ToJson(held_end);
    // CPU the daemon spent holding the streams alone, then while also serving the requests.
    out["daemon_cpu_percent_streams_only"] =
        100 * (quiet_end.cpu_seconds - quiet_start.cpu_seconds) / quiet_seconds;
    out["daemon_cpu_percent_with_requests"] =
        100 * (held_end.cpu_seconds - held_start.cpu_seconds) / held_seconds;
    // What the open streams alone added (sampled before any request is served meanwhile).
    out["daemon_threads_added"] = quiet_end.threads - before.threads;
    out["daemon_bytes_per_stream"] =
        static_cast<double>(quiet_end.rss_bytes - before.rss_bytes) / std::max(1, opened.load());
  }
  return out;
}

namespace {

// ---- raw HTTP connections --------------------------------------------------------------------

// HOST:PORT resolved (IPv4 or IPv6), for connections an HTTP library would not make.
struct Target {
  sockaddr_storage address{};
  socklen_t length = 0;
  bool ipv4_loopback = false;
};

absl::StatusOr<Target> Resolve(const std::string& host_port) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("'", host_port, "' is not HOST:PORT"));
  }
  std::string host = host_port.substr(0, colon);
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int error = getaddrinfo(host.c_str(), host_port.substr(colon + 1).c_str(), &hints, &found);
  if (error != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve '", host_port, "': ", gai_strerror(error)));
  }
  Target t;
  std::memcpy(&t.address, found->ai_addr, found->ai_addrlen);
  t.length = found->ai_addrlen;
  if (found->ai_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(found->ai_addr);
    t.ipv4_loopback = (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  freeaddrinfo(found);
  return t;
}

// A blocking connection to `target`, from 127.1.x.y (x.y from `source`) when the target is an IPv4
// loopback address and `source` >= 0; -1 on failure.
int Connect(const Target& target, int source) {
  const int fd = socket(target.address.ss_family, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  if (target.ipv4_loopback && source >= 0) {
    sockaddr_in from{};
    from.sin_family = AF_INET;
    from.sin_addr.s_addr = htonl((127u << 24) | (1u << 16) | (1 + static_cast<uint32_t>(source)));
    if (bind(fd, reinterpret_cast<const sockaddr*>(&from), sizeof(from)) != 0) {
      close(fd);
      return -1;
    }
  }
  if (connect(fd, reinterpret_cast<const sockaddr*>(&target.address), target.length) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// ---- a chunked body past the limit -----------------------------------------------------------

struct Refusal {
  int status = 0;                   // the answer's HTTP status; 0 for none
  double answer_seconds = 0;        // body's first byte to the answer's status line
  double closed_seconds = 0;        // ...to the daemon's close
  int64_t bytes_before_answer = 0;  // body bytes sent by then
};

absl::StatusOr<Refusal> SendChunkedBody(const Target& target, int64_t body_bytes) {
  const int fd = Connect(target, -1);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("connect: ", std::strerror(errno)));
  if (!SendAll(fd,
               "POST /v1/completions HTTP/1.1\r\nHost: df11d\r\n"
               "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")) {
    close(fd);
    return absl::UnavailableError("the daemon closed the connection during the headers");
  }
  std::atomic<int64_t> sent{0};
  const Clock::time_point start = Clock::now();
  std::thread sender([&] {
    constexpr size_t kChunk = 64 << 10;
    const std::string chunk =
        absl::StrCat(absl::Hex(kChunk), "\r\n", std::string(kChunk, ' '), "\r\n");
    while (sent.load() < body_bytes && SendAll(fd, chunk)) sent += kChunk;
  });
  Refusal r;
  std::string answer;
  char buf[4096];
  while (Seconds(Clock::now() - start) < 120) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    if (answer.size() < 12 && answer.size() + static_cast<size_t>(n) >= 12) {
      r.answer_seconds = Seconds(Clock::now() - start);
      r.bytes_before_answer = sent.load();
    }
    answer.append(buf, static_cast<size_t>(n));
  }
  r.closed_seconds = Seconds(Clock::now() - start);
  shutdown(fd, SHUT_RDWR);  // ends the sender's blocked send
  sender.join();
  close(fd);
  // "HTTP/1.1 413 ..."
  if (answer.size() >= 12) r.status = std::atoi(answer.substr(9, 3).c_str());
  return r;
}

}  // namespace

absl::StatusOr<nlohmann::json> BenchChunkedBody(const std::string& http, int64_t body_bytes,
                                                int rounds, int daemon_pid) {
  absl::StatusOr<Target> target = Resolve(http);
  if (!target.ok()) return target.status();
  const ProcessSample before = SampleProcess(daemon_pid);
  // The daemon's resident bytes, sampled every 2 ms while the rounds run.
  std::atomic<bool> rounds_done{false};
  std::atomic<int64_t> peak_rss{before.rss_bytes};
  std::thread sampler([&] {
    while (daemon_pid > 0 && !rounds_done) {
      const int64_t rss = SampleProcess(daemon_pid).rss_bytes;
      if (rss > peak_rss) peak_rss = rss;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  std::vector<double> answer, closed, bytes_before;
  std::map<int, int> statuses;
  absl::Status failed;
  for (int round = 0; round < rounds && failed.ok(); ++round) {
    absl::StatusOr<Refusal> r = SendChunkedBody(*target, body_bytes);
    if (!r.ok()) {
      failed = r.status();
      break;
    }
    ++statuses[r->status];
    closed.push_back(r->closed_seconds);
    if (r->status == 0) continue;  // no answer: nothing to time
    answer.push_back(r->answer_seconds);
    bytes_before.push_back(static_cast<double>(r->bytes_before_answer));
  }
  rounds_done = true;
  sampler.join();
  if (!failed.ok()) return failed;
  nlohmann::json by_status = nlohmann::json::object();
  for (const auto& [status, n] : statuses) by_status[std::to_string(status)] = n;
  nlohmann::json out = {{"body_bytes", body_bytes},
                        {"rounds", rounds},
                        {"answers_by_status", by_status},
                        {"refused_all", statuses.size() == 1 && statuses.contains(413)},
                        {"answer_ms_p50", Median(answer) * 1e3},
                        {"answer_ms_max", Percentile(answer, 1) * 1e3},
                        {"closed_ms_p50", Median(closed) * 1e3},
                        {"bytes_sent_before_answer_p50", Median(bytes_before)}};
  if (daemon_pid > 0) {
    out["daemon_before"] = ToJson(before);
    out["daemon_peak_rss_growth_bytes"] = peak_rss.load() - before.rss_bytes;
  }
  return out;
}

namespace {

// ---- clients trickling their headers ---------------------------------------------------------

// `count` connections that each send the start of a request and then one more byte of a header
// value that never ends every `interval`; a connection the daemon closes is counted and opened
// again, so that `count` stay held.
class Trickle {
 public:
  Trickle(const Target& target, int count, double interval)
      : target_(target), interval_(interval), fds_(count, -1) {
    for (int i = 0; i < count; ++i) fds_[i] = Open(i);
    thread_ = std::thread([this] { Run(); });
  }
  ~Trickle() {
    stop_ = true;
    thread_.join();
    for (int fd : fds_) {
      if (fd >= 0) close(fd);
    }
  }

  // Connections open now, how many the daemon has closed so far, and failed attempts to open one.
  int held() const { return held_.load(); }
  int closed_by_daemon() const { return closed_.load(); }
  int open_failures() const { return failed_.load(); }

 private:
  static constexpr std::string_view kStart = "GET /v1/models HTTP/1.1\r\nHost: df11d\r\nX-Slow: ";

  int Open(int i) {
    const int fd = Connect(target_, i);
    if (fd < 0 || !SendAll(fd, kStart)) {
      if (fd >= 0) close(fd);
      ++failed_;
      return -1;
    }
    ++held_;
    return fd;
  }

  void Run() {
    while (!stop_) {
      const Clock::time_point next = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                        std::chrono::duration<double>(interval_));
      for (size_t i = 0; i < fds_.size() && !stop_; ++i) {
        int& fd = fds_[i];
        if (fd >= 0) {
          char c;
          const ssize_t got = recv(fd, &c, 1, MSG_DONTWAIT);
          const bool gone = got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
          const char byte = 'a';
          if (gone || got > 0 || send(fd, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
            close(fd);  // closed, or answered (a 408 or 431): the daemon let it go
            fd = -1;
            --held_;
            ++closed_;
          }
        }
        if (fd < 0) fd = Open(static_cast<int>(i));
      }
      while (!stop_ && Clock::now() < next) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }

  const Target target_;
  const double interval_;
  std::vector<int> fds_;
  std::atomic<bool> stop_{false};
  std::atomic<int> held_{0}, closed_{0}, failed_{0};
  std::thread thread_;
};

struct Served {
  std::vector<double> latencies;
  int errors = 0;
};

// `served` back to back for `seconds`.
Served Serve(double seconds, const ServedRequest& served) {
  Served out;
  for (const Clock::time_point start = Clock::now(); Seconds(Clock::now() - start) < seconds;) {
    const Clock::time_point t = Clock::now();
    if (served()) {
      out.latencies.push_back(Seconds(Clock::now() - t));
    } else {
      ++out.errors;
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<nlohmann::json> BenchSlowClients(const std::string& http, int slow_connections,
                                                double trickle, double seconds,
                                                const ServedRequest& served, int daemon_pid) {
  absl::StatusOr<Target> target = Resolve(http);
  if (!target.ok()) return target.status();
  const Served alone = Serve(seconds / 4, served);
  // After the requests alone: the HTTP handler threads they needed stay a while (30 s idle).
  const ProcessSample before = SampleProcess(daemon_pid);

  Trickle slow(*target, slow_connections, trickle);
  std::this_thread::sleep_for(std::chrono::duration<double>(std::max(1.0, trickle)));
  const int held_at_start = slow.held();
  const ProcessSample slow_held = SampleProcess(daemon_pid);
  const Served meanwhile = Serve(seconds, served);
  const ProcessSample slow_end = SampleProcess(daemon_pid);
  const int held_at_end = slow.held();

  nlohmann::json out = {{"slow_connections", slow_connections},
                        {"trickle_seconds", trickle},
                        {"held_at_start", held_at_start},
                        {"held_at_end", held_at_end},
                        {"slow_open_failures", slow.open_failures()},
                        {"slow_closed_by_daemon", slow.closed_by_daemon()},
                        {"seconds_with_slow_clients", seconds},
                        {"requests_alone", alone.latencies.size() + alone.errors},
                        {"requests_with_slow", meanwhile.latencies.size() + meanwhile.errors},
                        {"alone_ms_p50", Median(alone.latencies) * 1e3},
                        {"alone_ms_p99", Percentile(alone.latencies, 0.99) * 1e3},
                        {"alone_errors", alone.errors},
                        {"with_slow_ms_p50", Median(meanwhile.latencies) * 1e3},
                        {"with_slow_ms_p99", Percentile(meanwhile.latencies, 0.99) * 1e3},
                        {"with_slow_errors", meanwhile.errors},
                        {"p50_ratio", Median(meanwhile.latencies) / Median(alone.latencies)}};
  if (daemon_pid > 0) {
    out["daemon_before"] = ToJson(before);
    out["daemon_with_slow"] = ToJson(slow_held);
    out["daemon_threads_added"] = std::max(slow_held.threads, slow_end.threads) - before.threads;
  }
  return out;
}

}  // namespace df11::tool
