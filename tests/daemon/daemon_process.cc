#include "tests/daemon/daemon_process.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace df11::testing {
namespace {

using Clock = std::chrono::steady_clock;

grpc::ByteBuffer ToBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

std::string FromBuffer(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return "";
  std::string out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// Waits for the next completion-queue event (5 s at most); true when it completed normally.
bool Await(grpc::CompletionQueue& cq) {
  void* tag = nullptr;
  bool ok = false;
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(5);
  return cq.AsyncNext(&tag, &ok, deadline) == grpc::CompletionQueue::GOT_EVENT && ok;
}

}  // namespace

std::string Df11dBinary() {
  const char* env = std::getenv("DF11D_BINARY");
  return env != nullptr && *env != '\0' ? env : DF11D_BINARY;
}

std::string Df11ctlBinary() {
  const char* env = std::getenv("DF11CTL_BINARY");
  return env != nullptr && *env != '\0' ? env : DF11CTL_BINARY;
}

DaemonProcess::~DaemonProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

absl::Status DaemonProcess::Start(const std::string& config_yaml, const std::string& dir) {
  const std::string config = dir + "/config.yaml", ports = dir + "/ports.json",
                    log = dir + "/df11d.log";
  std::ofstream(config) << config_yaml;
  // Tests make their models in the temporary directory; the demo model is in the source tree.
  if (config_yaml.find("model_roots:") == std::string::npos) {
    std::ofstream(config, std::ios::app)
        << "\nmodel_roots: [\"" << std::filesystem::temp_directory_path().string() << "\", \""
        << DF11_SOURCE_DIR << "\"]\n";
  }
  std::filesystem::remove(ports);
  const std::string binary = Df11dBinary();
  // --config=FILE and --listen VALUE: both forms of an option's value.
  const std::string config_arg = "--config=" + config;
  pid_ = fork();
  if (pid_ < 0) return absl::InternalError("fork failed");
  if (pid_ == 0) {
    std::freopen(log.c_str(), "a", stderr);
    execl(binary.c_str(), binary.c_str(), config_arg.c_str(), "--listen", "127.0.0.1:0",
          "--http-listen", "127.0.0.1:0", "--port-file", ports.c_str(), nullptr);
    _exit(127);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::InternalError("df11d exited at start: " + ReadFile(log));
    }
    if (grpc_port_ == 0 && std::filesystem::exists(ports)) {
      const nlohmann::json j = nlohmann::json::parse(ReadFile(ports), nullptr, false);
      if (j.is_object()) {
        grpc_port_ = j.value("grpc", 0);
        http_port_ = j.value("http", 0);
      }
    }
    if (grpc_port_ != 0 && HealthStatus(address(), "", credentials_) == 1) return absl::OkStatus();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::DeadlineExceededError("df11d did not become ready: " + ReadFile(log));
}

void DaemonProcess::SendTerm() {
  if (pid_ > 0) kill(pid_, SIGTERM);
}

int DaemonProcess::Wait() {
  if (pid_ <= 0) return -1;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  int status = 0;
  while (Clock::now() < deadline) {
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
  return -1;
}

int DaemonProcess::Terminate() {
  SendTerm();
  return Wait();
}

int HealthStatus(const std::string& address, const std::string& service,
                 std::shared_ptr<grpc::ChannelCredentials> credentials) {
  grpc::GenericStub stub(grpc::CreateChannel(
      address, credentials != nullptr ? credentials : grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  grpc::CompletionQueue cq;
  // HealthCheckRequest{service}: field 1, length-delimited (the empty message for "").
  std::string encoded;
  if (!service.empty()) {
    encoded = std::string{'\x0a', static_cast<char>(service.size())} + service;
  }
  const grpc::ByteBuffer request = ToBuffer(encoded);
  auto call = stub.PrepareUnaryCall(&context, "/grpc.health.v1.Health/Check", request, &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, nullptr);
  if (!Await(cq) || !status.ok()) return -1;
  // HealthCheckResponse{status: N}: field 1, varint.
  const std::string bytes = FromBuffer(response);
  return bytes.size() == 2 && bytes[0] == 0x08 ? bytes[1] : (bytes.empty() ? 0 : -1);
}

std::string ReflectedServices(const std::string& address) {
  grpc::GenericStub stub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::CompletionQueue cq;
  auto call = stub.PrepareCall(&context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  call->StartCall(nullptr);
  if (!Await(cq)) return "";
  // ServerReflectionRequest{list_services: ""}: field 7, length-delimited, empty.
  call->Write(ToBuffer(std::string("\x3a\x00", 2)), nullptr);
  if (!Await(cq)) return "";
  call->WritesDone(nullptr);
  if (!Await(cq)) return "";
  grpc::ByteBuffer response;
  call->Read(&response, nullptr);
  if (!Await(cq)) return "";
  grpc::Status status;
  call->Finish(&status, nullptr);
  Await(cq);
  // The response's list_services_response holds the names as plain strings.
  return FromBuffer(response);
}

void MakeCa(const std::string& dir, const std::string& name) {
  MustRun(absl::StrCat("cd ", dir, " && openssl req -x509 -newkey ec -pkeyopt ",
                       "ec_paramgen_curve:prime256v1 -nodes -keyout ", name, ".key -out ", name,
                       ".pem -subj /CN=", name, " -days 2"));
}

void MakeCert(const std::string& dir, const std::string& name, const std::string& ca,
              const std::string& subject, int days, bool server) {
  const std::string ext = dir + "/" + name + ".ext";
  std::ofstream(ext) << (server ? "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                                : "extendedKeyUsage=clientAuth\n");
  MustRun(absl::StrCat(
      "cd ", dir,
      " && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ", name,
      ".key -out ", name, ".csr -subj ", subject, " && openssl x509 -req -in ", name, ".csr -CA ",
      ca, ".pem -CAkey ", ca, ".key -days ", days, " -extfile ", ext, " -out ", name, ".pem"));
}

std::string HttpGet(int port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(5);
  auto result = client.Get(path.c_str());
  return result && result->status == 200 ? result->body : "";
}

}  // namespace df11::testing
