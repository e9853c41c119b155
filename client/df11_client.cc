#include "client/df11_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codec/base/read_file.h"

namespace df11::client {
namespace {}  // namespace

void Df11Client::Prepare(const CallOptions& options, grpc::ClientContext& context) const {
  if (!token_.empty()) context.AddMetadata("authorization", "Bearer " + token_);
  if (options.timeout == absl::InfiniteDuration()) return;
  const absl::Duration timeout = std::max(options.timeout, absl::ZeroDuration());
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::duration_cast<std::chrono::system_clock::duration>(
                           absl::ToChronoNanoseconds(timeout)));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  const int code = static_cast<int>(status.error_code());
  // gRPC and Abseil number the canonical codes alike (OK = 0 ... UNAUTHENTICATED = 16).
  const absl::StatusCode absl_code =
      code >= 0 && code <= 16 ? static_cast<absl::StatusCode>(code) : absl::StatusCode::kUnknown;
  if (absl_code == absl::StatusCode::kOk) return absl::OkStatus();
  return absl::Status(absl_code, status.error_message());
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const ConnectOptions& options) {
  if (!options.tls()) return grpc::InsecureChannelCredentials();
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError("a TLS client certificate needs its key, and the reverse");
  }
  grpc::SslCredentialsOptions ssl;
  for (auto [path, out] : {std::pair{&options.tls_ca_file, &ssl.pem_root_certs},
                           std::pair{&options.tls_cert_file, &ssl.pem_cert_chain},
                           std::pair{&options.tls_key_file, &ssl.pem_private_key}}) {
    if (path->empty()) continue;
    absl::StatusOr<std::string> text = base::ReadFile(*path, base::kMaxSettingsFileBytes);
    if (!text.ok()) return absl::InvalidArgumentError(text.status().message());
    *out = *std::move(text);
  }
  return grpc::SslCredentials(ssl);
}

absl::StatusOr<std::unique_ptr<Df11Client>> Df11Client::Connect(const std::string& address,
                                                                const ConnectOptions& options) {
  if (address.empty()) return absl::InvalidArgumentError("empty daemon address");
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ChannelCredentialsFor(options);
  if (!credentials.ok()) return credentials.status();
  return std::make_unique<Df11Client>(grpc::CreateChannel(address, *credentials), options.token);
}

Df11Client::Df11Client(std::shared_ptr<grpc::Channel> channel, std::string token)
    : stub_(v1::ModelHost::NewStub(std::move(channel))), token_(std::move(token)) {}

absl::StatusOr<v1::LoadModelProgress> Df11Client::LoadModel(
    const v1::LoadModelRequest& request,
    const std::function<void(const v1::LoadModelProgress&)>& on_progress,
    const CallOptions& options) {
  grpc::ClientContext context;
  Prepare(options, context);
  std::unique_ptr<grpc::ClientReader<v1::LoadModelProgress>> reader =
      stub_->LoadModel(&context, request);
  v1::LoadModelProgress message, last;
  bool any = false;
  while (reader->Read(&message)) {
    if (on_progress) on_progress(message);
    last = message;
    any = true;
  }
  if (absl::Status s = FromGrpcStatus(reader->Finish()); !s.ok()) return s;
  if (!any) {
    return absl::InternalError(
        absl::StrCat("LoadModel ", request.source(), ": the daemon sent no progress"));
  }
  return last;
}

absl::StatusOr<v1::UnloadModelResponse> Df11Client::UnloadModel(
    const v1::UnloadModelRequest& request, const CallOptions& options) {
  grpc::ClientContext context;
  Prepare(options, context);
  v1::UnloadModelResponse response;
  if (absl::Status s = FromGrpcStatus(stub_->UnloadModel(&context, request, &response)); !s.ok()) {
    return s;
  }
  return response;
}

absl::StatusOr<v1::ListModelsResponse> Df11Client::ListModels(const CallOptions& options) {
  grpc::ClientContext context;
  Prepare(options, context);
  v1::ListModelsResponse response;
  if (absl::Status s = FromGrpcStatus(stub_->ListModels(&context, {}, &response)); !s.ok()) {
    return s;
  }
  return response;
}

absl::StatusOr<v1::ModelInfo> Df11Client::GetModel(const std::string& name,
                                                   const CallOptions& options) {
  v1::GetModelRequest request;
  request.set_name(name);
  return GetModel(request, options);
}

absl::StatusOr<v1::ModelInfo> Df11Client::GetModel(const v1::GetModelRequest& request,
                                                   const CallOptions& options) {
  grpc::ClientContext context;
  Prepare(options, context);
  v1::ModelInfo response;
  if (absl::Status s = FromGrpcStatus(stub_->GetModel(&context, request, &response)); !s.ok()) {
    return s;
  }
  return response;
}

absl::StatusOr<v1::EstimateModelResponse> Df11Client::EstimateModel(const std::string& source,
                                                                    const CallOptions& options) {
  grpc::ClientContext context;
  Prepare(options, context);
  v1::EstimateModelRequest request;
  request.set_source(source);
  v1::EstimateModelResponse response;
  if (absl::Status s = FromGrpcStatus(stub_->EstimateModel(&context, request, &response));
      !s.ok()) {
    return s;
  }
  return response;
}

absl::Status Df11Client::Generate(
    const v1::GenerateRequest& request,
    const std::function<bool(const v1::GenerateResponse&)>& on_response,
    const CallOptions& options) {
  grpc::ClientContext context;
  Prepare(options, context);
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub_->Generate(&context, request);
  v1::GenerateResponse message;
  bool stopped = false;
  while (reader->Read(&message)) {
    if (stopped) continue;  // drain what was in flight when we cancelled
    if (!on_response(message)) {
      stopped = true;
      context.TryCancel();
    }
  }
  const grpc::Status status = reader->Finish();
  // The daemon may have finished before the cancellation reached it; the caller asked to stop
  // either way.
  if (stopped) return absl::CancelledError("Generate cancelled by the caller");
  return FromGrpcStatus(status);
}

absl::StatusOr<v1::NodeStatus> Df11Client::GetNodeStatus(const CallOptions& options) {
  grpc::ClientContext context;
  Prepare(options, context);
  v1::NodeStatus response;
  if (absl::Status s = FromGrpcStatus(stub_->GetNodeStatus(&context, {}, &response)); !s.ok()) {
    return s;
  }
  return response;
}

absl::Status Df11Client::WatchNodeStatus(
    const v1::WatchNodeStatusRequest& request,
    const std::function<bool(const v1::NodeStatus&)>& on_status, const CallOptions& options) {
  grpc::ClientContext context;
  Prepare(options, context);
  std::unique_ptr<grpc::ClientReader<v1::NodeStatus>> reader =
      stub_->WatchNodeStatus(&context, request);
  v1::NodeStatus message;
  bool stopped = false;
  while (reader->Read(&message)) {
    if (stopped) continue;
    if (!on_status(message)) {
      stopped = true;
      context.TryCancel();
    }
  }
  const grpc::Status status = reader->Finish();
  if (stopped) return absl::OkStatus();
  return FromGrpcStatus(status);
}

}  // namespace df11::client
