// libdf11client: a C++ client of the df11d daemon's ModelHost API (proto/df11/v1/model_host.proto).
// Each RPC is one method returning absl::Status or absl::StatusOr; a failed call carries the
// daemon's gRPC code and message unchanged (NOT_FOUND for an unknown model, RESOURCE_EXHAUSTED when
// memory is short, ...), and UNAVAILABLE when the daemon cannot be reached. Streaming RPCs deliver
// each message to a callback on the calling thread.
//
//   absl::StatusOr<std::unique_ptr<Df11Client>> client = Df11Client::Connect("127.0.0.1:7411");
//   v1::GenerateRequest request;
//   request.set_model("demo");
//   request.set_text("def ");
//   absl::Status s = (*client)->Generate(request, [](const v1::GenerateResponse& r) {
//     std::cout << r.text();
//     return true;  // false cancels the generation
//   });
#ifndef DF11_CLIENT_DF11_CLIENT_H_
#define DF11_CLIENT_DF11_CLIENT_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "df11/v1/model_host.grpc.pb.h"
#include "df11/v1/model_host.pb.h"
#include "grpcpp/security/credentials.h"

namespace df11::client {

namespace v1 = ::df11::v1;

// The absl::Status with the same code and message as `status`; codes outside the canonical range
// become kUnknown.
absl::Status FromGrpcStatus(const grpc::Status& status);

// Per-call settings.
struct CallOptions {
  // How long the call may take, streaming included; past it the call ends with
  // kDeadlineExceeded. Infinite: no deadline.
  absl::Duration timeout = absl::InfiniteDuration();
};

// How to reach the daemon: a token, and TLS.
struct ConnectOptions {
  std::string token;          // sent with every call as `authorization: Bearer TOKEN`
  std::string tls_ca_file;    // TLS: PEM CA the daemon's certificate must chain to ("" with a
                              //   client certificate: the system's roots)
  std::string tls_cert_file;  // mutual TLS: this client's certificate chain and key (PEM)
  std::string tls_key_file;
  bool tls() const { return !tls_ca_file.empty() || !tls_cert_file.empty(); }
};

// The channel credentials `options` asks for: plaintext, TLS, or mutual TLS. kInvalidArgument for
// a client certificate without its key (or the reverse), or a file that cannot be read.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const ConnectOptions& options);

// Thread-safe: calls may run concurrently from several threads on one client.
class Df11Client {
 public:
  // A client of the daemon at `address` (HOST:PORT, or any gRPC target such as unix:PATH), over a
  // plaintext channel. Connecting is lazy: an unreachable daemon shows as kUnavailable on the first
  // call. kInvalidArgument for an empty address or a TLS file that cannot be read. TLS when
  // `options` names a CA or a client certificate; a daemon with auth.tokens_file needs a token
  // (or, under mutual TLS, a certificate its tokens file lists).
  static absl::StatusOr<std::unique_ptr<Df11Client>> Connect(const std::string& address,
                                                             const ConnectOptions& options = {});

  // A client over an existing channel (tests, custom credentials).
  explicit Df11Client(std::shared_ptr<grpc::Channel> channel, std::string token = "");

  // Loads a model, calling `on_progress` (may be empty) with each progress message. Returns the
  // last message, which carries the model's final state; a load the daemon reports as FAILED in
  // that message is still an OK status here (check model().state()). kInternal if the stream ends
  // OK without any message.
  absl::StatusOr<v1::LoadModelProgress> LoadModel(
      const v1::LoadModelRequest& request,
      const std::function<void(const v1::LoadModelProgress&)>& on_progress,
      const CallOptions& options = {});

  absl::StatusOr<v1::UnloadModelResponse> UnloadModel(const v1::UnloadModelRequest& request,
                                                      const CallOptions& options = {});
  absl::StatusOr<v1::ListModelsResponse> ListModels(const CallOptions& options = {});
  // kNotFound for an unknown model.
  absl::StatusOr<v1::ModelInfo> GetModel(const std::string& name, const CallOptions& options = {});
  absl::StatusOr<v1::ModelInfo> GetModel(const v1::GetModelRequest& request,
                                         const CallOptions& options = {});
  absl::StatusOr<v1::EstimateModelResponse> EstimateModel(const std::string& source,
                                                          const CallOptions& options = {});

  // Generates, calling `on_response` with each streamed message: deltas, then a last one with
  // finish_reason, usage and timings. When `on_response` returns false the call is cancelled, no
  // further message is delivered, and the result is kCancelled. OK once the stream ends normally.
  absl::Status Generate(const v1::GenerateRequest& request,
                        const std::function<bool(const v1::GenerateResponse&)>& on_response,
                        const CallOptions& options = {});

  absl::StatusOr<v1::NodeStatus> GetNodeStatus(const CallOptions& options = {});

  // Watches the node: `on_status` gets the status now, then every interval. Returning false from
  // it ends the watch with OK; so does the daemon ending the stream. A deadline in `options` ends
  // it with kDeadlineExceeded.
  absl::Status WatchNodeStatus(const v1::WatchNodeStatusRequest& request,
                               const std::function<bool(const v1::NodeStatus&)>& on_status,
                               const CallOptions& options = {});

 private:
  // Sets the call's deadline and token on `context`.
  void Prepare(const CallOptions& options, grpc::ClientContext& context) const;

  std::unique_ptr<v1::ModelHost::Stub> stub_;
  const std::string token_;
};

}  // namespace df11::client

#endif  // DF11_CLIENT_DF11_CLIENT_H_
