#include "daemon/server/tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codec/base/read_file.h"
#include "codec/base/status_macros.h"
#include "daemon/server/log.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace df11::server {

// One consistent set of the files, in OpenSSL's types; handshakes hold their own references.
struct TlsFiles::Identity {
  X509* leaf = nullptr;
  STACK_OF(X509) * chain = nullptr;  // the intermediates after the leaf
  EVP_PKEY* key = nullptr;
  X509_STORE* client_ca = nullptr;  // null without mutual TLS
  ~Identity() {
    X509_free(leaf);
    sk_X509_pop_free(chain, X509_free);
    EVP_PKEY_free(key);
    X509_STORE_free(client_ca);
  }
};

namespace {

// How often the files are compared with what was loaded (gRPC's watcher uses the same period).
constexpr unsigned kRefreshSeconds = 2;

absl::StatusOr<std::string> ReadPem(const std::string& path) {
  return base::ReadFile(path, base::kMaxSettingsFileBytes);
}

std::vector<X509*> ReadCertificates(const std::string& pem) {
  std::vector<X509*> out;
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) out.push_back(cert);
  BIO_free(bio);
  ERR_clear_error();  // the end of the file reads as an error
  return out;
}

absl::StatusOr<std::shared_ptr<const TlsFiles::Identity>> LoadIdentity(
    const std::string& cert_file, const std::string& key_file, const std::string& ca_file,
    const std::string& cert_pem, const std::string& key_pem, const std::string& ca_pem) {
  auto identity = std::make_shared<TlsFiles::Identity>();
  std::vector<X509*> certs = ReadCertificates(cert_pem);
  if (certs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tls.cert_file ", cert_file, ": no PEM certificate in it"));
  }
  identity->leaf = certs[0];
  identity->chain = sk_X509_new_null();
  for (size_t i = 1; i < certs.size(); ++i) sk_X509_push(identity->chain, certs[i]);
  BIO* bio = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
  identity->key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  ERR_clear_error();
  if (identity->key == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("tls.key_file ", key_file, ": no PEM private key in it"));
  }
  if (X509_check_private_key(identity->leaf, identity->key) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat("tls.key_file ", key_file, " is not the key of tls.cert_file ", cert_file));
  }
  if (!ca_file.empty()) {
    std::vector<X509*> cas = ReadCertificates(ca_pem);
    if (cas.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tls.client_ca_file ", ca_file, ": no PEM certificate in it"));
    }
    identity->client_ca = X509_STORE_new();
    for (X509* ca : cas) {
      X509_STORE_add_cert(identity->client_ca, ca);
      X509_free(ca);
    }
  }
  return identity;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TlsFiles>> TlsFiles::Create(const config::Config& config) {
  std::unique_ptr<TlsFiles> tls(
      new TlsFiles(config.tls_cert_file, config.tls_key_file, config.tls_client_ca_file));
  std::string text;
  std::string pem[3];
  const std::string* files[3] = {&tls->cert_file_, &tls->key_file_, &tls->client_ca_file_};
  const char* fields[3] = {"tls.cert_file", "tls.key_file", "tls.client_ca_file"};
  for (int i = 0; i < 3; ++i) {
    if (files[i]->empty()) continue;
    absl::StatusOr<std::string> read = ReadPem(*files[i]);
    if (!read.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(fields[i], ": ", read.status().message()));
    }
    pem[i] = *read;
    text += pem[i];
  }
  DF11_ASSIGN_OR_RETURN(
      std::shared_ptr<const Identity> identity,
      LoadIdentity(tls->cert_file_, tls->key_file_, tls->client_ca_file_, pem[0], pem[1], pem[2]));
  {
    absl::MutexLock lock(&tls->mu_);
    tls->identity_ = std::move(identity);
    tls->files_text_ = std::move(text);
  }
  tls->watcher_ = std::thread([t = tls.get()] {
    for (;;) {
      {
        absl::MutexLock lock(&t->mu_);
        if (t->mu_.AwaitWithTimeout(absl::Condition(&t->stopping_),
                                    absl::Seconds(kRefreshSeconds))) {
          return;
        }
      }
      t->Reload();
    }
  });
  return tls;
}

TlsFiles::~TlsFiles() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (watcher_.joinable()) watcher_.join();
}

void TlsFiles::Reload() {
  std::string text, pem[3];
  const std::string* files[3] = {&cert_file_, &key_file_, &client_ca_file_};
  for (int i = 0; i < 3; ++i) {
    if (files[i]->empty()) continue;
    absl::StatusOr<std::string> read = ReadPem(*files[i]);
    if (!read.ok()) return;  // mid-rotation, or gone: the next look decides
    pem[i] = *read;
    text += pem[i];
  }
  {
    absl::MutexLock lock(&mu_);
    if (text == files_text_) return;
  }
  absl::StatusOr<std::shared_ptr<const Identity>> identity =
      LoadIdentity(cert_file_, key_file_, client_ca_file_, pem[0], pem[1], pem[2]);
  absl::MutexLock lock(&mu_);
  files_text_ = text;  // a bad set is reported once
  if (!identity.ok()) {
    Log(absl::StrCat("tls: keeping the previous certificate: ", identity.status().message()));
    return;
  }
  identity_ = *std::move(identity);
  Log(absl::StrCat("tls: loaded ", cert_file_, " again"));
}

std::shared_ptr<grpc::ServerCredentials> TlsFiles::GrpcCredentials() const {
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      key_file_, cert_file_, client_ca_file_, kRefreshSeconds);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (mutual()) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

int TlsFiles::SelectCertificate(SSL* ssl, void* self) {
  std::shared_ptr<const Identity> identity;
  {
    TlsFiles* tls = static_cast<TlsFiles*>(self);
    absl::MutexLock lock(&tls->mu_);
    identity = tls->identity_;
  }
  // Each call takes its own references, so a rotation cannot free what a handshake uses.
  if (SSL_use_certificate(ssl, identity->leaf) != 1 ||
      SSL_use_PrivateKey(ssl, identity->key) != 1 || SSL_set1_chain(ssl, identity->chain) != 1) {
    return 0;
  }
  if (identity->client_ca != nullptr && SSL_set1_verify_cert_store(ssl, identity->client_ca) != 1) {
    return 0;
  }
  return 1;
}

bool TlsFiles::SetUpHttpContext(SSL_CTX& ctx) {
  SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
  SSL_CTX_set_cert_cb(&ctx, &TlsFiles::SelectCertificate, this);
  if (mutual())
    SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  return true;
}

}  // namespace df11::server
