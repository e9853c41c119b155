#include "daemon/hub/peer_fetch.h"

#include <algorithm>
#include <atomic>
#include <future>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/hub/partial_blob.h"

namespace df11::hub {
namespace {

using Clock = std::chrono::steady_clock;

// The peers in random order, so that a fleet's loads spread over the nodes that hold a blob.
std::vector<std::string> Shuffled(std::vector<std::string> peers) {
  thread_local std::mt19937 random{std::random_device{}()};
  std::shuffle(peers.begin(), peers.end(), random);
  return peers;
}

// `ask(peer)` for every peer, `at_once` at a time, until `done` says an answer is enough.
template <typename T, typename Ask, typename Done>
void AskInGroups(const std::vector<std::string>& peers, int at_once, const Ask& ask,
                 const Done& done) {
  const size_t group = static_cast<size_t>(std::max(1, at_once));
  for (size_t first = 0; first < peers.size(); first += group) {
    std::vector<std::future<T>> answers;
    const size_t end = std::min(peers.size(), first + group);
    for (size_t i = first; i < end; ++i) {
      answers.push_back(
          std::async(std::launch::async, [&ask, &peers, i] { return ask(peers[i]); }));
    }
    bool enough = false;
    for (size_t i = first; i < end; ++i)
      enough = done(peers[i], answers[i - first].get()) || enough;
    if (enough) return;
  }
}

}  // namespace

ThroughputFloor::ThroughputFloor(const PeerFetchOptions& options, uint64_t bytes_now,
                                 Clock::time_point now)
    : min_bytes_per_second_(options.min_bytes_per_second),
      window_(options.window_seconds),
      window_start_(now),
      bytes_at_window_start_(bytes_now) {}

bool ThroughputFloor::Holds(uint64_t bytes_now, Clock::time_point now) {
  if (min_bytes_per_second_ <= 0 || now - window_start_ < window_) return true;
  const double seconds = std::chrono::duration<double>(now - window_start_).count();
  if (static_cast<double>(bytes_now - bytes_at_window_start_) < min_bytes_per_second_ * seconds) {
    return false;
  }
  window_start_ = now;
  bytes_at_window_start_ = bytes_now;
  return true;
}

PeerFetcher::PeerFetcher(std::shared_ptr<PeerSource> peers, const std::atomic<bool>* stop)
    : peers_(std::move(peers)), stop_(stop) {}

absl::StatusOr<PeerSnapshot> PeerFetcher::Resolve(const std::string& repo_id,
                                                  const std::string& revision) {
  const std::vector<std::string> peers = Shuffled(peers_->Peers());
  std::optional<PeerSnapshot> found;
  std::vector<std::string> answers;
  AskInGroups<absl::StatusOr<PeerSnapshot>>(
      peers, peers_->options().ask_at_once,
      [&](const std::string& peer) { return peers_->ResolveSnapshot(peer, repo_id, revision); },
      [&](const std::string& peer, absl::StatusOr<PeerSnapshot> answer) {
        if (answer.ok() && !found) {
          found = std::move(*answer);
          found->peer = peer;
        } else if (!answer.ok()) {
          answers.push_back(absl::StrCat(peer, ": ", answer.status().message()));
        }
        return found.has_value() || stopped();
      });
  if (found) return *std::move(found);
  if (stopped()) return absl::CancelledError("cancelled");
  return absl::NotFoundError(peers.empty() ? std::string("no peer is known")
                                           : absl::StrCat("no peer holds ", repo_id, "@", revision,
                                                          " (", absl::StrJoin(answers, "; "), ")"));
}

absl::StatusOr<std::string> PeerFetcher::Fetch(const std::string& repo_id, const std::string& etag,
                                               uint64_t size, const std::string& partial,
                                               const PeerFetchCallbacks& callbacks) {
  std::vector<std::string> peers;
  {
    absl::MutexLock lock(&mu_);
    for (const std::string& peer : Shuffled(peers_->Peers())) {
      if (!distrusted_.contains(absl::StrCat(peer, " ", etag))) peers.push_back(peer);
    }
  }
  absl::Status last = absl::NotFoundError(absl::StrCat("no peer holds blob ", etag));
  std::optional<std::string> served_by;
  AskInGroups<absl::StatusOr<std::optional<uint64_t>>>(
      peers, peers_->options().ask_at_once,
      [&](const std::string& peer) { return peers_->StatBlob(peer, repo_id, etag); },
      [&](const std::string& peer, absl::StatusOr<std::optional<uint64_t>> held) {
        if (served_by || stopped()) return true;
        if (!held.ok() || !held->has_value()) return false;
        if (**held != size) {
          last = absl::DataLossError(absl::StrCat(peer, " holds blob ", etag, " with ", **held,
                                                  " bytes, the listing says ", size));
          return false;
        }
        absl::Status status = FetchFrom(peer, repo_id, etag, size, partial, callbacks);
        if (status.ok()) {
          served_by = peer;
          return true;
        }
        if (absl::IsDataLoss(status)) {
          absl::MutexLock lock(&mu_);
          distrusted_.insert(absl::StrCat(peer, " ", etag));
        }
        last = absl::Status(status.code(), absl::StrCat(peer, ": ", status.message()));
        return false;
      });
  if (served_by) return *served_by;
  if (stopped()) return absl::CancelledError("cancelled");
  return last;
}

absl::Status PeerFetcher::FetchFrom(const std::string& peer, const std::string& repo_id,
                                    const std::string& etag, uint64_t size,
                                    const std::string& partial,
                                    const PeerFetchCallbacks& callbacks) {
  absl::StatusOr<std::unique_ptr<PartialBlob>> opened = PartialBlob::Open(partial, etag, size);
  if (!opened.ok()) return opened.status();
  PartialBlob& blob = **opened;
  if (callbacks.started) callbacks.started(peer);
  if (callbacks.progress && blob.size() > 0) callbacks.progress(blob.size());
  const uint64_t resumed_from = blob.size();
  ThroughputFloor floor(peers_->options(), resumed_from, Clock::now());
  std::atomic<bool> slow{false};
  std::atomic<uint64_t> held{resumed_from};  // blob.size(), for keep_going's thread
  absl::Status status;
  // A peer serving its most readers answers RESOURCE_EXHAUSTED: it is asked again, backing off,
  // for up to a window before the next source is tried.
  auto backoff = std::chrono::milliseconds(50);
  const Clock::time_point busy_until =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(peers_->options().window_seconds));
  while (blob.size() < size) {
    absl::Status local_error;  // the cache's, not the peer's (a full disk)
    status = peers_->ReadBlob(
        peer, repo_id, etag, blob.size(),
        [&](uint64_t offset, const char* data, size_t n) -> absl::Status {
          if (offset != blob.size()) {
            return absl::DataLossError(
                absl::StrCat("sent bytes from ", offset, " where ", blob.size(), " was next"));
          }
          if (absl::Status s = blob.Append(data, n); !s.ok()) {
            if (!absl::IsDataLoss(s)) local_error = s;
            return s;
          }
          held = blob.size();
          if (callbacks.received) callbacks.received(n);
          if (callbacks.progress) callbacks.progress(blob.size());
          return absl::OkStatus();
        },
        [&] {
          if (stopped()) return false;
          slow = !floor.Holds(held, Clock::now());
          return !slow;
        });
    if (!local_error.ok()) return local_error;
    if (!absl::IsResourceExhausted(status) || stopped() || Clock::now() + backoff > busy_until) {
      break;
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
    floor = ThroughputFloor(peers_->options(), blob.size(), Clock::now());
  }
  if (slow) {
    status = absl::DeadlineExceededError(
        absl::StrCat("slower than the floor of ", peers_->options().min_bytes_per_second,
                     " bytes/s over ", peers_->options().window_seconds, " s"));
  }
  if (absl::IsDataLoss(status)) {
    // A peer that sent wrong bytes may have sent others before them: none is kept.
    (void)blob.Restart();
    return status;
  }
  // Whatever ended the transfer, what arrived is kept for the next source to resume after.
  if (absl::Status s = blob.Flush(); !s.ok()) return s;
  if (!status.ok()) return status;
  if (blob.size() < size) {
    return absl::UnavailableError(
        absl::StrCat("the stream ended at ", blob.size(), " of ", size, " bytes"));
  }
  absl::Status finished = blob.Finish();
  if (absl::IsDataLoss(finished) && resumed_from > 0) {
    // The prefix another source left may be what is wrong (Finish removed it): this peer gets
    // a second chance with the whole blob, which settles whose bytes they were.
    return FetchFrom(peer, repo_id, etag, size, partial, callbacks);
  }
  return finished;
}

}  // namespace df11::hub
