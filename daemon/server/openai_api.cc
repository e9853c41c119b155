#include "daemon/server/openai_api.h"

#include <cctype>
#include <cmath>
#include <limits>

#include "absl/base/thread_annotations.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "codec/base/random_bits.h"
#include "codec/base/status_macros.h"
#include "nlohmann/json.hpp"

namespace df11::server::openai {
namespace {

using Json = nlohmann::json;

constexpr char kParamPayload[] = "df11.openai.param";

absl::Status Invalid(const std::string& param, const std::string& message) {
  absl::Status s = absl::InvalidArgumentError(absl::StrCat(param, ": ", message));
  s.SetPayload(kParamPayload, absl::Cord(param));
  return s;
}

// The JSON value of `key`, or nullptr when absent or null (OpenAI treats both as unset).
const Json* Get(const Json& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

absl::StatusOr<double> Number(const Json& v, const char* key) {
  if (!v.is_number()) return Invalid(key, "must be a number");
  return v.get<double>();
}

absl::StatusOr<int64_t> Integer(const Json& v, const char* key) {
  if (v.is_number_integer()) return v.get<int64_t>();
  // 3.0 is an integer in JSON's eyes, as Python's SDK may send it (within int64's range).
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::abs(d) < 9.2e18 && d == std::trunc(d)) return static_cast<int64_t>(d);
  }
  return Invalid(key, "must be an integer");
}

// A token id: an integer from 0 to int32's maximum, as the wire API carries it (never truncated).
absl::StatusOr<int32_t> TokenId(const Json& v, const char* key) {
  if (v.is_number_unsigned() && v.get<uint64_t>() <= std::numeric_limits<int32_t>::max()) {
    return static_cast<int32_t>(v.get<uint64_t>());
  }
  return Invalid(key, absl::StrCat("token ids must be integers from 0 to ",
                                   std::numeric_limits<int32_t>::max(), " (got ", v.dump(), ")"));
}

absl::StatusOr<bool> Boolean(const Json& v, const char* key) {
  if (!v.is_boolean()) return Invalid(key, "must be true or false");
  return v.get<bool>();
}

// The text of a chat message's content: a string, or a list of text parts.
absl::StatusOr<std::string> MessageContent(const Json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return Invalid(param, "must be a string or a list of text parts");
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const Json& part = content[j];
    const std::string at = absl::StrCat(param, "[", j, "]");
    // Each member checked for its type before it is read: nlohmann's value() and get() throw on
    // another type (a "type" of -0.5 once reached the daemon as an exception).
    const Json* type = part.is_object() ? Get(part, "type") : nullptr;
    const Json* part_text = part.is_object() ? Get(part, "text") : nullptr;
    if (type == nullptr || !type->is_string() || type->get<std::string>() != "text" ||
        part_text == nullptr || !part_text->is_string()) {
      return Invalid(at, "only text parts ({\"type\": \"text\", \"text\": ...}) are supported");
    }
    text += part_text->get<std::string>();
  }
  return text;
}

absl::Status ParseMessages(const Json& body, df11::v1::GenerateRequest& g) {
  const Json* messages = Get(body, "messages");
  if (messages == nullptr) return Invalid("messages", "is required");
  if (!messages->is_array() || messages->empty()) {
    return Invalid("messages", "must be a non-empty list of messages");
  }
  df11::v1::ChatMessages* chat = g.mutable_chat();
  chat->set_add_generation_prompt(true);
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& m = (*messages)[i];
    const std::string at = absl::StrCat("messages[", i, "]");
    if (!m.is_object()) return Invalid(at, "must be an object with a role and a content");
    if (!m.contains("role") || !m["role"].is_string() || m["role"].get<std::string>().empty()) {
      return Invalid(at + ".role", "must be a non-empty string");
    }
    const Json* content = Get(m, "content");
    if (content == nullptr) return Invalid(at + ".content", "is required");
    DF11_ASSIGN_OR_RETURN(std::string text, MessageContent(*content, at + ".content"));
    df11::v1::ChatMessage* out = chat->add_messages();
    out->set_role(m["role"].get<std::string>());
    out->set_content(std::move(text));
  }
  return absl::OkStatus();
}

absl::Status ParsePrompt(const Json& body, df11::v1::GenerateRequest& g) {
  const Json* prompt = Get(body, "prompt");
  if (prompt == nullptr) return Invalid("prompt", "is required");
  const Json* p = prompt;
  // A list of one prompt is one prompt; more are a batch, which n = 1 rules out.
  if (p->is_array() && !p->empty() && (p->front().is_string() || p->front().is_array())) {
    if (p->size() != 1) return Invalid("prompt", "one prompt per request (a list of one)");
    p = &p->front();
  }
  if (p->is_string()) {
    g.set_text(p->get<std::string>());
    return absl::OkStatus();
  }
  if (!p->is_array() || p->empty()) {
    return Invalid("prompt", "must be a string or a non-empty list of token ids");
  }
  for (const Json& id : *p) {
    DF11_ASSIGN_OR_RETURN(const int32_t token, TokenId(id, "prompt"));
    g.mutable_token_ids()->add_ids(token);
  }
  return absl::OkStatus();
}

absl::Status ParseSampling(const Json& body, df11::v1::GenerateRequest& g) {
  df11::v1::SamplingParams* s = g.mutable_sampling();
  struct FloatParam {
    const char* key;
    void (df11::v1::SamplingParams::*set)(float);
  };
  for (const FloatParam& f :
       {FloatParam{"temperature", &df11::v1::SamplingParams::set_temperature},
        FloatParam{"top_p", &df11::v1::SamplingParams::set_top_p},
        FloatParam{"min_p", &df11::v1::SamplingParams::set_min_p},
        FloatParam{"presence_penalty", &df11::v1::SamplingParams::set_presence_penalty},
        FloatParam{"frequency_penalty", &df11::v1::SamplingParams::set_frequency_penalty},
        FloatParam{"repetition_penalty", &df11::v1::SamplingParams::set_repetition_penalty}}) {
    if (const Json* v = Get(body, f.key)) {
      DF11_ASSIGN_OR_RETURN(const double x, Number(*v, f.key));
      (s->*f.set)(static_cast<float>(x));
    }
  }
  if (const Json* v = Get(body, "top_k")) {
    DF11_ASSIGN_OR_RETURN(const int64_t k, Integer(*v, "top_k"));
    if (k < -1 || k > std::numeric_limits<int32_t>::max()) {
      return Invalid("top_k", "must be >= 0, or -1 for all tokens");
    }
    s->set_top_k(k == -1 ? 0 : static_cast<int32_t>(k));
  }
  if (const Json* v = Get(body, "seed")) {
    DF11_ASSIGN_OR_RETURN(const int64_t seed, Integer(*v, "seed"));
    s->set_seed(static_cast<uint64_t>(seed));
  }
  return absl::OkStatus();
}

// max_tokens / max_completion_tokens, stop, stop_token_ids, ignore_eos.
absl::Status ParseLimits(const Json& body, bool chat, df11::v1::GenerateRequest& g) {
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (!chat && std::string_view(key) == "max_completion_tokens") continue;
    if (const Json* v = Get(body, key)) {
      DF11_ASSIGN_OR_RETURN(const int64_t n, Integer(*v, key));
      if (n < 1 || n > std::numeric_limits<int32_t>::max()) return Invalid(key, "must be >= 1");
      g.set_max_tokens(static_cast<int32_t>(n));  // max_completion_tokens, read last, wins
    }
  }
  if (const Json* v = Get(body, "stop")) {
    if (v->is_string()) {
      g.add_stop(v->get<std::string>());
    } else if (v->is_array()) {
      for (const Json& s : *v) {
        if (!s.is_string()) return Invalid("stop", "must be a string or a list of strings");
        g.add_stop(s.get<std::string>());
      }
    } else {
      return Invalid("stop", "must be a string or a list of strings");
    }
  }
  if (const Json* v = Get(body, "stop_token_ids")) {
    if (!v->is_array()) return Invalid("stop_token_ids", "must be a list of token ids");
    for (const Json& id : *v) {
      DF11_ASSIGN_OR_RETURN(const int32_t token, TokenId(id, "stop_token_ids"));
      g.add_stop_token_ids(token);
    }
  }
  if (const Json* v = Get(body, "ignore_eos")) {
    DF11_ASSIGN_OR_RETURN(const bool b, Boolean(*v, "ignore_eos"));
    g.set_ignore_eos(b);
  }
  return absl::OkStatus();
}

// What the engine does not do is refused by name rather than ignored.
absl::Status RefuseUnsupported(const Json& body) {
  if (const Json* v = Get(body, "n")) {
    if (!v->is_number_integer() || v->get<int64_t>() != 1) {
      return Invalid("n", "only n = 1 is supported");
    }
  }
  if (const Json* v = Get(body, "best_of")) {
    if (!v->is_number_integer() || v->get<int64_t>() != 1) {
      return Invalid("best_of", "only best_of = 1 is supported");
    }
  }
  if (const Json* v = Get(body, "echo"); v != nullptr && (!v->is_boolean() || v->get<bool>())) {
    return Invalid("echo", "is not supported");
  }
  if (const Json* v = Get(body, "suffix"); v != nullptr) {
    return Invalid("suffix", "is not supported");
  }
  if (const Json* v = Get(body, "logit_bias"); v != nullptr && !v->empty()) {
    return Invalid("logit_bias", "is not supported");
  }
  for (const char* key : {"tools", "functions"}) {
    if (const Json* v = Get(body, key); v != nullptr && !v->empty()) {
      return Invalid(key, "tool calls are not supported");
    }
  }
  if (const Json* v = Get(body, "response_format")) {
    if (!v->is_object() || v->value("type", "") != "text") {
      return Invalid("response_format", "only {\"type\": \"text\"} is supported");
    }
  }
  return absl::OkStatus();
}

absl::Status ParseLogprobs(const Json& body, bool chat, Request& r) {
  const Json* logprobs = Get(body, "logprobs");
  if (chat) {
    if (logprobs != nullptr) {
      DF11_ASSIGN_OR_RETURN(r.logprobs, Boolean(*logprobs, "logprobs"));
    }
    if (const Json* top = Get(body, "top_logprobs")) {
      DF11_ASSIGN_OR_RETURN(const int64_t n, Integer(*top, "top_logprobs"));
      if (n < 0 || n > runtime::kMaxTopLogprobs)
        return Invalid("top_logprobs", "must be in [0, 20]");
      if (!r.logprobs && n > 0) return Invalid("top_logprobs", "needs logprobs: true");
      r.generate.set_top_logprobs(static_cast<int32_t>(n));
    }
  } else if (logprobs != nullptr) {
    // Completions: logprobs is how many of the most likely tokens to list (0 to 5).
    DF11_ASSIGN_OR_RETURN(const int64_t n, Integer(*logprobs, "logprobs"));
    if (n < 0 || n > 5) return Invalid("logprobs", "must be in [0, 5]");
    r.logprobs = true;
    r.generate.set_top_logprobs(static_cast<int32_t>(n));
  }
  r.generate.set_logprobs(r.logprobs);
  return absl::OkStatus();
}

std::string RandomId(const char* prefix) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = prefix;
  // 24 hex digits: 96 random bits.
  uint64_t bits = base::RandomBits();
  for (int i = 0; i < 24; ++i) {
    if (i == 16) bits = base::RandomBits();
    id.push_back(kHex[bits & 15]);
    bits >>= 4;
  }
  return id;
}

// JSON text; bytes that are not UTF-8 (none are expected) become U+FFFD rather than an exception.
std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

const char* FinishName(runtime::FinishReason reason) {
  return reason == runtime::FinishReason::kLength ? "length" : "stop";
}

}  // namespace

absl::StatusOr<Request> ParseRequest(std::string_view body, bool chat) {
  const Json json = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return Invalid("", "the body is not JSON");
  if (!json.is_object()) return Invalid("", "the body must be a JSON object");
  Request r;
  r.chat = chat;
  const Json* model = Get(json, "model");
  if (model == nullptr || !model->is_string() || model->get<std::string>().empty()) {
    return Invalid("model", "is required: the name of a model (GET /v1/models lists them)");
  }
  r.generate.set_model(model->get<std::string>());
  DF11_RETURN_IF_ERROR(RefuseUnsupported(json));
  DF11_RETURN_IF_ERROR(chat ? ParseMessages(json, r.generate) : ParsePrompt(json, r.generate));
  DF11_RETURN_IF_ERROR(ParseSampling(json, r.generate));
  DF11_RETURN_IF_ERROR(ParseLimits(json, chat, r.generate));
  DF11_RETURN_IF_ERROR(ParseLogprobs(json, chat, r));
  if (const Json* v = Get(json, "stream")) {
    DF11_ASSIGN_OR_RETURN(r.stream, Boolean(*v, "stream"));
  }
  if (const Json* v = Get(json, "stream_options")) {
    if (!v->is_object()) return Invalid("stream_options", "must be an object");
    if (!r.stream) return Invalid("stream_options", "needs stream: true");
    if (const Json* u = Get(*v, "include_usage")) {
      DF11_ASSIGN_OR_RETURN(r.include_usage, Boolean(*u, "stream_options.include_usage"));
    }
  }
  if (const Json* v = Get(json, "chat_template_kwargs")) {
    if (!chat || !v->is_object())
      return Invalid("chat_template_kwargs", "must be an object (chat)");
    if (const Json* t = Get(*v, "enable_thinking")) {
      DF11_ASSIGN_OR_RETURN(const bool b, Boolean(*t, "chat_template_kwargs.enable_thinking"));
      r.generate.set_enable_thinking(b);
    }
  }
  return r;
}

std::string ParamOf(const absl::Status& status) {
  const auto param = status.GetPayload(kParamPayload);
  return param ? std::string(*param) : "";
}

std::string ErrorBody(const absl::Status& status, std::string_view code_override) {
  const char* type;
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kNotFound:
      type = "invalid_request_error";
      break;
    case absl::StatusCode::kUnauthenticated:
      type = "authentication_error";
      break;
    case absl::StatusCode::kPermissionDenied:
      type = "permission_error";
      break;
    case absl::StatusCode::kResourceExhausted:
      type = "rate_limit_error";
      break;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      type = "service_unavailable_error";
      break;
    default:
      type = "server_error";
  }
  std::string code = absl::StatusCodeToString(status.code());
  for (char& c : code) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (status.code() == absl::StatusCode::kNotFound) code = "model_not_found";
  if (!code_override.empty()) code = std::string(code_override);
  const std::string p = ParamOf(status);
  Json error = {{"message", std::string(status.message())},
                {"type", type},
                {"param", p.empty() ? Json(nullptr) : Json(p)},
                {"code", code}};
  return Dump(Json{{"error", error}});
}

namespace {

Json ModelEntry(const registry::ModelInfo& m, int64_t now_seconds) {
  std::string status = registry::ModelStateName(m.state);
  for (char& c : status) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  Json entry = {{"id", m.name},
                {"object", "model"},
                {"created", m.last_used_unix_ms > 0 ? m.last_used_unix_ms / 1000 : now_seconds},
                {"owned_by", "df11d"},
                {"status", status},
                {"source", m.source},
                {"device", m.device},
                {"bytes", m.bytes.total()}};
  if (m.state != registry::ModelState::kAvailable) entry["df11"] = m.df11;
  return entry;
}

}  // namespace

std::string ModelList(const std::vector<registry::ModelInfo>& models, int64_t now_seconds) {
  Json data = Json::array();
  for (const registry::ModelInfo& m : models) data.push_back(ModelEntry(m, now_seconds));
  return Dump(Json{{"object", "list"}, {"data", data}});
}

std::string ModelObject(const registry::ModelInfo& model, int64_t now_seconds) {
  return Dump(ModelEntry(model, now_seconds));
}

Responder::Responder(const Request& request, const runtime::Tokenizer& tokenizer,
                     int64_t created_seconds)
    : request_(request),
      tokenizer_(tokenizer),
      created_(created_seconds),
      id_(RandomId(request.chat ? "chatcmpl-" : "cmpl-")) {}

namespace {

std::string EventOf(const Json& json) { return absl::StrCat("data: ", Dump(json), "\n\n"); }

// The `logprobs` of a choice for `tokens`: chat's {"content": [...]}, or the completions API's
// parallel lists, with text offsets from `text_offset`.
Json LogprobsOf(bool chat, const runtime::Tokenizer& tokenizer,
                const std::vector<runtime::GeneratedToken>& tokens, size_t text_offset) {
  auto text_of = [&](int32_t id) {
    const int32_t ids[] = {id};
    return tokenizer.Decode(ids, /*skip_special_tokens=*/false);
  };
  auto bytes_of = [&](int32_t id) {
    Json bytes = Json::array();
    for (unsigned char c : tokenizer.TokenBytes(id)) bytes.push_back(int{c});
    return bytes;
  };
  if (chat) {
    Json content = Json::array();
    for (const runtime::GeneratedToken& t : tokens) {
      Json top = Json::array();
      for (int32_t k = 0; k < t.top_logprobs_count; ++k) {
        const int32_t id = t.top_logprobs[k].token_id;
        top.push_back({{"token", text_of(id)},
                       {"logprob", t.top_logprobs[k].logprob},
                       {"bytes", bytes_of(id)}});
      }
      content.push_back({{"token", text_of(t.id)},
                         {"logprob", t.logprob},
                         {"bytes", bytes_of(t.id)},
                         {"top_logprobs", top}});
    }
    return Json{{"content", content}};
  }
  Json names = Json::array(), logprobs = Json::array(), tops = Json::array(),
       offsets = Json::array();
  size_t offset = text_offset;
  for (const runtime::GeneratedToken& t : tokens) {
    names.push_back(text_of(t.id));
    logprobs.push_back(t.logprob);
    Json top = Json::object();
    for (int32_t k = 0; k < t.top_logprobs_count; ++k) {
      top[text_of(t.top_logprobs[k].token_id)] = t.top_logprobs[k].logprob;
    }
    tops.push_back(std::move(top));
    offsets.push_back(offset);
    offset += t.text.size();
  }
  return Json{{"tokens", names},
              {"token_logprobs", logprobs},
              {"top_logprobs", tops},
              {"text_offset", offsets}};
}

// A streaming chunk around `choices` (one choice, or none for the usage chunk).
Json ChunkOf(const Request& request, const std::string& id, int64_t created, Json choices) {
  return Json{{"id", id},
              {"object", request.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", created},
              {"model", request.generate.model()},
              {"choices", std::move(choices)}};
}

Json UsageOf(int64_t prompt_tokens, int64_t completion_tokens) {
  return Json{{"prompt_tokens", prompt_tokens},
              {"completion_tokens", completion_tokens},
              {"total_tokens", prompt_tokens + completion_tokens}};
}

}  // namespace

std::string Responder::Chunk(const std::vector<runtime::GeneratedToken>& tokens) {
  std::string text;
  for (const runtime::GeneratedToken& t : tokens) text += t.text;
  std::string out;
  auto event = [&](Json choice) {
    Json chunk = ChunkOf(request_, id_, created_, Json::array({std::move(choice)}));
    if (request_.include_usage) chunk["usage"] = nullptr;
    out += EventOf(chunk);
  };
  if (request_.chat && !sent_role_) {
    sent_role_ = true;
    event({{"index", 0},
           {"delta", {{"role", "assistant"}, {"content", ""}}},
           {"logprobs", nullptr},
           {"finish_reason", nullptr}});
  }
  if (text.empty() && (!request_.logprobs || tokens.empty())) return out;
  Json choice = {{"index", 0}, {"finish_reason", nullptr}};
  if (request_.chat) {
    choice["delta"] = {{"content", text}};
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = request_.logprobs
                           ? LogprobsOf(request_.chat, tokenizer_, tokens, text_.size())
                           : Json(nullptr);
  text_ += text;
  event(std::move(choice));
  return out;
}

std::string Responder::FinishStream(runtime::FinishReason reason, int64_t prompt_tokens,
                                    int64_t completion_tokens) {
  std::string out = Chunk({});  // the chat's role, if no token came
  Json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", FinishName(reason)}};
  if (request_.chat) {
    choice["delta"] = Json::object();
  } else {
    choice["text"] = "";
  }
  Json chunk = ChunkOf(request_, id_, created_, Json::array({std::move(choice)}));
  if (request_.include_usage) chunk["usage"] = nullptr;
  out += EventOf(chunk);
  if (request_.include_usage) {
    Json usage = ChunkOf(request_, id_, created_, Json::array());
    usage["usage"] = UsageOf(prompt_tokens, completion_tokens);
    out += EventOf(usage);
  }
  out += "data: [DONE]\n\n";
  return out;
}

void Responder::Add(const std::vector<runtime::GeneratedToken>& tokens) {
  for (const runtime::GeneratedToken& t : tokens) {
    text_ += t.text;
    if (request_.logprobs) tokens_.push_back(t);
  }
}

std::string Responder::Body(runtime::FinishReason reason, int64_t prompt_tokens,
                            int64_t completion_tokens) const {
  Json choice = {{"index", 0}, {"finish_reason", FinishName(reason)}};
  if (request_.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text_}};
  } else {
    choice["text"] = text_;
  }
  choice["logprobs"] =
      request_.logprobs ? LogprobsOf(request_.chat, tokenizer_, tokens_, 0) : Json(nullptr);
  return Dump(Json{{"id", id_},
                   {"object", request_.chat ? "chat.completion" : "text_completion"},
                   {"created", created_},
                   {"model", request_.generate.model()},
                   {"choices", Json::array({std::move(choice)})},
                   {"usage", UsageOf(prompt_tokens, completion_tokens)}});
}

}  // namespace df11::server::openai
