#include "daemon/hub/hub_answers.h"

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "daemon/hub/cache.h"

namespace df11::hub {
namespace {

absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// json[key] when `json` is an object holding a string there, else "" (json::value throws on a
// field of another type, and these answers come from the network).
std::string StringField(const nlohmann::json& json, const char* key) {
  if (!json.is_object()) return "";
  auto it = json.find(key);
  return it != json.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

absl::StatusOr<std::string> ParseRevisionAnswer(std::string_view body) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  const std::string sha = StringField(j, "sha");
  if (!IsCommit(sha)) return absl::DataLossError("the hub's revision answer has no commit id");
  return sha;
}

absl::StatusOr<std::vector<RepoFile>> ParseTreePage(std::string_view body) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return absl::DataLossError("the answer is not a JSON array");
  std::vector<RepoFile> files;
  for (const nlohmann::json& e : j) {
    if (StringField(e, "type") != "file") continue;
    RepoFile f;
    f.path = StringField(e, "path");
    if (!IsRepoFilePath(f.path)) {
      return absl::DataLossError(
          absl::StrCat("the hub listed a file path that leaves the repository: \"",
                       f.path.substr(0, 200), "\""));
    }
    if (auto size = e.find("size"); size != e.end() && size->is_number_unsigned()) {
      f.size = size->get<uint64_t>();
    }
    if (auto lfs = e.find("lfs"); lfs != e.end()) f.lfs_sha256 = StringField(*lfs, "oid");
    f.git_oid = StringField(e, "oid");
    files.push_back(std::move(f));
  }
  return files;
}

std::string NextLink(std::string_view link) {
  for (absl::string_view part : absl::StrSplit(Sv(link), ',')) {
    if (!absl::StrContains(part, "rel=\"next\"")) continue;
    const size_t open = part.find('<'), close = part.find('>');
    if (open != absl::string_view::npos && close != absl::string_view::npos && open < close) {
      return std::string(part.substr(open + 1, close - open - 1));
    }
  }
  return "";
}

std::string NormalizeEtag(std::string_view etag) {
  absl::string_view v = absl::StripAsciiWhitespace(Sv(etag));
  absl::ConsumePrefix(&v, "W/");
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  return absl::AsciiStrToLower(v);
}

absl::StatusOr<FileMetadata> ParseFileMetadata(const HttpResponse& head, const std::string& url) {
  FileMetadata m;
  m.commit = head.Header("x-repo-commit");
  m.etag = NormalizeEtag(!head.Header("x-linked-etag").empty() ? head.Header("x-linked-etag")
                                                               : head.Header("etag"));
  const bool redirect = head.status >= 300;
  const std::string size = !head.Header("x-linked-size").empty() ? head.Header("x-linked-size")
                           : redirect                            ? ""
                                                                 : head.Header("content-length");
  m.location = redirect ? head.Header("location") : url;
  if (!IsCommit(m.commit) || !IsEtag(m.etag) || !absl::SimpleAtoi(size, &m.size)) {
    return absl::DataLossError(absl::StrCat(
        "the answer lacks a valid X-Repo-Commit, ETag or size: it did not come from the hub (a "
        "proxy?) (HTTP ",
        head.status, ")"));
  }
  if (m.location.empty() || UrlOrigin(m.location).empty()) {
    return absl::DataLossError(
        absl::StrCat("redirected to an invalid location \"", m.location.substr(0, 200), "\""));
  }
  return m;
}

double RequestedWait(const HttpResponse& answer) {
  const std::string rate = answer.Header("ratelimit");
  if (!rate.empty()) {
    int64_t remaining = -1, reset = -1;
    for (absl::string_view item : absl::StrSplit(rate, ';')) {
      item = absl::StripAsciiWhitespace(item);
      if (absl::ConsumePrefix(&item, "r=")) (void)absl::SimpleAtoi(item, &remaining);
      if (absl::ConsumePrefix(&item, "t=")) (void)absl::SimpleAtoi(item, &reset);
    }
    if (remaining == 0 && reset >= 0) return static_cast<double>(reset) + 1;
  }
  int64_t seconds;
  if (absl::SimpleAtoi(absl::StripAsciiWhitespace(answer.Header("retry-after")), &seconds) &&
      seconds >= 0) {
    return static_cast<double>(seconds);
  }
  return -1;
}

}  // namespace df11::hub
