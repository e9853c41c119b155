#include "daemon/hub/http.h"

#include <curl/curl.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace df11::hub {
namespace {

// The most of an error response's body kept for its message.
constexpr size_t kMaxKeptBody = 64 << 10;

struct Exchange {
  HttpResponse* response;
  const BodySink* sink;
  const std::atomic<bool>* cancel;
};

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* x = static_cast<Exchange*>(user);
  const absl::string_view line(data, size * count);
  // Each response of a redirect chain starts with a status line: keep only the last one's headers.
  if (absl::StartsWith(line, "HTTP/")) {
    x->response->headers.clear();
    const std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
    int status = 0;
    x->response->status = parts.size() > 1 && absl::SimpleAtoi(parts[1], &status) ? status : 0;
    return line.size();
  }
  const size_t colon = line.find(':');
  if (colon == absl::string_view::npos) return line.size();
  x->response->headers[absl::AsciiStrToLower(line.substr(0, colon))] =
      std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  return line.size();
}

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* x = static_cast<Exchange*>(user);
  const size_t n = size * count;
  if (x->cancel != nullptr && x->cancel->load()) {
    x->response->cancelled = true;
    return CURL_WRITEFUNC_ERROR;
  }
  // Only a successful response's body is the file; an error's body is kept for its message.
  const bool to_sink = *x->sink && x->response->status >= 200 && x->response->status < 300;
  if (to_sink) {
    if (!(*x->sink)(data, n, *x->response)) {
      x->response->cancelled = true;
      return CURL_WRITEFUNC_ERROR;
    }
    x->response->body_bytes += n;
  } else if (x->response->body.size() < kMaxKeptBody || !*x->sink) {
    x->response->body.append(data, n);
    x->response->body_bytes += n;
  }
  return n;
}

int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* x = static_cast<Exchange*>(user);
  if (x->cancel != nullptr && x->cancel->load()) {
    x->response->cancelled = true;
    return 1;
  }
  return 0;
}

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

std::string HttpResponse::Header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? "" : it->second;
}

HttpSession::HttpSession(const std::atomic<bool>* cancel) : cancel_(cancel) {
  GlobalInit();
  curl_ = curl_easy_init();
}

HttpSession::~HttpSession() { curl_easy_cleanup(static_cast<CURL*>(curl_)); }

HttpResponse HttpSession::Send(const HttpRequest& request, const BodySink& sink) {
  HttpResponse response;
  CURL* curl = static_cast<CURL*>(curl_);
  if (curl == nullptr) {
    response.error = "libcurl could not be initialised";
    return response;
  }
  curl_easy_reset(curl);
  Exchange exchange{&response, &sink, cancel_};
  curl_slist* headers = nullptr;
  for (const std::string& h : request.headers) headers = curl_slist_append(headers, h.c_str());
  char error[CURL_ERROR_SIZE] = {0};
  const long timeout_ms = static_cast<long>(request.timeout_seconds * 1000);
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_NOBODY, request.method == "HEAD" ? 1L : 0L);
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, request.follow_redirects ? 1L : 0L);
  curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
  // Only http(s), also after redirects; never the token to another host (no UNRESTRICTED_AUTH).
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
  if (request.is_transfer) {
    // A stalled transfer fails after the timeout; a slow but moving one goes on.
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, std::max(1L, timeout_ms / 1000));
  } else {
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
  }
  if (request.range_start > 0) {
    const std::string range = absl::StrCat(request.range_start, "-");
    curl_easy_setopt(curl, CURLOPT_RANGE, range.c_str());
  }
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &exchange);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &exchange);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, OnProgress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &exchange);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, 1L << 20);

  const CURLcode code = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  char* effective = nullptr;
  curl_easy_getinfo(curl, CURLINFO_EFFECTIVE_URL, &effective);
  if (effective != nullptr) response.effective_url = effective;
  curl_slist_free_all(headers);
  if (code != CURLE_OK) {
    // A transfer cut after its headers is a network failure too: the caller resumes it.
    response.error = absl::StrCat(error[0] != 0 ? error : curl_easy_strerror(code), " (",
                                  request.method, " ", request.url, ")");
    if (response.cancelled) response.error = "cancelled";
    response.status = 0;
    return response;
  }
  response.status = status;
  return response;
}

std::string UrlOrigin(const std::string& url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return "";
  const std::string scheme = absl::AsciiStrToLower(url.substr(0, scheme_end));
  const size_t host_start = scheme_end + 3;
  size_t host_end = url.find_first_of("/?#", host_start);
  if (host_end == std::string::npos) host_end = url.size();
  std::string authority = absl::AsciiStrToLower(url.substr(host_start, host_end - host_start));
  if (const size_t at = authority.rfind('@'); at != std::string::npos) authority.erase(0, at + 1);
  const size_t bracket = authority.rfind(']');
  const size_t colon = authority.rfind(':');
  if (colon == std::string::npos || (bracket != std::string::npos && colon < bracket)) {
    absl::StrAppend(&authority, scheme == "https" ? ":443" : ":80");
  }
  return absl::StrCat(scheme, "://", authority);
}

std::string PercentEncode(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppendFormat(&out, "%%%02X", c);
    }
  }
  return out;
}

}  // namespace df11::hub
