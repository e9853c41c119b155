#include "daemon/hub/hub_client.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/types/optional.h"
#include "codec/base/random_bits.h"
#include "codec/base/status_macros.h"
#include "daemon/hub/cache.h"
#include "daemon/hub/partial_blob.h"

#ifndef DF11_VERSION
#define DF11_VERSION "0"
#endif

namespace df11::hub {
namespace {

// At most this many tree pages: a hub that keeps answering "next" does not loop forever.
constexpr int kMaxTreePages = 100000;
// Relative redirects followed by hand on a HEAD.
constexpr int kMaxRedirects = 10;
// The status payload holding the hub's X-Error-Code.
constexpr char kErrorCodePayload[] = "df11.dev/hub-error-code";

bool IsRetryable(const HttpResponse& r) {
  return r.status == 0 || r.status == 408 || r.status == 429 || r.status == 500 ||
         r.status == 502 || r.status == 503 || r.status == 504;
}

std::string NewTraceId() {
  const uint64_t a = base::RandomBits(), b = base::RandomBits();
  // A version-4 UUID, as huggingface_hub sends in X-Amzn-Trace-Id.
  return absl::StrFormat("%08x-%04x-4%03x-%04x-%012x", a >> 32, (a >> 16) & 0xffff, a & 0xfff,
                         0x8000 | ((b >> 48) & 0x3fff), b & 0xffffffffffffULL);
}

// "refs/pr/1" → refs%2Fpr%2F1; a path keeps its '/' and encodes each part.
std::string EncodePath(const std::string& path) {
  std::vector<std::string> parts;
  for (absl::string_view p : absl::StrSplit(path, '/'))
    parts.push_back(PercentEncode(std::string(p)));
  return absl::StrJoin(parts, "/");
}

// An answer that ParseX refused, with what was asked and the request id.
absl::Status FromAnswer(const absl::Status& status, const std::string& what,
                        const std::string& trace_id) {
  return absl::Status(status.code(),
                      absl::StrCat(what, ": ", status.message(), " (request id ", trace_id, ")"));
}

}  // namespace

HubClient::HubClient(const HubSettings& settings, const std::atomic<bool>* cancel)
    : settings_(settings), cancel_(cancel), http_(cancel) {}

std::string HubClient::ResolveUrl(const std::string& repo_id, const std::string& revision,
                                  const std::string& path) const {
  return absl::StrCat(settings_.endpoint, "/", repo_id, "/resolve/", PercentEncode(revision), "/",
                      EncodePath(path));
}

std::vector<std::string> HubClient::Headers(const std::string& url,
                                            const std::string& trace_id) const {
  std::vector<std::string> headers = {
      absl::StrCat("User-Agent: df11d/", DF11_VERSION, "; hf_hub/compatible; cpp"),
      absl::StrCat("X-Amzn-Trace-Id: ", trace_id),
      // Sizes and Range offsets are those of the file itself, never of a compressed body.
      "Accept-Encoding: identity",
  };
  if (!settings_.token.empty() && UrlOrigin(url) == UrlOrigin(settings_.endpoint)) {
    headers.push_back(absl::StrCat("Authorization: Bearer ", settings_.token));
  }
  return headers;
}

bool HubClient::Backoff(int attempt, const HttpResponse& response) {
  double wait = RequestedWait(response);
  if (wait < 0) {
    wait = std::min(settings_.max_retry_seconds,
                    settings_.retry_base_seconds * std::pow(2.0, attempt));
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait);
  while (std::chrono::steady_clock::now() < until) {
    if (cancel_ != nullptr && cancel_->load()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

HttpResponse HubClient::SendWithRetries(HttpRequest request, std::string* trace_id) {
  for (int attempt = 0;; ++attempt) {
    *trace_id = NewTraceId();
    request.headers = Headers(request.url, *trace_id);
    HttpResponse r = http_.Send(request);
    if (r.cancelled || !IsRetryable(r) || attempt >= settings_.max_retries) return r;
    if (!Backoff(attempt, r)) {
      r.cancelled = true;
      return r;
    }
  }
}

absl::Status HubClient::Error(const HttpResponse& r, const std::string& what,
                              const std::string& trace_id, int attempts) const {
  absl::Status status = Classify(r, what, trace_id, attempts);
  if (const std::string code = r.Header("x-error-code"); !code.empty()) {
    return WithHubErrorCode(std::move(status), code);
  }
  return status;
}

absl::Status WithHubErrorCode(absl::Status status, const std::string& code) {
  status.SetPayload(kErrorCodePayload, absl::Cord(code));
  return status;
}

std::string HubErrorCode(const absl::Status& status) {
  const absl::optional<absl::Cord> code = status.GetPayload(kErrorCodePayload);
  return code ? std::string(*code) : "";
}

absl::Status HubClient::Classify(const HttpResponse& r, const std::string& what,
                                 const std::string& trace_id, int attempts) const {
  if (r.cancelled) return absl::CancelledError(absl::StrCat(what, ": cancelled"));
  const std::string code = r.Header("x-error-code");
  const std::string message = r.Header("x-error-message");
  const std::string details =
      absl::StrCat(" (HTTP ", r.status, message.empty() ? "" : absl::StrCat(": ", message),
                   "; request id ", trace_id, ")");
  const bool token = !settings_.token.empty();
  if (r.status == 0) {
    return absl::UnavailableError(absl::StrCat(what, ": the hub ", settings_.endpoint,
                                               " is unreachable after ", attempts,
                                               " attempts: ", r.error));
  }
  if (code == "RevisionNotFound" || code == "EntryNotFound") {
    return absl::NotFoundError(absl::StrCat(what, ": not found", details));
  }
  if (code == "GatedRepo") {
    if (r.status == 401) {
      return absl::UnauthenticatedError(
          absl::StrCat(what, ": the repository is gated; ",
                       token ? "the hub rejected the token from " + settings_.token_source
                             : "set HF_TOKEN (or the hub.token_file setting) to a token",
                       " of an account that was granted access", details));
    }
    return absl::PermissionDeniedError(absl::StrCat(
        what, ": the repository is gated and access has not been granted to the token from ",
        settings_.token_source, "; request it on the model's page", details));
  }
  if (code == "RepoNotFound" ||
      (r.status == 401 && message != "Invalid credentials in Authorization header")) {
    return absl::NotFoundError(absl::StrCat(
        what, ": repository not found",
        token ? "" : " (if it is private or gated, set HF_TOKEN or hub.token_file)", details));
  }
  if (r.status == 401) {
    return absl::UnauthenticatedError(
        absl::StrCat(what, ": the hub rejected the token from ", settings_.token_source, details));
  }
  if (r.status == 403)
    return absl::PermissionDeniedError(absl::StrCat(what, ": forbidden", details));
  if (IsRetryable(r)) {
    return absl::UnavailableError(
        absl::StrCat(what, ": the hub kept failing after ", attempts, " attempts", details));
  }
  if (r.status == 400)
    return absl::InvalidArgumentError(absl::StrCat(what, ": bad request", details));
  return absl::UnknownError(absl::StrCat(what, ": unexpected answer", details));
}

HttpResponse HubClient::ApiGet(const std::string& url, std::string* trace_id) {
  return SendWithRetries({.method = "GET",
                          .url = url,
                          .headers = {},
                          .range_start = 0,
                          .follow_redirects = true,
                          .timeout_seconds = settings_.etag_timeout_seconds,
                          .is_transfer = false},
                         trace_id);
}

absl::StatusOr<std::string> HubClient::ResolveCommit(const std::string& repo_id,
                                                     const std::string& revision) {
  const std::string what = absl::StrCat(repo_id, "@", revision);
  std::string trace_id;
  const HttpResponse r = ApiGet(absl::StrCat(settings_.endpoint, "/api/models/", repo_id,
                                             "/revision/", PercentEncode(revision)),
                                &trace_id);
  if (r.status != 200) return Error(r, what, trace_id, settings_.max_retries + 1);
  absl::StatusOr<std::string> commit = ParseRevisionAnswer(r.body);
  if (!commit.ok()) return FromAnswer(commit.status(), what, trace_id);
  return commit;
}

absl::StatusOr<std::vector<RepoFile>> HubClient::ListFiles(const std::string& repo_id,
                                                           const std::string& commit) {
  const std::string what = absl::StrCat(repo_id, "@", commit, ": listing files");
  std::vector<RepoFile> files;
  std::string url = absl::StrCat(settings_.endpoint, "/api/models/", repo_id, "/tree/",
                                 PercentEncode(commit), "?recursive=true&expand=false");
  for (int page = 0; !url.empty(); ++page) {
    if (page >= kMaxTreePages) {
      return absl::DataLossError(absl::StrCat(what, ": more than ", kMaxTreePages, " pages"));
    }
    std::string trace_id;
    const HttpResponse r = ApiGet(url, &trace_id);
    if (r.status != 200) return Error(r, what, trace_id, settings_.max_retries + 1);
    absl::StatusOr<std::vector<RepoFile>> listed = ParseTreePage(r.body);
    if (!listed.ok()) return FromAnswer(listed.status(), what, trace_id);
    files.insert(files.end(), std::make_move_iterator(listed->begin()),
                 std::make_move_iterator(listed->end()));
    url = NextLink(r.Header("link"));
    // Pages come from the endpoint only: the token never follows a link elsewhere.
    if (!url.empty() && UrlOrigin(url) != UrlOrigin(settings_.endpoint)) {
      return absl::DataLossError(absl::StrCat(what, ": the next page is on another host: ", url));
    }
  }
  return files;
}

absl::StatusOr<FileMetadata> HubClient::FetchMetadata(const std::string& repo_id,
                                                      const std::string& revision,
                                                      const std::string& path) {
  const std::string what = absl::StrCat(repo_id, "@", revision, ": ", path);
  std::string url = ResolveUrl(repo_id, revision, path);
  std::string trace_id;
  HttpResponse r;
  for (int redirects = 0;; ++redirects) {
    r = SendWithRetries({.method = "HEAD",
                         .url = url,
                         .headers = {},
                         .range_start = 0,
                         .follow_redirects = false,
                         .timeout_seconds = settings_.etag_timeout_seconds,
                         .is_transfer = false},
                        &trace_id);
    const std::string location = r.Header("location");
    // Only a relative redirect (a renamed repository) is followed: an absolute one is the CDN.
    const bool relative = r.status >= 300 && r.status < 400 && !location.empty() &&
                          location.front() == '/' && !absl::StartsWith(location, "//");
    if (!relative) break;
    if (redirects >= kMaxRedirects) {
      return absl::UnavailableError(absl::StrCat(what, ": too many redirects"));
    }
    url = absl::StrCat(UrlOrigin(settings_.endpoint), location);
  }
  if (r.status < 200 || r.status >= 400) return Error(r, what, trace_id, settings_.max_retries + 1);
  absl::StatusOr<FileMetadata> metadata = ParseFileMetadata(r, url);
  if (!metadata.ok()) return FromAnswer(metadata.status(), what, trace_id);
  return metadata;
}

absl::Status HubClient::Download(const std::string& repo_id, const std::string& path,
                                 const FileMetadata& metadata, const std::string& partial,
                                 const std::function<void(uint64_t)>& progress) {
  const std::string what = absl::StrCat(repo_id, "@", metadata.commit, ": ", path);
  if (metadata.size > settings_.max_file_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": ", metadata.size,
                                                     " bytes is more than the limit of ",
                                                     settings_.max_file_bytes, " per file"));
  }
  // A full disk names the file and its size too.
  auto with_file = [&](absl::Status status) {
    if (!absl::IsResourceExhausted(status)) return status;
    return absl::ResourceExhaustedError(
        absl::StrCat(what, " (", metadata.size, " bytes): ", status.message()));
  };
  // What an earlier, interrupted download (from the hub or a peer) left is hashed, then resumed.
  absl::StatusOr<std::unique_ptr<PartialBlob>> opened =
      PartialBlob::Open(partial, metadata.etag, metadata.size);
  if (!opened.ok()) return with_file(opened.status());
  PartialBlob& file = **opened;
  if (file.size() > 0) progress(file.size());

  std::string url = metadata.location;
  bool refreshed = false;
  int failures = 0;
  while (file.size() < metadata.size) {
    absl::Status sink_error;
    bool first = true;
    const uint64_t before = file.size();
    const std::string trace_id = NewTraceId();
    const HttpRequest request{.method = "GET",
                              .url = url,
                              .headers = Headers(url, trace_id),
                              .range_start = file.size(),
                              .follow_redirects = true,
                              .timeout_seconds = settings_.download_timeout_seconds,
                              .is_transfer = true};
    const HttpResponse r =
        http_.Send(request, [&](const char* data, size_t size, const HttpResponse& head) {
          if (first) {
            first = false;
            // A server that ignores Range sends the whole file again.
            if (head.status == 200 && file.size() > 0) {
              sink_error = file.Restart();
              if (!sink_error.ok()) return false;
            }
            if (head.status == 206) {
              const std::string range = head.Header("content-range");
              uint64_t start = 0;
              absl::string_view v = range;
              if (!absl::ConsumePrefix(&v, "bytes ") ||
                  !absl::SimpleAtoi(v.substr(0, v.find('-')), &start) || start != file.size()) {
                sink_error = absl::DataLossError(absl::StrCat(
                    what, ": asked for bytes from ", file.size(), ", got \"", range, "\""));
                return false;
              }
            }
          }
          sink_error = file.Append(data, size);
          if (!sink_error.ok()) return false;
          progress(file.size());
          return true;
        });
    if (!sink_error.ok()) {
      if (absl::IsDataLoss(sink_error)) {
        // Whatever the file holds is suspect: the next download starts it again.
        std::remove(partial.c_str());
        return absl::DataLossError(absl::StrCat(what, ": ", sink_error.message()));
      }
      return with_file(sink_error);
    }
    // Whatever ended the transfer, what arrived is kept, so that a retry or a later download
    // resumes after it.
    if (absl::Status s = file.Flush(); !s.ok()) return with_file(s);
    if (r.cancelled) return absl::CancelledError(absl::StrCat(what, ": cancelled"));
    if ((r.status == 200 || r.status == 206) && file.size() == metadata.size) break;
    if (r.status == 416 && file.size() == metadata.size) break;
    const bool transient = r.status == 0 || r.status == 200 || r.status == 206 || IsRetryable(r);
    if (r.status == 403 && url != ResolveUrl(repo_id, metadata.commit, path) && !refreshed) {
      // A presigned URL that expired: ask the hub for a fresh one, once.
      refreshed = true;
      absl::StatusOr<FileMetadata> fresh = FetchMetadata(repo_id, metadata.commit, path);
      if (!fresh.ok()) return fresh.status();
      if (fresh->etag != metadata.etag) {
        return absl::DataLossError(absl::StrCat(what, ": the file changed during the download"));
      }
      url = fresh->location;
      continue;
    }
    if (!transient) return Error(r, what, trace_id, failures + 1);
    // Progress resets the count: only consecutive failures without a byte give up.
    failures = file.size() > before ? 0 : failures + 1;
    if (failures > settings_.max_retries) {
      HttpResponse cut;  // a body that keeps ending early is a network failure
      cut.error = "the connection keeps closing before the end of the file";
      return Error(r.status == 0 || IsRetryable(r) ? r : cut, what, trace_id, failures);
    }
    if (!Backoff(std::max(0, failures - 1), r)) return absl::CancelledError(what + ": cancelled");
  }
  if (absl::Status s = file.Finish(); !s.ok()) {
    if (absl::IsDataLoss(s)) return absl::DataLossError(absl::StrCat(what, ": ", s.message()));
    return with_file(s);
  }
  return absl::OkStatus();
}

}  // namespace df11::hub
