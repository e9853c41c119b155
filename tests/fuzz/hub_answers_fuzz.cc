// libFuzzer target for reading the hub's answers (daemon/hub/hub_answers.h), which come from the
// network. The first byte picks the answer: 0 the revision JSON, 1 a tree page's JSON, 2 a `Link`
// header, 3 the headers of a HEAD on /resolve/ ("name: value" lines; the second byte picks the
// HTTP status), 4 the RateLimit and Retry-After headers of a 429.
//
// Whatever the bytes, parsing ends with kDataLoss or with values the client may use as they are:
// a full commit id; repository-relative file paths; a next link that is part of the header; a
// lower-case hex etag, a size and an absolute location; a wait of -1 or more. Violations trap.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "daemon/hub/cache.h"
#include "daemon/hub/http.h"
#include "daemon/hub/hub_answers.h"

namespace {

namespace hub = df11::hub;

void Require(bool condition) {
  if (!condition) __builtin_trap();
}

void RequireRefusedOrOk(const absl::Status& status) {
  Require(status.ok() || status.code() == absl::StatusCode::kDataLoss);
}

// "name: value" lines as the HTTP layer keeps them: lower-case names, the last value of each.
hub::HttpResponse Headers(long status, std::string_view text) {
  hub::HttpResponse r;
  r.status = status;
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    r.headers[absl::AsciiStrToLower(line.substr(0, colon))] =
        std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 5) {
    case 0: {
      absl::StatusOr<std::string> commit = hub::ParseRevisionAnswer(rest);
      RequireRefusedOrOk(commit.status());
      if (commit.ok()) Require(hub::IsCommit(*commit));
      break;
    }
    case 1: {
      absl::StatusOr<std::vector<hub::RepoFile>> files = hub::ParseTreePage(rest);
      RequireRefusedOrOk(files.status());
      if (files.ok()) {
        for (const hub::RepoFile& f : *files) Require(hub::IsRepoFilePath(f.path));
      }
      break;
    }
    case 2: {
      const std::string next = hub::NextLink(rest);
      Require(next.empty() || rest.find(next) != std::string_view::npos);
      break;
    }
    case 3: {
      if (rest.empty()) return 0;
      // 200, 206, 301, 302, 307, ... : a status in [200, 400) as the client passes on.
      const long status = 200 + static_cast<uint8_t>(rest[0]) % 200;
      const hub::HttpResponse head = Headers(status, rest.substr(1));
      absl::StatusOr<hub::FileMetadata> m =
          hub::ParseFileMetadata(head, "https://huggingface.co/org/model/resolve/main/x");
      RequireRefusedOrOk(m.status());
      if (m.ok()) {
        Require(hub::IsCommit(m->commit) && hub::IsEtag(m->etag));
        Require(!hub::UrlOrigin(m->location).empty());
      }
      break;
    }
    case 4: {
      const double wait = hub::RequestedWait(Headers(429, rest));
      Require(std::isfinite(wait) && wait >= -1);
      break;
    }
  }
  return 0;
}
