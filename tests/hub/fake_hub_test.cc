// The fake hub speaks the hub's HTTP protocol (fake_hub.h lists it) exactly: checked here
// with a plain HTTP client (and a raw socket for keep-alive), since the hub client's own tests
// rely on it. Expected ids come from git and sha256sum, not from the fake's code.
#include "tests/hub/fake_hub.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/loopback.h"

namespace df11::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// `printf 'hello\n' | git hash-object --stdin`, `| sha256sum`, and the git id of its LFS pointer.
constexpr char kHello[] = "hello\n";
constexpr char kHelloGitOid[] = "ce013625030ba8dba906f756967f9e9ca394464a";
constexpr char kHelloSha256[] = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";
constexpr char kHelloPointerOid[] = "fa61e1ef71c9908c0926776a4aa3504b3a27f159";
constexpr int kHelloPointerSize = 126;
constexpr char kConfig[] = R"({"a":1})";
constexpr char kConfigGitOid[] = "daa5053ecf5f9a37b2de733d0751cc1ab53ac010";
constexpr char kWeights[] = "weights!";
constexpr char kWeightsSha256[] =
    "fa47a1dc2eaad8414f129b768e1bc3ab746de3ee7d73d82c9356a9ca2ad772f4";
constexpr char kWeightsPointerOid[] = "db73ce418900baa269dcf545ef342427e894e21e";
constexpr char kEmptyGitOid[] = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391";
// `git rev-parse HEAD:sub HEAD:sub/deep` for sub/a.txt and sub/deep/b.txt holding kHello.
constexpr char kSubTreeOid[] = "731e94eceed766361a13712829f367c7b468be75";
constexpr char kDeepTreeOid[] = "dd5a3627ad3d4a1eaa9b180972bab37891a5e101";

FakeFile File(std::string path, std::string content, std::string disk_path, bool lfs) {
  FakeFile f;
  f.path = std::move(path);
  f.content = std::move(content);
  f.disk_path = std::move(disk_path);
  f.lfs = lfs;
  return f;
}
FakeFile Git(std::string path, std::string content) {
  return File(std::move(path), std::move(content), "", false);
}
FakeFile Lfs(std::string path, std::string content) {
  return File(std::move(path), std::move(content), "", true);
}

std::string Sha256(absl::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), out, &len, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) absl::StrAppend(&hex, absl::Hex(out[i], absl::kZeroPad2));
  return hex;
}

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

int Port(const std::string& endpoint) {
  int port = 0;
  EXPECT_TRUE(absl::SimpleAtoi(endpoint.substr(endpoint.rfind(':') + 1), &port));
  return port;
}

// Sends each request in turn on one TCP connection; returns each response's head and body, or
// fewer if the server closes the connection.
std::vector<std::pair<std::string, std::string>> Exchange(
    int port, const std::vector<std::string>& requests) {
  std::vector<std::pair<std::string, std::string>> responses;
  const int fd = ConnectLoopback(port);
  if (fd < 0) return responses;
  timeval tv{.tv_sec = 5, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string buffer;
  for (const std::string& request : requests) {
    if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(request.size())) {
      break;
    }
    const bool head_request = absl::StartsWith(request, "HEAD ");
    size_t head_end = std::string::npos;
    size_t body_size = 0;
    while (true) {
      if (head_end == std::string::npos &&
          (head_end = buffer.find("\r\n\r\n")) != std::string::npos) {
        std::string head = absl::AsciiStrToLower(buffer.substr(0, head_end));
        size_t at = head.find("\r\ncontent-length: ");
        if (at != std::string::npos && !head_request) {
          const size_t line_end = head.find("\r\n", at + 2);
          if (!absl::SimpleAtoi(head.substr(at + 18, line_end - at - 18), &body_size)) {
            ADD_FAILURE() << "bad Content-Length in " << head;
          }
        }
      }
      if (head_end != std::string::npos && buffer.size() >= head_end + 4 + body_size) break;
      char chunk[65536];
      ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
      if (n <= 0) {
        close(fd);
        return responses;
      }
      buffer.append(chunk, static_cast<size_t>(n));
    }
    responses.emplace_back(buffer.substr(0, head_end), buffer.substr(head_end + 4, body_size));
    buffer.erase(0, head_end + 4 + body_size);
  }
  close(fd);
  return responses;
}

// The raw head (status line and headers) of one request. httplib's client percent-decodes header
// values, so Location and Link are checked here as sent.
std::string RawHead(const std::string& endpoint, const std::string& method,
                    const std::string& target, const std::string& extra_headers = "") {
  auto responses = Exchange(Port(endpoint),
                            {absl::StrCat(method, " ", target, " HTTP/1.1\r\nHost: 127.0.0.1\r\n",
                                          extra_headers, "\r\n")});
  return responses.empty() ? "" : responses[0].first;
}

// The value of header `name` in a raw head, or "".
std::string HeaderOf(const std::string& head, const std::string& name) {
  for (absl::string_view line : absl::StrSplit(head, "\r\n")) {
    if (line.size() > name.size() && line[name.size()] == ':' &&
        absl::EqualsIgnoreCase(line.substr(0, name.size()), name)) {
      return std::string(absl::StripLeadingAsciiWhitespace(line.substr(name.size() + 1)));
    }
  }
  return "";
}

class FakeHubTest : public ::testing::Test {
 protected:
  FakeHubTest() : hub_client_(hub_.endpoint()), cdn_client_(hub_.cdn_endpoint()) {
    // Send paths exactly as written: httplib would escape '+' and spaces again.
    hub_client_.set_url_encode(false);
    cdn_client_.set_url_encode(false);
    hub_client_.set_keep_alive(true);
    cdn_client_.set_keep_alive(true);
  }

  // The standard repo: two commits on main, the first also tagged v1 and refs/pr/1.
  void AddModel() {
    first_ = hub_.AddCommit("org/model", "main", {Git("config.json", "{}")});
    hub_.AddTag("org/model", "v1", first_);
    hub_.AddTag("org/model", "refs/pr/1", first_);
    commit_ =
        hub_.AddCommit("org/model", "main",
                       {Git("config.json", kConfig), Lfs("model.safetensors", kWeights),
                        Git("sub/a.txt", kHello), Git("sub/deep/b.txt", kHello), Git("z.txt", "")});
  }

  // The CDN path and query that a HEAD of `resolve_path` redirects to.
  std::string CdnTarget(const std::string& resolve_path) {
    std::string location = HeaderOf(RawHead(hub_.endpoint(), "HEAD", resolve_path), "Location");
    EXPECT_THAT(location, StartsWith(hub_.cdn_endpoint() + "/"));
    return location.substr(hub_.cdn_endpoint().size());
  }

  FakeHub hub_;
  httplib::Client hub_client_;
  httplib::Client cdn_client_;
  std::string first_;
  std::string commit_;
};

TEST_F(FakeHubTest, EndpointsAreLoopbackOnTwoPorts) {
  EXPECT_THAT(hub_.endpoint(), StartsWith("http://127.0.0.1:"));
  EXPECT_THAT(hub_.cdn_endpoint(), StartsWith("http://127.0.0.1:"));
  EXPECT_NE(hub_.endpoint(), hub_.cdn_endpoint());
}

TEST_F(FakeHubTest, CommitIdsAre40LowercaseHexAndDistinct) {
  AddModel();
  for (const std::string& id : {first_, commit_}) {
    ASSERT_EQ(id.size(), 40u);
    for (char c : id) EXPECT_TRUE(absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f')) << id;
  }
  EXPECT_NE(first_, commit_);
}

TEST_F(FakeHubTest, RevisionInfoNamesShaAndSiblings) {
  AddModel();
  auto res = hub_client_.Get("/api/models/org/model/revision/main");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_THAT(res->get_header_value("Content-Type"), StartsWith("application/json"));
  nlohmann::json info = nlohmann::json::parse(res->body);
  EXPECT_EQ(info["id"], "org/model");
  EXPECT_EQ(info["sha"], commit_);
  EXPECT_EQ(info["private"], false);
  EXPECT_EQ(info["gated"], false);
  EXPECT_EQ(info["lastModified"], "2026-01-01T00:00:00.000Z");
  std::vector<std::string> names;
  for (const auto& s : info["siblings"]) names.push_back(s["rfilename"]);
  EXPECT_THAT(names, ElementsAre("config.json", "model.safetensors", "sub/a.txt", "sub/deep/b.txt",
                                 "z.txt"));
}

TEST_F(FakeHubTest, RevisionInfoWithBlobsAddsSizesAndLfs) {
  AddModel();
  auto res = hub_client_.Get("/api/models/org/model/revision/main?blobs=true");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  nlohmann::json siblings = nlohmann::json::parse(res->body)["siblings"];
  ASSERT_EQ(siblings.size(), 5u);
  EXPECT_EQ(siblings[0],
            nlohmann::json::parse(absl::StrCat(R"({"rfilename":"config.json","blobId":")",
                                               kConfigGitOid, R"(","size":7})")));
  EXPECT_EQ(siblings[1], nlohmann::json::parse(
                             absl::StrCat(R"({"rfilename":"model.safetensors","blobId":")",
                                          kWeightsPointerOid, R"(","size":8,"lfs":{"sha256":")",
                                          kWeightsSha256, R"(","size":8,"pointerSize":126}})")));
}

TEST_F(FakeHubTest, RevisionResolvesTagsPrRefsAndCommitIds) {
  AddModel();
  for (const std::string& rev : {std::string("v1"), std::string("refs%2Fpr%2F1"), first_}) {
    auto res = hub_client_.Get("/api/models/org/model/revision/" + rev);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << rev;
    nlohmann::json info = nlohmann::json::parse(res->body);
    EXPECT_EQ(info["sha"], first_) << rev;
    ASSERT_EQ(info["siblings"].size(), 1u) << rev;  // a commit holds its full tree, not a diff
    EXPECT_EQ(info["siblings"][0]["rfilename"], "config.json");
  }
  auto res = hub_client_.Get("/api/models/org/model/revision/" + commit_);
  ASSERT_TRUE(res);
  EXPECT_EQ(nlohmann::json::parse(res->body)["sha"], commit_);
}

TEST_F(FakeHubTest, UnknownRepoIsRepoNotFound) {
  AddModel();
  auto api = hub_client_.Get("/api/models/org/nope/revision/main");
  ASSERT_TRUE(api);
  EXPECT_EQ(api->status, 404);
  EXPECT_EQ(api->get_header_value("X-Error-Code"), "RepoNotFound");
  EXPECT_EQ(api->get_header_value("X-Error-Message"), "Repository not found");
  auto head = hub_client_.Head("/org/nope/resolve/main/config.json");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 404);
  EXPECT_EQ(head->get_header_value("X-Error-Code"), "RepoNotFound");
  EXPECT_EQ(head->get_header_value("X-Error-Message"), "Repository not found");
  EXPECT_FALSE(head->has_header("X-Repo-Commit"));
}

TEST_F(FakeHubTest, UnknownRevisionIsRevisionNotFound) {
  AddModel();
  auto api = hub_client_.Get("/api/models/org/model/revision/nope");
  ASSERT_TRUE(api);
  EXPECT_EQ(api->status, 404);
  EXPECT_EQ(api->get_header_value("X-Error-Code"), "RevisionNotFound");
  EXPECT_EQ(api->get_header_value("X-Error-Message"), "Invalid rev id: nope");
  auto head = hub_client_.Head("/org/model/resolve/refs%2Fpr%2F9/config.json");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 404);
  EXPECT_EQ(head->get_header_value("X-Error-Code"), "RevisionNotFound");
  EXPECT_EQ(head->get_header_value("X-Error-Message"), "Invalid rev id: refs/pr/9");
}

TEST_F(FakeHubTest, TreeIsPagedByAbsoluteLinkNext) {
  AddModel();
  const std::string first_page = "/api/models/org/model/tree/main?recursive=true&expand=false";
  std::string target = first_page;
  std::vector<nlohmann::json> entries;
  std::vector<std::string> links;
  for (int pages = 0; !target.empty(); ++pages) {
    ASSERT_LT(pages, 10);
    auto res = hub_client_.Get(target);
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << target;
    nlohmann::json page = nlohmann::json::parse(res->body);
    EXPECT_LE(page.size(), 2u);
    for (auto& e : page) entries.push_back(e);
    target.clear();
    if (res->has_header("Link")) {
      std::string link = res->get_header_value("Link");
      links.push_back(link);
      ASSERT_THAT(link, StartsWith("<" + hub_.endpoint()));
      ASSERT_TRUE(absl::EndsWith(link, ">; rel=\"next\"")) << link;
      target = link.substr(1 + hub_.endpoint().size(), link.find('>') - 1 - hub_.endpoint().size());
    }
  }
  ASSERT_EQ(links.size(), 3u);
  EXPECT_EQ(links[0], "<" + hub_.endpoint() +
                          "/api/models/org/model/tree/main?recursive=true&expand=false&cursor=2>; "
                          "rel=\"next\"");
  const nlohmann::json want = nlohmann::json::parse(absl::StrCat(
      R"([{"type":"file","oid":")", kConfigGitOid, R"(","size":7,"path":"config.json"},)",
      R"({"type":"file","oid":")", kWeightsPointerOid,
      R"(","size":8,"path":"model.safetensors","lfs":{"oid":")", kWeightsSha256,
      R"(","size":8,"pointerSize":126}},)", R"({"type":"directory","oid":")", kSubTreeOid,
      R"(","size":0,"path":"sub"},)", R"({"type":"file","oid":")", kHelloGitOid,
      R"(","size":6,"path":"sub/a.txt"},)", R"({"type":"directory","oid":")", kDeepTreeOid,
      R"(","size":0,"path":"sub/deep"},)", R"({"type":"file","oid":")", kHelloGitOid,
      R"(","size":6,"path":"sub/deep/b.txt"},)", R"({"type":"file","oid":")", kEmptyGitOid,
      R"(","size":0,"path":"z.txt"}])"));
  ASSERT_EQ(entries.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(entries[i], want[i]) << i;
}

TEST_F(FakeHubTest, LfsPointerOidIsTheGitIdOfThePointerFile) {
  hub_.AddCommit("org/model", "main", {Lfs("hello.bin", kHello)});
  auto res = hub_client_.Get("/api/models/org/model/tree/main?recursive=true&expand=false");
  ASSERT_TRUE(res);
  nlohmann::json page = nlohmann::json::parse(res->body);
  ASSERT_EQ(page.size(), 1u);
  EXPECT_EQ(page[0]["oid"], kHelloPointerOid);
  EXPECT_EQ(page[0]["size"], 6);
  EXPECT_EQ(page[0]["lfs"]["oid"], kHelloSha256);
  EXPECT_EQ(page[0]["lfs"]["pointerSize"], kHelloPointerSize);
}

TEST_F(FakeHubTest, TreeWithoutRecursiveListsTheTopLevelOrOneFolder) {
  AddModel();
  hub_.SetTreePageSize(100);
  auto top = hub_client_.Get("/api/models/org/model/tree/main");
  ASSERT_TRUE(top);
  ASSERT_EQ(top->status, 200);
  std::vector<std::string> paths;
  for (const auto& e : nlohmann::json::parse(top->body)) paths.push_back(e["path"]);
  EXPECT_THAT(paths, ElementsAre("config.json", "model.safetensors", "sub", "z.txt"));
  EXPECT_FALSE(top->has_header("Link"));

  auto sub = hub_client_.Get("/api/models/org/model/tree/main/sub?recursive=false");
  ASSERT_TRUE(sub);
  ASSERT_EQ(sub->status, 200);
  paths.clear();
  for (const auto& e : nlohmann::json::parse(sub->body)) paths.push_back(e["path"]);
  EXPECT_THAT(paths, ElementsAre("sub/a.txt", "sub/deep"));

  auto missing = hub_client_.Get("/api/models/org/model/tree/main/nope");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(missing->get_header_value("X-Error-Code"), "EntryNotFound");
}

TEST_F(FakeHubTest, TreeOfAnEncodedPrRefKeepsItEncodedInLinkNext) {
  AddModel();
  hub_.AddCommit("org/model", "scratch", {Git("a", "1"), Git("b", "2"), Git("c", "3")});
  hub_.AddTag("org/model", "refs/pr/2", "scratch");
  auto res =
      hub_client_.Get("/api/models/org/model/tree/refs%2Fpr%2F2?recursive=true&expand=false");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  EXPECT_EQ(nlohmann::json::parse(res->body).size(), 2u);
  EXPECT_EQ(
      HeaderOf(RawHead(hub_.endpoint(), "GET",
                       "/api/models/org/model/tree/refs%2Fpr%2F2?recursive=true&expand=false"),
               "Link"),
      "<" + hub_.endpoint() +
          "/api/models/org/model/tree/refs%2Fpr%2F2?recursive=true&expand=false&cursor=2>; "
          "rel=\"next\"");
}

TEST_F(FakeHubTest, HeadOfGitFileAnswersEtagSizeAndCommit) {
  AddModel();
  auto res = hub_client_.Head("/org/model/resolve/main/config.json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("ETag"), absl::StrCat("\"", kConfigGitOid, "\""));
  EXPECT_EQ(res->get_header_value("Content-Length"), "7");
  EXPECT_EQ(res->get_header_value("X-Repo-Commit"), commit_);
  EXPECT_FALSE(res->has_header("X-Linked-Etag"));
  EXPECT_FALSE(res->has_header("Location"));
  EXPECT_EQ(res->body, "");
  EXPECT_EQ(hub_.body_bytes_sent("org/model", "config.json"), 0);
}

TEST_F(FakeHubTest, GetOfGitFileHonoursRange) {
  AddModel();
  const std::string path = "/org/model/resolve/main/config.json";  // {"a":1}
  auto full = hub_client_.Get(path);
  ASSERT_TRUE(full);
  EXPECT_EQ(full->status, 200);
  EXPECT_EQ(full->body, kConfig);
  EXPECT_EQ(full->get_header_value("X-Repo-Commit"), commit_);
  EXPECT_FALSE(full->has_header("Content-Range"));

  struct Case {
    std::string range, content_range, body;
  };
  for (const Case& c :
       {Case{"bytes=2-", "bytes 2-6/7", "a\":1}"}, Case{"bytes=1-3", "bytes 1-3/7", "\"a\""},
        Case{"bytes=5-100", "bytes 5-6/7", "1}"}, Case{"bytes=-2", "bytes 5-6/7", "1}"},
        Case{"bytes=0-0", "bytes 0-0/7", "{"}}) {
    auto res = hub_client_.Get(path, {{"Range", c.range}});
    ASSERT_TRUE(res) << c.range;
    EXPECT_EQ(res->status, 206) << c.range;
    EXPECT_EQ(res->get_header_value("Content-Range"), c.content_range) << c.range;
    EXPECT_EQ(res->get_header_value("Content-Length"), std::to_string(c.body.size())) << c.range;
    EXPECT_EQ(res->body, c.body) << c.range;
  }
  // Several ranges: the RFC lets a server ignore Range, and the fake does.
  auto several = hub_client_.Get(path, {{"Range", "bytes=0-1,3-4"}});
  ASSERT_TRUE(several);
  EXPECT_EQ(several->status, 200);
  EXPECT_EQ(several->body, kConfig);
  auto unsatisfiable = hub_client_.Get(path, {{"Range", "bytes=7-"}});
  ASSERT_TRUE(unsatisfiable);
  EXPECT_EQ(unsatisfiable->status, 416);
  EXPECT_EQ(unsatisfiable->get_header_value("Content-Range"), "bytes */7");
  EXPECT_EQ(hub_.body_bytes_sent("org/model", "config.json"), 7 + 5 + 3 + 2 + 2 + 1 + 7);
}

TEST_F(FakeHubTest, EmptyFileHasContentLengthZeroAndNoSatisfiableRange) {
  AddModel();
  auto head = hub_client_.Head("/org/model/resolve/main/z.txt");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->get_header_value("Content-Length"), "0");
  EXPECT_EQ(head->get_header_value("ETag"), absl::StrCat("\"", kEmptyGitOid, "\""));
  auto get = hub_client_.Get("/org/model/resolve/main/z.txt");
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 200);
  EXPECT_EQ(get->body, "");
  auto range = hub_client_.Get("/org/model/resolve/main/z.txt", {{"Range", "bytes=0-"}});
  ASSERT_TRUE(range);
  EXPECT_EQ(range->status, 416);
  EXPECT_EQ(range->get_header_value("Content-Range"), "bytes */0");
}

TEST_F(FakeHubTest, LfsFileRedirectsToTheCdnWhichServesRanges) {
  AddModel();
  const std::string path = "/org/model/resolve/main/model.safetensors";
  auto head = hub_client_.Head(path);
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 302);
  const std::string quoted = absl::StrCat("\"", kWeightsSha256, "\"");
  EXPECT_EQ(head->get_header_value("X-Linked-Etag"), quoted);
  EXPECT_EQ(head->get_header_value("ETag"), quoted);
  EXPECT_EQ(head->get_header_value("X-Linked-Size"), "8");
  EXPECT_EQ(head->get_header_value("X-Repo-Commit"), commit_);
  const std::string location = HeaderOf(RawHead(hub_.endpoint(), "HEAD", path), "Location");
  EXPECT_THAT(location, StartsWith(absl::StrCat(hub_.cdn_endpoint(), "/blobs/", kWeightsSha256,
                                                "?repo=org%2Fmodel&file=model.safetensors&")));
  EXPECT_EQ(head->body, "");

  auto get = hub_client_.Get(path);
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 302);
  EXPECT_EQ(get->get_header_value("X-Linked-Size"), "8");
  EXPECT_THAT(get->body, StartsWith("Found. Redirecting to " +
                                    location.substr(0, location.find("&expires="))));
  EXPECT_EQ(hub_.body_bytes_sent("org/model", "model.safetensors"), 0);

  const std::string blob = CdnTarget(path);
  auto cdn_head = cdn_client_.Head(blob);
  ASSERT_TRUE(cdn_head);
  EXPECT_EQ(cdn_head->status, 200);
  EXPECT_EQ(cdn_head->get_header_value("Content-Length"), "8");
  auto body = cdn_client_.Get(blob);
  ASSERT_TRUE(body);
  EXPECT_EQ(body->status, 200);
  EXPECT_EQ(body->body, kWeights);
  auto part = cdn_client_.Get(blob, {{"Range", "bytes=3-"}});
  ASSERT_TRUE(part);
  EXPECT_EQ(part->status, 206);
  EXPECT_EQ(part->get_header_value("Content-Range"), "bytes 3-7/8");
  EXPECT_EQ(part->body, "ghts!");
  auto bad = cdn_client_.Get(blob, {{"Range", "bytes=8-"}});
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 416);
  EXPECT_EQ(hub_.body_bytes_sent("org/model", "model.safetensors"), 8 + 5);
}

TEST_F(FakeHubTest, CdnRejectsAnyAuthorizationHeader) {
  AddModel();
  auto head = hub_client_.Head("/org/model/resolve/main/model.safetensors",
                               {{"Authorization", "Bearer hf_token"}});
  ASSERT_TRUE(head);
  ASSERT_EQ(head->status, 302);
  const std::string blob = CdnTarget("/org/model/resolve/main/model.safetensors");
  hub_.ClearRequests();
  for (const char* auth : {"Bearer hf_token", "Basic eDp5"}) {
    auto res = cdn_client_.Get(blob, {{"Authorization", auth}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 403);
    EXPECT_EQ(res->body, "Authorization header not allowed on presigned URL");
  }
  std::vector<FakeHub::Request> requests = hub_.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].server, "cdn");
  EXPECT_EQ(requests[0].path, blob);
  EXPECT_EQ(requests[0].authorization, "Bearer hf_token");
  EXPECT_EQ(requests[0].status, 403);
  EXPECT_EQ(hub_.body_bytes_sent("org/model", "model.safetensors"), 0);
}

TEST_F(FakeHubTest, CdnAnswers404ForUnknownBlobs) {
  AddModel();
  auto res = cdn_client_.Get(std::string("/blobs/") + kHelloSha256);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
}

TEST_F(FakeHubTest, MissingFileIsEntryNotFoundWithTheCommit) {
  AddModel();
  auto res = hub_client_.Head("/org/model/resolve/main/nope.json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_EQ(res->get_header_value("X-Error-Code"), "EntryNotFound");
  EXPECT_EQ(res->get_header_value("X-Error-Message"), "Entry not found");
  EXPECT_EQ(res->get_header_value("X-Repo-Commit"), commit_);
  auto old = hub_client_.Get("/org/model/resolve/v1/sub/a.txt");  // only in the later commit
  ASSERT_TRUE(old);
  EXPECT_EQ(old->status, 404);
  EXPECT_EQ(old->get_header_value("X-Error-Code"), "EntryNotFound");
  EXPECT_EQ(old->get_header_value("X-Repo-Commit"), first_);
}

TEST_F(FakeHubTest, RevisionAndPathSegmentsArePercentDecoded) {
  hub_.AddCommit("org/model", "main", {Git("my dir/a+b.txt", kHello)});
  hub_.AddTag("org/model", "refs/pr/1", "main");
  auto res = hub_client_.Get("/org/model/resolve/refs%2Fpr%2F1/my%20dir/a%2Bb.txt");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, kHello);
  EXPECT_EQ(hub_.body_bytes_sent("org/model", "my dir/a+b.txt"), 6);
}

TEST_F(FakeHubTest, GatedRepoWantsTheRightBearerToken) {
  hub_.SetGated("org/gated", "hf_good");
  const std::string commit = hub_.AddCommit("org/gated", "main", {Git("config.json", kConfig)});
  struct Case {
    httplib::Headers headers;
    int status;
  };
  for (const Case& c : {Case{{}, 401}, Case{{{"Authorization", "Bearer hf_bad"}}, 403},
                        Case{{{"Authorization", "Bearer hf_good"}}, 200}}) {
    auto api = hub_client_.Get("/api/models/org/gated/revision/main", c.headers);
    auto head = hub_client_.Head("/org/gated/resolve/main/config.json", c.headers);
    ASSERT_TRUE(api);
    ASSERT_TRUE(head);
    EXPECT_EQ(api->status, c.status);
    EXPECT_EQ(head->status, c.status);
    if (c.status == 200) {
      EXPECT_EQ(nlohmann::json::parse(api->body)["gated"], "manual");
      EXPECT_EQ(head->get_header_value("X-Repo-Commit"), commit);
    } else {
      EXPECT_EQ(api->get_header_value("X-Error-Code"), "GatedRepo");
      EXPECT_EQ(head->get_header_value("X-Error-Code"), "GatedRepo");
      EXPECT_THAT(head->get_header_value("X-Error-Message"), HasSubstr("org/gated"));
    }
  }
}

TEST_F(FakeHubTest, RenamedRepoAnswersRelativeRedirects) {
  const std::string commit = hub_.AddCommit("old/name", "main", {Git("config.json", kConfig)});
  hub_.RenameRepo("old/name", "new/name");
  struct Case {
    std::string method, target, location;
  };
  for (const Case& c :
       {Case{"HEAD", "/old/name/resolve/main/config.json", "/new/name/resolve/main/config.json"},
        Case{"GET", "/old/name/resolve/refs%2Fpr%2F1/a%20b.txt",
             "/new/name/resolve/refs%2Fpr%2F1/a%20b.txt"},
        Case{"GET", "/api/models/old/name/revision/main", "/api/models/new/name/revision/main"},
        Case{"GET", "/api/models/old/name/tree/main?recursive=true&expand=false",
             "/api/models/new/name/tree/main?recursive=true&expand=false"}}) {
    const std::string head = RawHead(hub_.endpoint(), c.method, c.target);
    EXPECT_THAT(head, StartsWith("HTTP/1.1 307 ")) << c.target;
    EXPECT_EQ(HeaderOf(head, "Location"), c.location) << c.target;
  }
  auto moved = hub_client_.Head("/new/name/resolve/main/config.json");
  ASSERT_TRUE(moved);
  EXPECT_EQ(moved->status, 200);
  EXPECT_EQ(moved->get_header_value("X-Repo-Commit"), commit);
}

TEST_F(FakeHubTest, FailNextAnswers429WithRetryAfterAndRateLimit) {
  AddModel();
  hub_.FailNext(2, 429, 7);
  auto api = hub_client_.Get("/api/models/org/model/revision/main");
  auto head = hub_client_.Head("/org/model/resolve/main/config.json");
  auto ok = hub_client_.Head("/org/model/resolve/main/config.json");
  ASSERT_TRUE(api);
  ASSERT_TRUE(head);
  ASSERT_TRUE(ok);
  for (const auto* res : {&api, &head}) {
    EXPECT_EQ((*res)->status, 429);
    EXPECT_EQ((*res)->get_header_value("Retry-After"), "7");
    EXPECT_EQ((*res)->get_header_value("RateLimit"), "\"api\";r=0;t=7");
  }
  EXPECT_EQ(ok->status, 200);
}

TEST_F(FakeHubTest, FailNextAppliesToTheCdnToo) {
  AddModel();
  auto redirect = hub_client_.Head("/org/model/resolve/main/model.safetensors");
  ASSERT_TRUE(redirect);
  const std::string blob = CdnTarget("/org/model/resolve/main/model.safetensors");
  hub_.FailNext(1, 503);
  auto failed = cdn_client_.Get(blob);
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->status, 503);
  EXPECT_FALSE(failed->has_header("Retry-After"));
  EXPECT_FALSE(failed->has_header("RateLimit"));
  hub_.FailNext(1, 500, 3);
  auto again = cdn_client_.Get(blob);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 500);
  EXPECT_EQ(again->get_header_value("Retry-After"), "3");
  EXPECT_FALSE(again->has_header("RateLimit"));
  auto ok = cdn_client_.Get(blob);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->body, kWeights);
  EXPECT_EQ(hub_.body_bytes_sent("org/model", "model.safetensors"), 8);
}

TEST_F(FakeHubTest, CutNextClosesTheConnectionMidBody) {
  const std::string big = RandomBytes(3 * 1024 * 1024 + 5, /*seed=*/1);
  hub_.AddCommit("org/model", "main", {Git("big.bin", big), Lfs("big.safetensors", big)});
  auto redirect = hub_client_.Head("/org/model/resolve/main/big.safetensors");
  ASSERT_TRUE(redirect);
  const std::string blob = CdnTarget("/org/model/resolve/main/big.safetensors");

  hub_.CutNext(2, 1500000);
  for (auto [client, target, file] :
       {std::tuple{&hub_client_, std::string("/org/model/resolve/main/big.bin"), "big.bin"},
        std::tuple{&cdn_client_, blob, "big.safetensors"}}) {
    std::string got;
    int status = 0;
    std::string content_length;
    auto res = client->Get(
        target,
        [&](const httplib::Response& r) {
          status = r.status;
          content_length = r.get_header_value("Content-Length");
          return true;
        },
        [&](const char* data, size_t n) {
          got.append(data, n);
          return true;
        });
    EXPECT_FALSE(res) << file;  // the connection closed short of Content-Length
    EXPECT_EQ(status, 200) << file;
    EXPECT_EQ(content_length, std::to_string(big.size())) << file;
    EXPECT_EQ(got.size(), 1500000u) << file;
    EXPECT_EQ(got, big.substr(0, got.size())) << file;
    EXPECT_EQ(hub_.body_bytes_sent("org/model", file), 1500000) << file;
  }
  // A resumed request gets the rest.
  httplib::Client fresh(hub_.endpoint());
  auto rest = fresh.Get("/org/model/resolve/main/big.bin", {{"Range", "bytes=1500000-"}});
  ASSERT_TRUE(rest);
  EXPECT_EQ(rest->status, 206);
  EXPECT_EQ(rest->body, big.substr(1500000));
  EXPECT_EQ(hub_.body_bytes_sent("org/model", "big.bin"), static_cast<int64_t>(big.size()));
}

TEST_F(FakeHubTest, IgnoreRangeNextAnswers200WithTheWholeBody) {
  AddModel();
  const std::string path = "/org/model/resolve/main/config.json";
  hub_.IgnoreRangeNext(1);
  auto plain = hub_client_.Get(path);  // no Range: does not use up the fault
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->status, 200);
  auto ignored = hub_client_.Get(path, {{"Range", "bytes=2-"}});
  ASSERT_TRUE(ignored);
  EXPECT_EQ(ignored->status, 200);
  EXPECT_FALSE(ignored->has_header("Content-Range"));
  EXPECT_EQ(ignored->body, kConfig);
  auto honoured = hub_client_.Get(path, {{"Range", "bytes=2-"}});
  ASSERT_TRUE(honoured);
  EXPECT_EQ(honoured->status, 206);
  EXPECT_EQ(honoured->body, "a\":1}");
}

TEST_F(FakeHubTest, ServeCorruptChangesOnlyTheBody) {
  AddModel();
  hub_.ServeCorrupt("org/model", "config.json", "0123456789");
  hub_.ServeCorrupt("org/model", "model.safetensors", "bad");
  auto head = hub_client_.Head("/org/model/resolve/main/config.json");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->get_header_value("Content-Length"), "7");
  EXPECT_EQ(head->get_header_value("ETag"), absl::StrCat("\"", kConfigGitOid, "\""));
  auto get = hub_client_.Get("/org/model/resolve/main/config.json");
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 200);
  EXPECT_EQ(get->body, "0123456789");
  EXPECT_EQ(get->get_header_value("ETag"), absl::StrCat("\"", kConfigGitOid, "\""));

  auto redirect = hub_client_.Head("/org/model/resolve/main/model.safetensors");
  ASSERT_TRUE(redirect);
  EXPECT_EQ(redirect->get_header_value("X-Linked-Size"), "8");
  auto blob = cdn_client_.Get(CdnTarget("/org/model/resolve/main/model.safetensors"));
  ASSERT_TRUE(blob);
  EXPECT_EQ(blob->status, 200);
  EXPECT_EQ(blob->body, "bad");
}

TEST_F(FakeHubTest, ThrottlePacesFileBodies) {
  const std::string body = RandomBytes(128 * 1024, /*seed=*/2);
  hub_.AddCommit("org/model", "main", {Git("slow.bin", body)});
  hub_.SetThrottle(256 * 1024);
  const auto start = std::chrono::steady_clock::now();
  auto res = hub_client_.Get("/org/model/resolve/main/slow.bin");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(res);
  EXPECT_EQ(res->body, body);
  EXPECT_GE(seconds, 0.45);  // 128 KiB at 256 KiB/s
  hub_.SetThrottle(0);
  auto fast = hub_client_.Get("/org/model/resolve/main/slow.bin");
  ASSERT_TRUE(fast);
  EXPECT_EQ(fast->body, body);
}

TEST_F(FakeHubTest, LatencyDelaysEveryResponse) {
  AddModel();
  hub_.SetLatency(150);
  for (bool cdn : {false, true}) {
    const auto start = std::chrono::steady_clock::now();
    auto res = cdn ? cdn_client_.Get("/blobs/unknown")
                   : hub_client_.Head("/org/model/resolve/main/config.json");
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_TRUE(res);
    EXPECT_GE(seconds, 0.15) << cdn;
  }
}

TEST_F(FakeHubTest, RequestsAreRecordedInOrder) {
  AddModel();
  const std::string blob = CdnTarget("/org/model/resolve/main/model.safetensors");
  hub_.ClearRequests();
  auto redirect = hub_client_.Head("/org/model/resolve/main/model.safetensors",
                                   {{"Authorization", "Bearer t"}});
  ASSERT_TRUE(redirect);
  ASSERT_TRUE(cdn_client_.Get(blob, {{"Range", "bytes=1-2"}}));
  ASSERT_TRUE(hub_client_.Get("/api/models/org/model/tree/main?recursive=true&expand=false"));
  std::vector<FakeHub::Request> r = hub_.requests();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].server, "hub");
  EXPECT_EQ(r[0].method, "HEAD");
  EXPECT_EQ(r[0].path, "/org/model/resolve/main/model.safetensors");
  EXPECT_EQ(r[0].authorization, "Bearer t");
  EXPECT_EQ(r[0].range, "");
  EXPECT_EQ(r[0].status, 302);
  EXPECT_EQ(r[1].server, "cdn");
  EXPECT_EQ(r[1].method, "GET");
  EXPECT_EQ(r[1].path, blob);
  EXPECT_EQ(r[1].range, "bytes=1-2");
  EXPECT_EQ(r[1].authorization, "");
  EXPECT_EQ(r[1].status, 206);
  EXPECT_EQ(r[2].path, "/api/models/org/model/tree/main?recursive=true&expand=false");
  EXPECT_EQ(r[2].status, 200);
  hub_.ClearRequests();
  EXPECT_TRUE(hub_.requests().empty());
}

TEST_F(FakeHubTest, KeepAliveServesManyRequestsOnOneConnection) {
  AddModel();
  const std::string request =
      "GET /org/model/resolve/main/config.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  std::vector<std::pair<std::string, std::string>> responses =
      Exchange(Port(hub_.endpoint()), std::vector<std::string>(12, request));
  ASSERT_EQ(responses.size(), 12u);
  for (const auto& [head, body] : responses) {
    EXPECT_THAT(head, StartsWith("HTTP/1.1 200 OK\r\n"));
    EXPECT_THAT(absl::AsciiStrToLower(head), ::testing::Not(HasSubstr("connection: close")));
    EXPECT_EQ(body, kConfig);
  }
}

TEST_F(FakeHubTest, SixteenParallelDownloads) {
  const std::string big = RandomBytes(4 * 1024 * 1024 + 3, /*seed=*/3);
  hub_.AddCommit("org/model", "main", {Git("a.bin", big), Lfs("b.safetensors", big)});
  auto redirect = hub_client_.Head("/org/model/resolve/main/b.safetensors");
  ASSERT_TRUE(redirect);
  const std::string blob = CdnTarget("/org/model/resolve/main/b.safetensors");
  std::vector<std::string> bodies(16);
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      httplib::Client client(i % 2 ? hub_.cdn_endpoint() : hub_.endpoint());
      auto res = client.Get(i % 2 ? blob : "/org/model/resolve/main/a.bin");
      if (res && res->status == 200) bodies[i] = std::move(res->body);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 16; ++i) EXPECT_TRUE(bodies[i] == big) << i;
  EXPECT_EQ(hub_.body_bytes_sent("org/model", "a.bin"), 8 * static_cast<int64_t>(big.size()));
  EXPECT_EQ(hub_.body_bytes_sent("org/model", "b.safetensors"),
            8 * static_cast<int64_t>(big.size()));
}

TEST_F(FakeHubTest, SixteenThrottledDownloadsRunAtOnce) {
  const std::string body = RandomBytes(128 * 1024, /*seed=*/5);
  hub_.AddCommit("org/model", "main", {Git("a.bin", body)});
  hub_.SetThrottle(512 * 1024);  // 0.25 s a download; one after another would take 4 s
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  std::vector<int> ok(16, 0);
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      httplib::Client client(hub_.endpoint());
      auto res = client.Get("/org/model/resolve/main/a.bin");
      ok[i] = res && res->body == body;
    });
  }
  for (auto& t : threads) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (int i = 0; i < 16; ++i) EXPECT_TRUE(ok[i]) << i;
  EXPECT_GE(seconds, 0.2);
  EXPECT_LT(seconds, 2.0);
}

TEST_F(FakeHubTest, DiskPathIsServedFromTheFile) {
  const fs::path file =
      fs::temp_directory_path() / absl::StrCat("fake_hub_test_", getpid(), "_",
                                               ::testing::UnitTest::GetInstance()->random_seed());
  const std::string content = RandomBytes(3 * 1024 * 1024 + 17, /*seed=*/4);
  {
    std::ofstream out(file, std::ios::binary);
    out << content;
  }
  hub_.AddCommit(
      "org/model", "main",
      {File("w.safetensors", "", file.string(), true), File("g.bin", "", file.string(), false)});
  fs::remove(file);  // the mapping outlives the name

  auto redirect = hub_client_.Head("/org/model/resolve/main/w.safetensors");
  ASSERT_TRUE(redirect);
  EXPECT_EQ(redirect->get_header_value("X-Linked-Etag"), "\"" + Sha256(content) + "\"");
  EXPECT_EQ(redirect->get_header_value("X-Linked-Size"), std::to_string(content.size()));
  auto blob = cdn_client_.Get(CdnTarget("/org/model/resolve/main/w.safetensors"));
  ASSERT_TRUE(blob);
  EXPECT_TRUE(blob->body == content);
  auto part = cdn_client_.Get(CdnTarget("/org/model/resolve/main/w.safetensors"),
                              {{"Range", "bytes=1048570-2097160"}});
  ASSERT_TRUE(part);
  EXPECT_EQ(part->status, 206);
  EXPECT_TRUE(part->body == content.substr(1048570, 2097160 - 1048570 + 1));
  auto git = hub_client_.Get("/org/model/resolve/main/g.bin", {{"Range", "bytes=-17"}});
  ASSERT_TRUE(git);
  EXPECT_EQ(git->status, 206);
  EXPECT_EQ(git->body, content.substr(content.size() - 17));
}

}  // namespace
}  // namespace df11::testing
