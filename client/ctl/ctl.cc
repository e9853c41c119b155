// df11ctl's command table, global options and dispatch.
#include "client/ctl/ctl.h"

#include <map>
#include <memory>
#include <optional>
#include <set>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/ctl/commands.h"
#include "client/ctl/format.h"
#include "codec/base/read_file.h"

namespace df11::ctl {
namespace {

constexpr char kCommonHelp[] = R"(
Common options:
  --addr HOST:PORT    the daemon (default: $DF11_ADDR, else 127.0.0.1:7411)
  --token-file FILE   send the token in FILE (default: $DF11_TOKEN, if set), for a daemon
                      with auth.tokens_file
  --tls-ca FILE       TLS: the CA (PEM) the daemon's certificate chains to
  --tls-cert FILE --tls-key FILE
                      mutual TLS: this client's certificate and key (PEM)
  --json              machine-readable output: the reply as one line of JSON
  --help              this help
  --version           df11ctl's version

Exit codes: 0 success, 1 the call failed (stderr: "df11ctl COMMAND: CODE: message"),
2 bad command line.
)";

const Command* Find(const std::string& name) {
  for (const Command& c : AllCommands()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::string TopUsage() {
  std::string out =
      "df11ctl: control a df11d daemon (many DF11-compressed models on one node)\n\n"
      "Usage: df11ctl [--addr HOST:PORT] [--token-file FILE] COMMAND [ARGS...]    (df11ctl COMMAND "
      "--help for "
      "details)\n\nCommands:\n";
  for (const Command& c : AllCommands()) {
    absl::StrAppend(&out, absl::StrFormat("  %-10s %s\n", c.name, c.summary));
  }
  absl::StrAppend(&out, kCommonHelp);
  return out;
}

std::string CommandHelp(const Command& c) {
  return absl::StrCat("Usage: df11ctl ", c.name, c.synopsis.empty() ? "" : " ", c.synopsis, "\n\n",
                      c.help, kCommonHelp);
}

int GlobalUsageError(Console& console, const std::string& message) {
  console.err << "df11ctl: " << message << "\nRun 'df11ctl --help' for usage.\n";
  return kExitUsage;
}

int CommandUsageError(Console& console, const std::string& command, const std::string& message) {
  console.err << "df11ctl " << command << ": " << message << "\nRun 'df11ctl " << command
              << " --help' for usage.\n";
  return kExitUsage;
}

}  // namespace

int Fail(Context& context, const absl::Status& status) {
  context.console.err << "df11ctl " << context.command << ": "
                      << absl::StatusCodeToString(status.code()) << ": " << status.message()
                      << "\n";
  return kExitFailed;
}

int UsageError(Context& context, const std::string& message) {
  return CommandUsageError(context.console, context.command, message);
}

int PrintJson(Context& context, const google::protobuf::Message& message) {
  absl::StatusOr<std::string> json = MessageToJson(message);
  if (!json.ok()) return Fail(context, json.status());
  context.console.out << *json << "\n" << std::flush;
  return kExitOk;
}

int RunDf11ctl(const std::vector<std::string>& args, const char* env_address, Console& console,
               const char* env_token) {
  std::string address =
      env_address != nullptr && *env_address != '\0' ? env_address : kDefaultAddress;
  std::optional<std::string> token_file;
  std::map<std::string, std::string> global_tls;  // --tls-* given before the command
  // Global options come before the command.
  size_t i = 0;
  for (; i < args.size() && absl::StartsWith(args[i], "-"); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      console.out << TopUsage();
      return kExitOk;
    }
    if (a == "--version") {
      console.out << "df11ctl " << DF11_VERSION << "\n";
      return kExitOk;
    }
    if (a == "--addr") {
      if (i + 1 >= args.size()) return GlobalUsageError(console, "--addr needs a value");
      address = args[++i];
    } else if (absl::StartsWith(a, "--addr=")) {
      address = a.substr(7);
    } else if (a == "--tls-ca" || a == "--tls-cert" || a == "--tls-key") {
      if (i + 1 >= args.size()) return GlobalUsageError(console, a + " needs a value");
      global_tls[a.substr(2)] = args[++i];
    } else if (a == "--token-file") {
      if (i + 1 >= args.size()) return GlobalUsageError(console, "--token-file needs a value");
      token_file = args[++i];
    } else if (absl::StartsWith(a, "--token-file=")) {
      token_file = a.substr(13);
    } else {
      return GlobalUsageError(console, absl::StrCat("unknown option ", a));
    }
  }
  if (i >= args.size()) {
    console.err << TopUsage();
    return kExitUsage;
  }
  std::string name = args[i++];
  std::vector<std::string> rest(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  if (name == "help") {
    if (rest.empty()) {
      console.out << TopUsage();
      return kExitOk;
    }
    name = rest[0];
    rest = {"--help"};
  }
  const Command* command = Find(name);
  if (command == nullptr) {
    return GlobalUsageError(console, absl::StrCat("unknown command '", name, "'"));
  }

  std::set<std::string> value_flags = command->value_flags;
  value_flags.insert({"addr", "token-file", "tls-ca", "tls-cert", "tls-key"});
  std::set<std::string> bool_flags = command->bool_flags;
  bool_flags.insert({"json", "help"});
  absl::StatusOr<cli::Args> parsed = cli::Args::Parse(rest, value_flags, bool_flags);
  if (!parsed.ok()) {
    return CommandUsageError(console, name, std::string(parsed.status().message()));
  }
  if (parsed->Has("help")) {
    console.out << CommandHelp(*command);
    return kExitOk;
  }
  if (std::optional<std::string> a = parsed->Get("addr")) address = *a;
  if (address.empty()) return CommandUsageError(console, name, "the daemon address is empty");

  if (std::optional<std::string> f = parsed->Get("token-file")) token_file = *f;
  std::string token = env_token != nullptr ? env_token : "";
  if (token_file) {
    const absl::StatusOr<std::string> text = base::ReadFile(*token_file, base::kMaxTokenFileBytes);
    if (!text.ok()) {
      return CommandUsageError(console, name,
                               absl::StrCat("cannot read --token-file: ", text.status().message()));
    }
    token = *text;
  }
  token = std::string(absl::StripAsciiWhitespace(token));
  client::ConnectOptions connect{.token = token};
  for (auto [flag, out] :
       {std::pair{"tls-ca", &connect.tls_ca_file}, std::pair{"tls-cert", &connect.tls_cert_file},
        std::pair{"tls-key", &connect.tls_key_file}}) {
    if (std::optional<std::string> v = parsed->Get(flag)) {
      *out = *v;
    } else if (auto it = global_tls.find(flag); it != global_tls.end()) {
      *out = it->second;
    }
  }
  absl::StatusOr<std::unique_ptr<client::Df11Client>> client =
      client::Df11Client::Connect(address, connect);
  if (!client.ok()) return CommandUsageError(console, name, std::string(client.status().message()));
  Context context{.command = name,
                  .args = *parsed,
                  .client = **client,
                  .console = console,
                  .json = parsed->Has("json")};
  return command->run(context);
}

const std::vector<Command>& AllCommands() {
  static const std::vector<Command>* commands = new std::vector<Command>{
      {"load",
       "SOURCE [--name N] [--pin] [--keep-alive D] [--device D] [--shared]",
       "load a model from a directory or the hub",
       R"(Loads SOURCE (a model directory on the daemon's machine, or a hub id org/name[@revision])
and waits until it is resident, showing each phase (resolving, downloading, placing) with bytes
done and total: a progress bar on a terminal, plain lines otherwise (stderr). Loading a model that
is already resident returns at once.

  --name N            the name requests use (default: from the source)
  --pin               never evict it
  --keep-alive D      idle time before it may be evicted: 30s, 5m, 1h, 250ms or bare seconds
                      (default: the daemon's)
  --device D          cpu or cuda:N (default: the daemon's first device)
  --shared            admin tokens: every tenant sees and uses it (default: it belongs to the
                      token's tenant)
  --json              the last progress message, with the model's final state
)",
       {"name", "keep-alive", "device"},
       {"pin", "shared"},
       RunLoad},
      {"unload",
       "NAME [--drain D] [--cancel] [--owner T]",
       "unload a model and free its memory",
       R"(Unloads NAME: new requests are refused at once; requests in flight may finish for the
drain time, then end with CANCELLED; then the model's memory is freed.

  --drain D           how long in-flight requests may finish: 30s, 5m, 250ms or bare seconds
                      (default: the daemon's drain time)
  --cancel            without --drain: cancel in-flight requests at once
  --owner T           the tenant whose model NAME is (admin tokens; default: the token's own
                      tenant's model, else the shared one)
)",
       {"drain", "owner"},
       {"cancel"},
       RunUnload},
      {"list",
       "",
       "the models: state, memory by kind, requests, tokens",
       R"(Lists the daemon's models: name, state, architecture, format (DF11 or BF16), devices, bytes
by kind (DF11 units, passthrough tensors, KV cache in use, total), pinned, requests served and
tokens generated; with tenants, each model's owner (a user token lists its own tenant's models and
the shared ones).
)",
       {},
       {},
       RunList},
      {"get",
       "NAME [--owner T]",
       "everything about one model",
       R"(Prints every field the daemon reports for model NAME.

  --owner T           the tenant whose model NAME is (admin tokens; default: the token's own
                      tenant's model, else the shared one)
)",
       {"owner"},
       {},
       RunGet},
      {"estimate",
       "SOURCE",
       "the memory a model would take, before loading it",
       R"(Reads only the headers of SOURCE's files (a directory or a hub id) and prints the bytes
loading it would place: DF11 units, passthrough tensors, their total, and the KV cache per token
and at full context.
)",
       {},
       {},
       RunEstimate},
      {"generate",
       "NAME --prompt TEXT [options]",
       "generate text with a resident model",
       R"(Generates text with model NAME and streams it to stdout as it arrives; a summary (tokens,
finish reason, speed) follows on stderr. Unset sampling options take the model's defaults.

  --prompt TEXT           the prompt (required)
  --chat                  send the prompt as a user message, rendered with the model's chat
                          template (with the assistant's turn opened)
  --system TEXT           with --chat: a system message first
  --no-thinking           with --chat: enable_thinking=false for templates that read it (Qwen3)
  --max-tokens N          tokens to generate at most (default: the daemon's)
  --temperature T         0 is greedy
  --top-p P, --top-k K, --min-p P, --repetition-penalty R
  --seed S                same seed, same tokens
  --owner T               the tenant whose model NAME is (admin tokens; default: the token's
                          own tenant's model, else the shared one)
  --stop TEXT             stop before this text (may be repeated)
  --ignore-eos            keep going past the end-of-sequence token
  --logprobs              also get each token's log-probability (in --json; the mean in the
                          summary)
  --json                  one JSON object at the end instead of streaming: text, token_ids,
                          finish_reason (stop or length), usage {prompt_tokens,
                          completion_tokens}, timings {queue_seconds,
                          time_to_first_token_seconds, seconds_per_token, total_seconds}, and
                          logprobs with --logprobs
)",
       {"prompt", "system", "max-tokens", "temperature", "top-p", "top-k", "min-p",
        "repetition-penalty", "seed", "stop", "owner"},
       {"chat", "no-thinking", "ignore-eos", "logprobs"},
       RunGenerate},
      {"status",
       "",
       "the node: memory per device by kind, models, queues",
       R"(Prints the node's status: per device its memory, the budget df11d may use, what is used by
kind (weights, decode scratch, KV cache, workspace), what is free and what a load could get now
(placeable, counting what eviction may free); then the models with their memory and queues.
)",
       {},
       {},
       RunStatus},
      {"top",
       "[--interval D] [--once]",
       "watch memory and load, live",
       R"(Shows per-device and per-model memory and load, updated every interval: redrawn in place
on a terminal, one block per update otherwise. Runs until interrupted or the daemon ends the watch.

  --interval D        time between updates: 1s, 500ms, ... (default 1s)
  --once              print one update and exit
  --json              one NodeStatus JSON line per update
)",
       {"interval"},
       {"once"},
       RunTop},
  };
  return *commands;
}

}  // namespace df11::ctl
