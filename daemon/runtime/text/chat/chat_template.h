// Renders a model's chat template (Jinja source shipped with the model) into the prompt text,
// byte for byte as Hugging Face transformers' apply_chat_template(..., tokenize=False) does.
//
//   DF11_ASSIGN_OR_RETURN(ChatTemplate tmpl, ChatTemplate::FromModelDir(model_dir));
//   nlohmann::ordered_json messages = nlohmann::ordered_json::parse(
//       R"([{"role": "user", "content": "Hi!"}])");
//   DF11_ASSIGN_OR_RETURN(std::string prompt,
//                         tmpl.Render(messages, /*add_generation_prompt=*/true,
//                                     {{"enable_thinking", false}}));
//   // Tokenize `prompt` with add_special_tokens=false: the template already wrote BOS.
//
// The interpreter is written for this purpose (no minja): transformers renders with jinja2's
// ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) plus the loopcontrols
// extension, a tojson filter built on json.dumps (no HTML escaping, non-ASCII kept, keys in
// insertion order), and the globals raise_exception and strftime_now; this implements the part
// of that language chat templates use, with the same output:
//
//   Syntax     {{ }}, {% %}, {# #}, whitespace control {%- -%} {{- -}} {#- -#} and {%+ +%},
//              trim_blocks / lstrip_blocks, the final newline dropped.
//   Tags       if / elif / else; for (list, dict, string; `a, b` unpacking; `if` filter;
//              else; loop.index, index0, revindex, revindex0, first, last, length, previtem,
//              nextitem, cycle()); set (`x = ...`, `a, b = ...`, `ns.attr = ...`, and the
//              {% set x %}...{% endset %} block); break / continue; {% generation %}.
//   Expressions  literals ('str' "str" with Python escapes, ints, floats, true/false/none and
//              True/False/None, [lists], (tuples), {dicts}); and / or / not; comparison
//              chains; in / not in; `a if c else b`; + - * / // % ** and unary -, +; ~
//              concatenation; .attr, [index], [a:b:c] slices (negative indices and steps);
//              calls with keyword arguments; filters and tests (see builtins.h for the list,
//              with the string and dict methods and the globals namespace(), range(),
//              raise_exception(), strftime_now(), dict()).
//   Undefined  Jinja's default Undefined: a missing variable, attribute or key is falsy,
//              prints as "", iterates as empty and passes `is defined` / `is undefined`, but
//              any other use raises (`undefined.attr` too, as in Jinja).
//
// Anything outside it (macro, call, filter blocks, include, import, extends, raw, unknown
// filters and tests) fails when the template is compiled, with kFailedPrecondition naming the
// construct and line, even inside a branch that would never run (Jinja would only fail there);
// what can only be seen while rendering (an unimplemented Python method such as str.format,
// printing a generator, whose text is a memory address, integers beyond int64) fails the render
// the same way. Within the subset the output is Jinja's, down to its quirks (constant folding of
// slices, lazy generators, for-else after break). One known gap (py_text.h): characters that
// Unicode assigned after 14.0, the version of CPython 3.11, follow utf8proc's newer tables in
// case mapping and repr.
//
// A template is untrusted input: rendering is bounded by ChatTemplate::Limits (output size,
// evaluation steps, bytes of strings built), expressions and blocks by a nesting depth fixed
// when parsing, and values by a nesting depth of 128; exceeding any is kResourceExhausted.
#ifndef DF11_DAEMON_RUNTIME_TEXT_CHAT_CHAT_TEMPLATE_H_
#define DF11_DAEMON_RUNTIME_TEXT_CHAT_CHAT_TEMPLATE_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/runtime/text/chat/limits.h"
#include "nlohmann/json.hpp"

namespace df11::runtime {

namespace chat {
struct Program;
}  // namespace chat

// A compiled chat template. Copies share the compiled form (cheap). Thread-safe: Render is
// const and keeps no shared mutable state.
class ChatTemplate {
 public:
  using Limits = chat::RenderLimits;

  // Compiles template source. kInvalidArgument for a syntax error or source that is not UTF-8
  // ("chat template line 3: ..."); kFailedPrecondition naming the construct and line for
  // anything unsupported ("chat template line 12: unsupported Jinja tag 'macro'");
  // kResourceExhausted for expressions or blocks nested too deeply. `bos_token` and
  // `eos_token` become the template variables of the same names; nullopt leaves one undefined,
  // as transformers does for a tokenizer without that token (Qwen has no BOS).
  static absl::StatusOr<ChatTemplate> FromSource(std::string source,
                                                 std::optional<std::string> bos_token,
                                                 std::optional<std::string> eos_token);

  // Loads a model directory's template as transformers does: `chat_template.jinja` if present,
  // else tokenizer_config.json's "chat_template", either a string or a list of
  // {"name", "template"} objects, of which the one named "tool_use" is used when `with_tools`
  // and it exists, else "default". bos_token / eos_token come from tokenizer_config.json (a
  // string, or an object with "content"); one that is absent or null is left undefined in the
  // template, as transformers leaves it. kNotFound when the directory has no template (the
  // message names the files looked at); kInvalidArgument for a tokenizer_config.json that is not
  // JSON or has fields of the wrong type; kFailedPrecondition for a template list without the
  // needed entry; kInternal if a file exists but cannot be read; compile errors as FromSource,
  // prefixed with the file name.
  static absl::StatusOr<ChatTemplate> FromModelDir(const std::string& dir, bool with_tools = false);

  // The prompt text for `messages`, a JSON array of message objects ({"role", "content", ...};
  // ordered_json so that tojson keeps their key order). As transformers does before rendering,
  // keys whose value is null are dropped from each message, and a message with reasoning under
  // "reasoning_content", "thinking" or "reasoning" gets it under "thinking" and
  // "reasoning_content" as well. The template sees `messages`, `add_generation_prompt`,
  // `bos_token`, `eos_token`, `tools` and `documents` (None unless given in `extra`), and every
  // other key of `extra` (enable_thinking, date_string, builtin_tools, ...), which overrides
  // bos_token / eos_token too.
  //
  // kInvalidArgument when `messages` is not a non-empty array of objects, `extra` is not an
  // object or holds "messages" or "add_generation_prompt", a string is not UTF-8, the template
  // calls raise_exception(msg) (the message is exactly msg), or rendering raises as Jinja would
  // (an Undefined used in arithmetic, a type error, ...; the message starts with "chat template
  // line N: "). kFailedPrecondition for a construct outside the subset met while rendering,
  // kResourceExhausted when a limit is exceeded.
  absl::StatusOr<std::string> Render(
      const nlohmann::ordered_json& messages, bool add_generation_prompt,
      const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

  // Bounds for later Render calls (defaults in limits.h). Not thread-safe against concurrent
  // Render calls on the same object.
  void set_limits(const Limits& limits) { limits_ = limits; }
  const Limits& limits() const { return limits_; }

 private:
  ChatTemplate() = default;

  std::shared_ptr<const chat::Program> program_;
  std::optional<std::string> bos_token_;
  std::optional<std::string> eos_token_;
  Limits limits_;
};

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_TEXT_CHAT_CHAT_TEMPLATE_H_
