// TLS and mutual TLS on df11d's gRPC and HTTP listeners, with certificates made here by openssl:
// a client must trust the daemon's CA and present a certificate of the client CA that has not
// expired; the certificate's subject maps to a tenant through the tokens file; the daemon's files
// are rotated while a stream runs, and new connections get the new certificate while the stream
// goes on.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/df11_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/daemon/daemon_process.h"
#include "tests/testing/status_matchers.h"

namespace df11 {
namespace {

namespace fs = std::filesystem;
using ::df11::testing::StatusIs;
using ::testing::HasSubstr;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

constexpr char kDemoSubject[] = "CN=team-a-ci";

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // A refused handshake closes the socket under the HTTPS client's next write.
    std::signal(SIGPIPE, SIG_IGN);
    dir_ = new std::string(testing::MakeTempDir());
    const std::string& d = *dir_;
    testing::MakeCa(d, "ca1");
    testing::MakeCa(d, "ca2");
    testing::MakeCert(d, "server", "ca1", "/CN=df11d", 2, true);
    testing::MakeCert(d, "server-rotated", "ca2", "/CN=df11d", 2, true);
    testing::MakeCert(d, "client", "ca1", "/CN=team-a-ci", 2, false);
    testing::MakeCert(d, "client-other-ca", "ca2", "/CN=team-a-ci", 2, false);
    testing::MakeCert(d, "client-expired", "ca1", "/CN=team-a-ci", -1, false);
    // The files the daemon watches.
    fs::copy_file(d + "/server.pem", d + "/tls.pem");
    fs::copy_file(d + "/server.key", d + "/tls.key");
    std::ofstream(d + "/tokens.yaml") << "tokens:\n  - {name: ci-cert, subject: \"" << kDemoSubject
                                      << "\", tenant: team-a, role: user}\n";
    daemon_ = new testing::DaemonProcess();
    daemon_->set_credentials(Credentials("ca1", "client"));
    const absl::Status started = daemon_->Start(
        absl::StrCat("preload: [{source: ",
                     (fs::path(DF11_SOURCE_DIR) / "models" / "demo").string(), ", name: demo}]\n",
                     "auth: {tokens_file: ", d, "/tokens.yaml}\n", "tls: {cert_file: ", d,
                     "/tls.pem, key_file: ", d, "/tls.key, client_ca_file: ", d, "/ca1.pem}\n"),
        d);
    ASSERT_TRUE(started.ok()) << started;
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(daemon_->Terminate(), 0);
    delete daemon_;
    fs::remove_all(*dir_);
    delete dir_;
  }

  // gRPC credentials trusting `ca` and presenting `client` ("": none).
  static std::shared_ptr<grpc::ChannelCredentials> Credentials(const std::string& ca,
                                                               const std::string& client) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = Read(*dir_ + "/" + ca + ".pem");
    if (!client.empty()) {
      o.pem_cert_chain = Read(*dir_ + "/" + client + ".pem");
      o.pem_private_key = Read(*dir_ + "/" + client + ".key");
    }
    return grpc::SslCredentials(o);
  }
  static absl::Status ListWith(const std::string& ca, const std::string& client) {
    client::ConnectOptions o{.tls_ca_file = *dir_ + "/" + ca + ".pem"};
    if (!client.empty()) {
      o.tls_cert_file = *dir_ + "/" + client + ".pem";
      o.tls_key_file = *dir_ + "/" + client + ".key";
    }
    return (*client::Df11Client::Connect(daemon_->address(), o))
        ->ListModels({.timeout = absl::Seconds(5)})
        .status();
  }
  // GET /v1/models over HTTPS; the status, or -1 when the connection or handshake failed.
  static int HttpsGet(const std::string& ca, const std::string& client) {
    std::unique_ptr<httplib::SSLClient> https =
        client.empty() ? std::make_unique<httplib::SSLClient>("127.0.0.1", daemon_->http_port())
                       : std::make_unique<httplib::SSLClient>("127.0.0.1", daemon_->http_port(),
                                                              *dir_ + "/" + client + ".pem",
                                                              *dir_ + "/" + client + ".key");
    https->set_ca_cert_path((*dir_ + "/" + ca + ".pem").c_str());
    https->enable_server_certificate_verification(true);
    https->set_connection_timeout(5);
    auto result = https->Get("/v1/models");
    return result ? result->status : -1;
  }

  static std::string* dir_;
  static testing::DaemonProcess* daemon_;
};
std::string* TlsTest::dir_;
testing::DaemonProcess* TlsTest::daemon_;

TEST_F(TlsTest, AClientCertificateOfTheClientCaIsTheCallersIdentity) {
  EXPECT_TRUE(ListWith("ca1", "client").ok());
  EXPECT_EQ(HttpsGet("ca1", "client"), 200);
  // The subject mapped to a tenant: no token needed; probes work over the same TLS.
  EXPECT_EQ(testing::HealthStatus(daemon_->address(), "", Credentials("ca1", "client")), 1);
  const std::string& d = *dir_;
  std::string out;
  EXPECT_EQ(
      testing::RunCommand(absl::StrCat(testing::Df11ctlBinary(), " --addr ", daemon_->address(),
                                       " --tls-ca ", d, "/ca1.pem list", " --tls-cert ", d,
                                       "/client.pem --tls-key ", d, "/client.key"),
                          &out),
      0);
  EXPECT_THAT(out, HasSubstr("demo"));
}

TEST_F(TlsTest, HandshakesWithoutAGoodClientCertificateFail) {
  for (const char* client : {"", "client-other-ca", "client-expired"}) {
    SCOPED_TRACE(client);
    EXPECT_THAT(ListWith("ca1", client), StatusIs(absl::StatusCode::kUnavailable));
    EXPECT_EQ(HttpsGet("ca1", client), -1);
  }
  // A client that does not trust the daemon's CA, and one that speaks plaintext.
  EXPECT_THAT(ListWith("ca2", "client"), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(HttpsGet("ca2", "client"), -1);
  absl::Status plain = (*client::Df11Client::Connect(daemon_->address()))
                           ->ListModels({.timeout = absl::Seconds(5)})
                           .status();
  EXPECT_THAT(plain, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(testing::HttpGet(daemon_->http_port(), "/metrics"), "");
}

TEST_F(TlsTest, RotatedFilesReachNewConnectionsWhileAStreamGoesOn) {
  // A status stream on the first certificate.
  client::ConnectOptions o{.tls_ca_file = *dir_ + "/ca1.pem",
                           .tls_cert_file = *dir_ + "/client.pem",
                           .tls_key_file = *dir_ + "/client.key"};
  std::unique_ptr<client::Df11Client> watcher = *client::Df11Client::Connect(daemon_->address(), o);
  std::atomic<int> statuses = 0;
  std::atomic<bool> stop = false;
  absl::Status watch_end;
  std::thread watch([&] {
    v1::WatchNodeStatusRequest request;
    request.set_interval_seconds(0.1);
    watch_end = watcher->WatchNodeStatus(request, [&](const v1::NodeStatus&) {
      ++statuses;
      return !stop.load();
    });
  });
  while (statuses < 2) std::this_thread::sleep_for(std::chrono::milliseconds(20));

  // cert-manager's way: the new files replace the old ones.
  fs::copy_file(*dir_ + "/server-rotated.pem", *dir_ + "/tls.pem.new");
  fs::copy_file(*dir_ + "/server-rotated.key", *dir_ + "/tls.key.new");
  fs::rename(*dir_ + "/tls.key.new", *dir_ + "/tls.key");
  fs::rename(*dir_ + "/tls.pem.new", *dir_ + "/tls.pem");
  bool grpc_rotated = false, http_rotated = false;
  for (int i = 0; i < 100 && !(grpc_rotated && http_rotated); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    grpc_rotated = grpc_rotated || ListWith("ca2", "client").ok();
    http_rotated = http_rotated || HttpsGet("ca2", "client") == 200;
  }
  EXPECT_TRUE(grpc_rotated);
  EXPECT_TRUE(http_rotated);
  EXPECT_THAT(ListWith("ca1", "client"), StatusIs(absl::StatusCode::kUnavailable));
  // The stream opened before the rotation is still delivering.
  const int before = statuses;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_GT(statuses.load(), before);
  stop = true;
  watch.join();
  EXPECT_TRUE(watch_end.ok()) << watch_end;

  // Back to the first files for the other tests.
  fs::copy_file(*dir_ + "/server.pem", *dir_ + "/tls.pem", fs::copy_options::overwrite_existing);
  fs::copy_file(*dir_ + "/server.key", *dir_ + "/tls.key", fs::copy_options::overwrite_existing);
  bool back = false;
  for (int i = 0; i < 100 && !back; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    back = ListWith("ca1", "client").ok() && HttpsGet("ca1", "client") == 200;
  }
  EXPECT_TRUE(back);
}

}  // namespace
}  // namespace df11
