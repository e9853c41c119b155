// libFuzzer target for the path from a Generate request to the engine's request. The first byte
// picks the API: even, the rest is a wire-API GenerateRequest (protobuf bytes: Debian 12 does not
// package libprotobuf-mutator); odd, it is the JSON body of the OpenAI API's /v1/completions, or
// /v1/chat/completions when bit 1 is set (openai::ParseRequest). The request is then prepared (PrepareGenerate) for a small Qwen3 model
// with a Qwen2-style tokenizer and the Qwen3 chat template, under small limits.
//
// Every input must be refused with kInvalidArgument, kFailedPrecondition (a template construct
// outside the subset) or kResourceExhausted (a template limit), or become a request that keeps
// the limits: a non-empty prompt within limits.max_prompt_tokens, token ids given by the client
// inside the vocabulary, max_tokens in [1, limits.max_tokens] with prompt + max_tokens inside the
// model's context, sampling parameters that validate. Violations trap.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "daemon/config/config.h"
#include "daemon/registry/registry.h"
#include "daemon/runtime/text/chat/chat_template.h"
#include "daemon/runtime/engine/model_config.h"
#include "daemon/runtime/engine/placed_model.h"
#include "daemon/runtime/text/tokenizer/tokenizer.h"
#include "daemon/server/generate_request.h"
#include "daemon/server/openai_api.h"
#include "df11/v1/model_host.pb.h"
#include "google/protobuf/stubs/logging.h"

namespace {

using df11::runtime::ModelConfig;

void Require(bool condition) {
  if (!condition) __builtin_trap();
}

// PrepareGenerate reads only the model's configuration.
class ConfigOnlyModel final : public df11::runtime::PlacedModel {
 public:
  explicit ConfigOnlyModel(ModelConfig config) : config_(std::move(config)) {}
  const ModelConfig& config() const override { return config_; }
  bool is_df11() const override { return false; }
  std::string_view device() const override { return "cpu"; }
  uint64_t unit_bytes() const override { return 0; }
  uint64_t plain_bytes() const override { return 0; }

 private:
  ModelConfig config_;
};

std::string ReadFile(const std::string& path) {
  std::string text;
  FILE* f = std::fopen(path.c_str(), "rb");
  Require(f != nullptr);
  char buffer[1 << 16];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, f)) > 0;) text.append(buffer, n);
  std::fclose(f);
  return text;
}

struct Fixture {
  df11::registry::ResidentModel model;
  df11::config::Config config;
};

const Fixture& TheFixture() {
  static const Fixture* fixture = [] {
    // Invalid UTF-8 in a string field is refused by ParseFromArray; its log line is noise here.
    google::protobuf::SetLogHandler(
        [](google::protobuf::LogLevel, const char*, int, const std::string&) {});
    auto* f = new Fixture;
    const std::string data = std::string(DF11_SOURCE_DIR) + "/tests/data";
    absl::StatusOr<df11::codec::ModelDirectory> dir =
        df11::codec::ModelDirectory::Read(data + "/engine/qwen3");
    Require(dir.ok());
    absl::StatusOr<ModelConfig> config = df11::runtime::ParseModelConfig(*dir);
    Require(config.ok());
    config->vocab_size = 4200;  // the tokenizer's ids, 0-4010, all fit
    f->model.name = "fuzz";
    f->model.defaults = df11::runtime::DefaultSamplingParams(*config);
    f->model.model = std::make_unique<ConfigOnlyModel>(*std::move(config));
    absl::StatusOr<df11::runtime::Tokenizer> tokenizer =
        df11::runtime::Tokenizer::FromFile(data + "/tokenizer/qwen2_like/tokenizer.json");
    Require(tokenizer.ok());
    f->model.tokenizer = *std::move(tokenizer);
    f->model.chat_template = df11::runtime::ChatTemplate::FromSource(
        ReadFile(data + "/chat/templates/Qwen-Qwen3-0.6B.jinja"), std::nullopt, "<|im_end|>");
    Require(f->model.chat_template.ok());
    f->config.max_prompt_tokens = 200;
    f->config.max_tokens = 128;
    f->config.default_max_tokens = 64;
    return f;
  }();
  return *fixture;
}

bool Refused(const absl::Status& status) {
  return status.code() == absl::StatusCode::kInvalidArgument ||
         status.code() == absl::StatusCode::kFailedPrecondition ||
         status.code() == absl::StatusCode::kResourceExhausted;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Fixture& fixture = TheFixture();
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  df11::v1::GenerateRequest request;
  if (data[0] % 2 == 0) {
    if (!request.ParseFromArray(rest.data(), static_cast<int>(rest.size()))) return 0;
  } else {
    absl::StatusOr<df11::server::openai::Request> parsed =
        df11::server::openai::ParseRequest(rest, /*chat=*/(data[0] & 2) != 0);
    if (!parsed.ok()) {
      Require(parsed.status().code() == absl::StatusCode::kInvalidArgument);
      (void)df11::server::openai::ErrorBody(parsed.status());
      return 0;
    }
    request = parsed->generate;
  }

  absl::StatusOr<df11::runtime::GenerationRequest> prepared =
      df11::server::PrepareGenerate(request, fixture.model, fixture.config);
  if (!prepared.ok()) {
    Require(Refused(prepared.status()));
    return 0;
  }
  const ModelConfig& model = fixture.model.model->config();
  const int64_t prompt = static_cast<int64_t>(prepared->prompt.size());
  Require(prompt >= 1 && prompt <= fixture.config.max_prompt_tokens);
  if (request.has_token_ids()) {
    for (int32_t id : prepared->prompt) Require(id >= 0 && id < model.vocab_size);
  }
  const df11::runtime::SamplingParams& p = prepared->sampling;
  Require(p.max_tokens >= 1 && p.max_tokens <= fixture.config.max_tokens);
  Require(prompt + p.max_tokens <= model.max_position_embeddings);
  Require(p.Validate().ok());
  return 0;
}
