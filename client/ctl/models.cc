// df11ctl load, unload, list, get, estimate: the model lifecycle commands.
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cli/progress.h"
#include "client/ctl/commands.h"
#include "client/ctl/format.h"

namespace df11::ctl {
namespace {

// Checks that exactly one positional argument (named `what` in the message) was given.
bool OnePositional(Context& c, const std::string& what, int& exit_code) {
  if (c.args.positional().size() == 1) return true;
  exit_code = UsageError(c, absl::StrCat("expected ", what));
  return false;
}

bool NoPositional(Context& c, int& exit_code) {
  if (c.args.positional().empty()) return true;
  exit_code = UsageError(c, absl::StrCat("unexpected argument '", c.args.positional()[0], "'"));
  return false;
}

// A source naming a directory here is sent as an absolute path: the daemon resolves relative
// paths against its own working directory, not the caller's.
std::string SourceForDaemon(const std::string& source) {
  std::error_code ec;
  if (!std::filesystem::is_directory(source, ec)) return source;
  const std::filesystem::path absolute = std::filesystem::absolute(source, ec);
  return ec ? source : absolute.lexically_normal().string();
}

// "demo: ready, Qwen3ForCausalLM DF11, 5.2 MiB on cpu"
std::string ModelLine(const v1::ModelInfo& m) {
  std::string devices;
  for (const v1::DeviceBytes& b : m.bytes()) {
    absl::StrAppend(&devices, devices.empty() ? "" : ",", b.device());
  }
  return absl::StrCat(m.name(), ": ", StateName(m.state()), ", ",
                      m.architecture().empty() ? "" : m.architecture() + " ",
                      m.df11() ? "DF11" : "BF16", ", ", cli::HumanBytes(SumBytes(m).total()),
                      devices.empty() ? "" : " on ", devices, "\n");
}

}  // namespace

int RunLoad(Context& c) {
  int exit_code;
  if (!OnePositional(c, "SOURCE", exit_code)) return exit_code;
  v1::LoadModelRequest request;
  request.set_source(SourceForDaemon(c.args.positional()[0]));
  if (std::optional<std::string> name = c.args.Get("name")) request.set_name(*name);
  request.set_pin(c.args.Has("pin"));
  absl::StatusOr<double> keep_alive = c.args.GetSeconds("keep-alive", 0);
  if (!keep_alive.ok()) return UsageError(c, std::string(keep_alive.status().message()));
  request.set_keep_alive_seconds(*keep_alive);
  if (std::optional<std::string> device = c.args.Get("device")) request.set_device(*device);
  request.set_shared(c.args.Has("shared"));

  // One bar (or run of lines) per phase, so each phase shows its own bytes.
  const std::string item = request.name().empty() ? request.source() : request.name();
  std::unique_ptr<cli::Progress> bar;
  v1::LoadPhase bar_phase = v1::LOAD_PHASE_UNSPECIFIED;
  auto on_progress = [&](const v1::LoadModelProgress& p) {
    if (p.phase() == v1::LOAD_PHASE_UNSPECIFIED || p.phase() == v1::LOAD_PHASE_DONE) return;
    if (bar == nullptr || p.phase() != bar_phase) {
      bar.reset();
      bar_phase = p.phase();
      const std::string label = c.console.err_terminal
                                    ? absl::StrFormat("%-11s", PhaseName(p.phase()))
                                    : PhaseName(p.phase());
      bar = std::make_unique<cli::Progress>(label, c.console.err, c.console.err_terminal);
    }
    // Where the files still arriving come from: the hub, or peers (named).
    std::set<std::string> sources;
    for (const v1::LoadFileProgress& f : p.files()) {
      if (f.bytes_downloaded() < f.size() && !f.source().empty() && f.source() != "cache") {
        sources.insert(f.source());
      }
    }
    bar->Update(p.phase() == v1::LOAD_PHASE_DOWNLOADING && !sources.empty()
                    ? absl::StrCat(item, " from ", absl::StrJoin(sources, ", "))
                    : item,
                p.bytes_done(), p.bytes_total());
  };
  absl::StatusOr<v1::LoadModelProgress> last = c.client.LoadModel(request, on_progress);
  bar.reset();
  if (!last.ok()) return Fail(c, last.status());
  const v1::ModelInfo& model = last->model();
  if (c.json) {
    if (int code = PrintJson(c, *last); code != kExitOk) return code;
  } else if (model.state() != v1::MODEL_STATE_FAILED) {
    c.console.out << ModelLine(model);
  }
  if (model.state() == v1::MODEL_STATE_FAILED) {
    return Fail(c, absl::UnknownError(
                       absl::StrCat(model.name(), ": the load failed: ", model.failure_reason())));
  }
  return kExitOk;
}

int RunUnload(Context& c) {
  int exit_code;
  if (!OnePositional(c, "NAME", exit_code)) return exit_code;
  v1::UnloadModelRequest request;
  request.set_name(c.args.positional()[0]);
  if (std::optional<std::string> owner = c.args.Get("owner")) request.set_owner(*owner);
  absl::StatusOr<double> drain = c.args.GetSeconds("drain", 0);
  if (!drain.ok()) return UsageError(c, std::string(drain.status().message()));
  request.set_drain_seconds(*drain);
  request.set_cancel_in_flight(c.args.Has("cancel"));
  absl::StatusOr<v1::UnloadModelResponse> response = c.client.UnloadModel(request);
  if (!response.ok()) return Fail(c, response.status());
  if (c.json) return PrintJson(c, *response);
  c.console.out << "unloaded " << request.name() << ": freed "
                << cli::HumanBytes(response->bytes_freed()) << ", "
                << response->requests_cancelled()
                << (response->requests_cancelled() == 1 ? " request" : " requests")
                << " cancelled\n";
  return kExitOk;
}

int RunList(Context& c) {
  int exit_code;
  if (!NoPositional(c, exit_code)) return exit_code;
  absl::StatusOr<v1::ListModelsResponse> response = c.client.ListModels();
  if (!response.ok()) return Fail(c, response.status());
  if (c.json) return PrintJson(c, *response);
  c.console.out << FormatModelTable(response->models());
  return kExitOk;
}

int RunGet(Context& c) {
  int exit_code;
  if (!OnePositional(c, "NAME", exit_code)) return exit_code;
  v1::GetModelRequest request;
  request.set_name(c.args.positional()[0]);
  if (std::optional<std::string> owner = c.args.Get("owner")) request.set_owner(*owner);
  absl::StatusOr<v1::ModelInfo> model = c.client.GetModel(request);
  if (!model.ok()) return Fail(c, model.status());
  if (c.json) return PrintJson(c, *model);
  c.console.out << FormatModelInfo(*model);
  return kExitOk;
}

int RunEstimate(Context& c) {
  int exit_code;
  if (!OnePositional(c, "SOURCE", exit_code)) return exit_code;
  const std::string& source = c.args.positional()[0];
  absl::StatusOr<v1::EstimateModelResponse> estimate =
      c.client.EstimateModel(SourceForDaemon(source));
  if (!estimate.ok()) return Fail(c, estimate.status());
  if (c.json) return PrintJson(c, *estimate);
  c.console.out << FormatEstimate(source, *estimate);
  return kExitOk;
}

}  // namespace df11::ctl
