// Test helpers that run the real binaries: a df11d process on 127.0.0.1 (ports picked by the
// kernel and read from --port-file), and commands whose output the test reads.
//
//   DaemonProcess daemon;
//   ASSERT_TRUE(daemon.Start(config_yaml, dir).ok());
//   auto client = client::Df11Client::Connect(daemon.address());
//   EXPECT_EQ(daemon.Terminate(), 0);
#ifndef DF11_TESTS_DAEMON_DAEMON_PROCESS_H_
#define DF11_TESTS_DAEMON_DAEMON_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "grpcpp/security/credentials.h"
#include "tests/testing/files.h"
#include "tests/testing/test_models.h"  // MustRun, MakeTestModel, MakeTempDir

namespace df11::testing {

class DaemonProcess {
 public:
  DaemonProcess() = default;
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;
  // Kills a daemon still running.
  ~DaemonProcess();

  // Writes `config_yaml` to `dir`/config.yaml and starts df11d on it, listening on free loopback
  // ports (unless it names model_roots, LoadModel may read the system temporary directory and the
  // source tree, where tests keep their models); returns once the ports are known and
  // grpc.health.v1 reports SERVING (preloads done), or an error after 60 s. The daemon's log goes
  // to `dir`/df11d.log.
  absl::Status Start(const std::string& config_yaml, const std::string& dir);
  // Sends SIGTERM and waits (up to 60 s) for the exit; returns the exit code, or -1 if it had to
  // be killed or died of a signal.
  int Terminate();
  // Sends SIGTERM without waiting.
  void SendTerm();
  // Waits for the exit after SendTerm (as Terminate).
  int Wait();

  // The credentials Start's health check uses (a daemon with TLS); plaintext by default.
  void set_credentials(std::shared_ptr<grpc::ChannelCredentials> c) { credentials_ = std::move(c); }

  std::string address() const { return "127.0.0.1:" + std::to_string(grpc_port_); }
  int http_port() const { return http_port_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int grpc_port_ = 0;
  int http_port_ = 0;
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
};

// The df11d and df11ctl binaries: $DF11D_BINARY / $DF11CTL_BINARY when set (a GPU bundle runs the
// tests away from the build tree), else the build's.
std::string Df11dBinary();
std::string Df11ctlBinary();

// grpc.health.v1.Health/Check for `service` ("": the whole server): 1 SERVING, 2 NOT_SERVING,
// -1 on error (an unknown service is NOT_FOUND). `service` is shorter than 128 bytes. Plaintext
// unless `credentials` are given.
int HealthStatus(const std::string& address, const std::string& service = "",
                 std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr);
// The encoded answer of server reflection to list_services (the service names appear in it as
// plain strings); "" on error.
std::string ReflectedServices(const std::string& address);

// With openssl, in `dir`: a CA (`name`.pem and .key, CN=`name`, 2 days), and a certificate it
// signs (`name`.pem and .key) with `subject` ("/CN=..."), valid `days` (negative: expired), for a
// server (localhost and 127.0.0.1) or a client (clientAuth).
void MakeCa(const std::string& dir, const std::string& name);
void MakeCert(const std::string& dir, const std::string& name, const std::string& ca,
              const std::string& subject, int days, bool server);

// GET http://127.0.0.1:`port``path`; the body, or "" on error.
std::string HttpGet(int port, const std::string& path);

}  // namespace df11::testing

#endif  // DF11_TESTS_DAEMON_DAEMON_PROCESS_H_
