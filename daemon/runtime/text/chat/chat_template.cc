#include "daemon/runtime/text/chat/chat_template.h"

#include <filesystem>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "codec/base/read_file.h"
#include "codec/base/status_macros.h"
#include "daemon/runtime/text/chat/ast.h"
#include "daemon/runtime/text/chat/interpreter.h"
#include "daemon/runtime/text/chat/lexer.h"
#include "daemon/runtime/text/chat/parser.h"
#include "daemon/runtime/text/chat/py_text.h"
#include "daemon/runtime/text/chat/str_cat.h"
#include "daemon/runtime/text/chat/value.h"

namespace df11::runtime {
namespace {

using Json = nlohmann::ordered_json;

// Where transformers looks for a message's reasoning; the first is what templates read.
constexpr const char* kReasoningFields[] = {"reasoning_content", "thinking", "reasoning"};

absl::Status Prefixed(const absl::Status& s, std::string_view prefix) {
  return absl::Status(s.code(), chat::Cat(prefix, s.message()));
}

// tokenizer_config.json's bos_token / eos_token: a string, or an AddedToken-like object with
// "content". nullopt when absent or null.
absl::StatusOr<std::optional<std::string>> SpecialToken(const Json& config, const std::string& key,
                                                        const std::string& path) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto content = it->find("content");
    if (content != it->end() && content->is_string()) return content->get<std::string>();
  }
  return absl::InvalidArgumentError(
      chat::Cat(path, ": \"", key, "\" must be a string or an object with a string \"content\""));
}

// A message as transformers hands it to the template: null-valued keys dropped, reasoning
// copied to "thinking" (first) and "reasoning_content" (render_jinja_template's
// _alias_reasoning_fields).
Json NormalizeMessage(const Json& message) {
  Json out = Json::object();
  for (const auto& [key, value] : message.items()) {
    if (!value.is_null()) out[key] = value;
  }
  const Json* reasoning = nullptr;
  for (const char* field : kReasoningFields) {
    if (auto it = out.find(field); it != out.end()) {
      reasoning = &*it;
      break;
    }
  }
  if (reasoning == nullptr) return out;
  Json aliased = Json::object();
  aliased["thinking"] = *reasoning;
  for (const auto& [key, value] : out.items()) aliased[key] = value;
  aliased["reasoning_content"] = *reasoning;
  return aliased;
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::FromSource(std::string source,
                                                      std::optional<std::string> bos_token,
                                                      std::optional<std::string> eos_token) {
  if (!chat::IsValidUtf8(source)) {
    return absl::InvalidArgumentError("chat template is not valid UTF-8");
  }
  if ((bos_token.has_value() && !chat::IsValidUtf8(*bos_token)) ||
      (eos_token.has_value() && !chat::IsValidUtf8(*eos_token))) {
    return absl::InvalidArgumentError("bos_token / eos_token is not valid UTF-8");
  }
  DF11_ASSIGN_OR_RETURN(std::vector<chat::Token> tokens, chat::Tokenize(source));
  DF11_ASSIGN_OR_RETURN(std::unique_ptr<chat::Program> program, chat::Parse(tokens));
  chat::FoldConstants(*program);
  ChatTemplate result;
  result.program_ = std::move(program);
  result.bos_token_ = std::move(bos_token);
  result.eos_token_ = std::move(eos_token);
  return result;
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromModelDir(const std::string& dir, bool with_tools) {
  const std::string jinja_path = dir + "/chat_template.jinja";
  const std::string config_path = dir + "/tokenizer_config.json";
  std::error_code ec;
  Json config = Json::object();
  if (std::filesystem::is_regular_file(config_path, ec)) {
    DF11_ASSIGN_OR_RETURN(std::string text, base::ReadFile(config_path, base::kMaxTokenizerConfigBytes));
    config = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (config.is_discarded() || !config.is_object()) {
      return absl::InvalidArgumentError(chat::Cat(config_path, ": not a JSON object"));
    }
  }
  DF11_ASSIGN_OR_RETURN(std::optional<std::string> bos,
                        SpecialToken(config, "bos_token", config_path));
  DF11_ASSIGN_OR_RETURN(std::optional<std::string> eos,
                        SpecialToken(config, "eos_token", config_path));

  if (std::filesystem::is_regular_file(jinja_path, ec)) {
    DF11_ASSIGN_OR_RETURN(std::string source, base::ReadFile(jinja_path, base::kMaxModelConfigBytes));
    absl::StatusOr<ChatTemplate> compiled = FromSource(std::move(source), bos, eos);
    if (!compiled.ok()) return Prefixed(compiled.status(), jinja_path + ": ");
    return compiled;
  }
  auto field = config.find("chat_template");
  if (field == config.end() || field->is_null()) {
    return absl::NotFoundError(chat::Cat("no chat template in ", dir, ": looked for ", jinja_path,
                                         " and \"chat_template\" in ", config_path));
  }
  std::string source;
  if (field->is_string()) {
    source = field->get<std::string>();
  } else if (field->is_array()) {
    // Named templates: {"name": ..., "template": ...}.
    std::vector<std::string> names;
    const Json* chosen = nullptr;
    const Json* fallback = nullptr;
    for (const Json& entry : *field) {
      auto name = entry.is_object() ? entry.find("name") : entry.end();
      auto text = entry.is_object() ? entry.find("template") : entry.end();
      if (!entry.is_object() || name == entry.end() || !name->is_string() || text == entry.end() ||
          !text->is_string()) {
        return absl::InvalidArgumentError(
            chat::Cat(config_path,
                      ": \"chat_template\" entries must be {\"name\": string, "
                      "\"template\": string}"));
      }
      names.push_back(name->get<std::string>());
      if (with_tools && names.back() == "tool_use") chosen = &*text;
      if (names.back() == "default") fallback = &*text;
    }
    if (chosen == nullptr) chosen = fallback;
    if (chosen == nullptr) {
      return absl::FailedPreconditionError(chat::Cat(
          config_path, ": \"chat_template\" lists templates [", absl::StrJoin(names, ", "),
          "] but none named \"default\"", with_tools ? " or \"tool_use\"" : ""));
    }
    source = chosen->get<std::string>();
  } else {
    return absl::InvalidArgumentError(chat::Cat(
        config_path, ": \"chat_template\" must be a string or a list of named templates"));
  }
  absl::StatusOr<ChatTemplate> compiled = FromSource(std::move(source), bos, eos);
  if (!compiled.ok()) return Prefixed(compiled.status(), config_path + ": ");
  return compiled;
}

absl::StatusOr<std::string> ChatTemplate::Render(const nlohmann::ordered_json& messages,
                                                 bool add_generation_prompt,
                                                 const nlohmann::ordered_json& extra) const {
  if (!messages.is_array() || messages.empty()) {
    return absl::InvalidArgumentError("messages must be a non-empty JSON array");
  }
  if (!extra.is_object()) return absl::InvalidArgumentError("extra must be a JSON object");
  chat::Dict context;
  if (bos_token_.has_value()) context.Set("bos_token", chat::Value::String(*bos_token_));
  if (eos_token_.has_value()) context.Set("eos_token", chat::Value::String(*eos_token_));
  context.Set("tools", chat::Value::None());
  context.Set("documents", chat::Value::None());
  for (const auto& [key, value] : extra.items()) {
    if (key == "messages" || key == "add_generation_prompt") {
      return absl::InvalidArgumentError(
          chat::Cat("extra must not set \"", key, "\" (it is a Render argument)"));
    }
    if (!chat::IsValidUtf8(key)) {
      return absl::InvalidArgumentError("extra: a key is not valid UTF-8");
    }
    DF11_ASSIGN_OR_RETURN(chat::Value v, chat::FromJson(value, chat::Cat("extra.", key)));
    context.Set(key, std::move(v));
  }
  std::vector<chat::Value> converted;
  converted.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!messages[i].is_object()) {
      return absl::InvalidArgumentError(chat::Cat("messages[", i, "] must be a JSON object"));
    }
    DF11_ASSIGN_OR_RETURN(chat::Value message, chat::FromJson(NormalizeMessage(messages[i]),
                                                              chat::Cat("messages[", i, "]")));
    converted.push_back(std::move(message));
  }
  DF11_ASSIGN_OR_RETURN(chat::Value message_list, chat::MakeList(std::move(converted)));
  context.Set("messages", std::move(message_list));
  context.Set("add_generation_prompt", chat::Value::Bool(add_generation_prompt));
  return chat::RenderProgram(*program_, context, limits_);
}

}  // namespace df11::runtime
