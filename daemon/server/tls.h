// TLS for df11d's gRPC and HTTP listeners (the config's tls: section): the certificate chain and
// key df11d presents and, for mutual TLS, the CA that clients' certificates must chain to. The
// files are read at start (an error stops it) and again whenever they change, as cert-manager
// rotates them: new handshakes use the new files, connections already open go on.
//
//   DF11_ASSIGN_OR_RETURN(std::unique_ptr<TlsFiles> tls, TlsFiles::Create(config));
//   builder.AddListeningPort(address, tls->GrpcCredentials());
//   options.set_up_tls = [&](SSL_CTX& ctx) { return tls->SetUpHttpContext(ctx); };  // HTTP
#ifndef DF11_DAEMON_SERVER_TLS_H_
#define DF11_DAEMON_SERVER_TLS_H_

#include <openssl/ssl.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/config/config.h"
#include "grpcpp/security/server_credentials.h"

namespace df11::server {

class TlsFiles {
 public:
  // Reads config.tls_cert_file, tls_key_file and tls_client_ca_file (optional): kInvalidArgument
  // naming the file that is missing, unreadable, not PEM, or a key that does not match the
  // certificate.
  static absl::StatusOr<std::unique_ptr<TlsFiles>> Create(const config::Config& config);
  TlsFiles(const TlsFiles&) = delete;
  TlsFiles& operator=(const TlsFiles&) = delete;
  ~TlsFiles();

  // Server credentials for gRPC on the same files (gRPC's own watcher re-reads them).
  std::shared_ptr<grpc::ServerCredentials> GrpcCredentials() const;
  // Prepares the HTTP server's context: each handshake takes the current certificate, key and
  // client CA; with a client CA a client must present a certificate that chains to it.
  bool SetUpHttpContext(SSL_CTX& ctx);
  bool mutual() const { return !client_ca_file_.empty(); }

  // Reads the files again if they changed (the watcher does this every 2 s); keeps the previous
  // ones, and says so in the log, when the new ones do not load.
  void Reload();

  struct Identity;  // one consistent set of the files (tls.cc)

 private:
  TlsFiles(std::string cert, std::string key, std::string client_ca)
      : cert_file_(std::move(cert)),
        key_file_(std::move(key)),
        client_ca_file_(std::move(client_ca)) {}
  static int SelectCertificate(SSL* ssl, void* self);

  const std::string cert_file_, key_file_, client_ca_file_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const Identity> identity_ ABSL_GUARDED_BY(mu_);
  std::string files_text_ ABSL_GUARDED_BY(mu_);  // the three files' text when last loaded
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread watcher_;
};

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_TLS_H_
