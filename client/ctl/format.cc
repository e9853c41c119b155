#include "client/ctl/format.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client/cli/progress.h"
#include "google/protobuf/util/json_util.h"

namespace df11::ctl {
namespace {

using cli::HumanBytes;

std::string YesNo(bool b) { return b ? "yes" : "no"; }

std::string Devices(const v1::ModelInfo& model) {
  std::vector<std::string> names;
  for (const v1::DeviceBytes& b : model.bytes()) names.push_back(b.device());
  return names.empty() ? "-" : absl::StrJoin(names, ",");
}

// "key:   value" lines with the values aligned.
std::string KeyValues(const std::vector<std::pair<std::string, std::string>>& lines) {
  size_t width = 0;
  for (const auto& [key, value] : lines) width = std::max(width, key.size() + 1);
  std::string out;
  for (const auto& [key, value] : lines) {
    absl::StrAppend(&out, absl::StrFormat("%-*s  %s\n", static_cast<int>(width), key + ":", value));
  }
  return out;
}

std::string Plural(int64_t n, const std::string& word) {
  return absl::StrCat(n, " ", word, n == 1 ? "" : "s");
}

std::string Summary(const v1::NodeStatus& status) {
  return absl::StrCat("df11d", status.version().empty() ? "" : " ", status.version(), ": ",
                      Plural(status.models_size(), "model"), ", ", status.running_requests(),
                      " running, ", status.queued_requests(), " queued\n");
}

}  // namespace

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

std::string Table::Render() const {
  std::vector<size_t> widths;
  for (const Column& c : columns_) widths.push_back(c.title.size());
  for (const auto& row : rows_) {
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  auto append_line = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t i = 0; i < cells.size(); ++i) {
      if (i > 0) line += "  ";
      const int w = static_cast<int>(widths[i]);
      line += columns_[i].right ? absl::StrFormat("%*s", w, cells[i])
                                : absl::StrFormat("%-*s", w, cells[i]);
    }
    line.erase(line.find_last_not_of(' ') + 1);
    absl::StrAppend(&out, line, "\n");
  };
  std::vector<std::string> titles;
  for (const Column& c : columns_) titles.push_back(c.title);
  append_line(titles);
  for (const auto& row : rows_) append_line(row);
  return out;
}

std::string StateName(v1::ModelState state) {
  switch (state) {
    case v1::MODEL_STATE_LOADING:
      return "loading";
    case v1::MODEL_STATE_READY:
      return "ready";
    case v1::MODEL_STATE_UNLOADING:
      return "unloading";
    case v1::MODEL_STATE_FAILED:
      return "failed";
    case v1::MODEL_STATE_AVAILABLE:
      return "available";
    default:
      return "unknown";
  }
}

std::string PhaseName(v1::LoadPhase phase) {
  switch (phase) {
    case v1::LOAD_PHASE_RESOLVING:
      return "resolving";
    case v1::LOAD_PHASE_DOWNLOADING:
      return "downloading";
    case v1::LOAD_PHASE_PLACING:
      return "placing";
    case v1::LOAD_PHASE_DONE:
      return "done";
    default:
      return "unknown";
  }
}

std::string FinishReasonName(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_STOP:
      return "stop";
    case v1::FINISH_REASON_LENGTH:
      return "length";
    default:
      return "";
  }
}

std::string FormatSeconds(double seconds) {
  if (!(seconds > 0)) return "0s";
  return absl::FormatDuration(absl::Seconds(seconds));
}

v1::DeviceBytes SumBytes(const v1::ModelInfo& model) {
  v1::DeviceBytes sum;
  for (const v1::DeviceBytes& b : model.bytes()) {
    sum.set_df11_units(sum.df11_units() + b.df11_units());
    sum.set_passthrough(sum.passthrough() + b.passthrough());
    sum.set_kv_cache_in_use(sum.kv_cache_in_use() + b.kv_cache_in_use());
    sum.set_total(sum.total() + b.total());
  }
  return sum;
}

std::string FormatModelTable(const Models& models) {
  if (models.empty()) return "no models loaded\n";
  // The owner column appears once a tenant owns a model; without tenants every model is shared.
  const bool owners = std::any_of(models.begin(), models.end(), [](const v1::ModelInfo& m) {
    return !m.owner().empty() && m.owner() != "shared";
  });
  std::vector<Table::Column> columns = {{"NAME"},
                                        {"STATE"},
                                        {"ARCH"},
                                        {"FORMAT"},
                                        {"DEVICE"},
                                        {"UNITS", true},
                                        {"PASSTHROUGH", true},
                                        {"KV CACHE", true},
                                        {"TOTAL", true},
                                        {"PINNED"},
                                        {"REQUESTS", true},
                                        {"TOKENS", true}};
  if (owners) columns.insert(columns.begin() + 1, Table::Column{"OWNER"});
  Table table(columns);
  for (const v1::ModelInfo& m : models) {
    const v1::DeviceBytes sum = SumBytes(m);
    std::vector<std::string> row = {m.name(),
                                    StateName(m.state()),
                                    m.architecture().empty() ? "-" : m.architecture(),
                                    m.df11() ? "DF11" : "BF16",
                                    Devices(m),
                                    HumanBytes(sum.df11_units()),
                                    HumanBytes(sum.passthrough()),
                                    HumanBytes(sum.kv_cache_in_use()),
                                    HumanBytes(sum.total()),
                                    YesNo(m.pinned()),
                                    absl::StrCat(m.requests_served()),
                                    absl::StrCat(m.tokens_generated())};
    if (owners) row.insert(row.begin() + 1, m.owner().empty() ? "shared" : m.owner());
    table.AddRow(row);
  }
  return table.Render();
}

std::string FormatModelInfo(const v1::ModelInfo& m) {
  std::vector<std::pair<std::string, std::string>> lines = {{"name", m.name()},
                                                            {"state", StateName(m.state())}};
  if (!m.owner().empty()) lines.push_back({"owner", m.owner()});
  if (!m.failure_reason().empty()) lines.push_back({"failure", m.failure_reason()});
  lines.push_back({"source", m.source()});
  if (!m.resolved_revision().empty()) lines.push_back({"revision", m.resolved_revision()});
  lines.push_back({"architecture", m.architecture()});
  lines.push_back({"format", m.df11() ? "DF11" : "BF16"});
  lines.push_back({"context length", absl::StrCat(m.context_length())});
  lines.push_back({"pinned", YesNo(m.pinned())});
  lines.push_back({"keep alive", FormatSeconds(m.keep_alive_seconds())});
  lines.push_back({"last used", m.last_used_unix_ms() <= 0
                                    ? "never"
                                    : absl::FormatTime("%Y-%m-%d %H:%M:%S UTC",
                                                       absl::FromUnixMillis(m.last_used_unix_ms()),
                                                       absl::UTCTimeZone())});
  lines.push_back({"requests served", absl::StrCat(m.requests_served())});
  lines.push_back({"tokens generated", absl::StrCat(m.tokens_generated())});
  lines.push_back({"running", absl::StrCat(m.running_requests())});
  lines.push_back({"queued", absl::StrCat(m.queued_requests())});
  for (const v1::DeviceBytes& b : m.bytes()) {
    lines.push_back(
        {absl::StrCat("memory on ", b.device()),
         absl::StrCat(HumanBytes(b.total()), " (df11 units ", HumanBytes(b.df11_units()),
                      ", passthrough ", HumanBytes(b.passthrough()), ", kv cache ",
                      HumanBytes(b.kv_cache_in_use()), ")")});
  }
  return KeyValues(lines);
}

std::string FormatEstimate(const std::string& source, const v1::EstimateModelResponse& e) {
  std::vector<std::pair<std::string, std::string>> lines = {
      {"source", source},
      {"architecture", e.architecture()},
      {"format", e.df11() ? "DF11" : "BF16"},
      {"df11 units", HumanBytes(e.df11_units())},
      {"passthrough", HumanBytes(e.passthrough())},
      {"weights", HumanBytes(e.total())},
      {"kv cache per token", HumanBytes(e.kv_bytes_per_token())},
      {"context length", absl::StrCat(e.context_length())},
  };
  if (e.context_length() > 0) {
    lines.push_back(
        {"kv cache at full context",
         HumanBytes(e.kv_bytes_per_token() * static_cast<uint64_t>(e.context_length()))});
  }
  return KeyValues(lines);
}

std::string FormatNodeStatus(const v1::NodeStatus& status) {
  std::string out = Summary(status);
  Table devices({{"DEVICE"},
                 {"TOTAL", true},
                 {"BUDGET", true},
                 {"WEIGHTS", true},
                 {"SCRATCH", true},
                 {"KV CACHE", true},
                 {"KV FREE", true},
                 {"WORKSPACE", true},
                 {"USED", true},
                 {"FREE", true},
                 {"PLACEABLE", true}});
  std::string drivers;  // a line per GPU: its model and what its driver reports
  for (const v1::DeviceStatus& d : status.devices()) {
    // Only a GPU has a KV pool; the CPU allocates KV per request.
    const std::string kv_free = d.arena() > 0 ? HumanBytes(d.kv_pool_free()) : "-";
    devices.AddRow({d.device(), HumanBytes(d.total()), HumanBytes(d.budget()),
                    HumanBytes(d.weights()), HumanBytes(d.scratch()), HumanBytes(d.kv_cache()),
                    kv_free, HumanBytes(d.workspace()), HumanBytes(d.used()), HumanBytes(d.free()),
                    HumanBytes(d.placeable())});
    if (d.arena() > 0) {
      absl::StrAppend(&drivers, d.device(), ": ", d.description(),
                      "; driver: ", HumanBytes(d.driver_free()), " free of ", HumanBytes(d.total()),
                      " outside df11d's arena of ", HumanBytes(d.arena()), "\n");
    }
  }
  absl::StrAppend(&out, "\n", status.devices().empty() ? "no devices\n" : devices.Render(),
                  drivers);
  if (status.models().empty()) {
    absl::StrAppend(&out, "\nno models loaded\n");
    return out;
  }
  Table models({{"NAME"},
                {"STATE"},
                {"DEVICE"},
                {"MEMORY", true},
                {"PINNED"},
                {"RUNNING", true},
                {"QUEUED", true},
                {"REQUESTS", true},
                {"TOKENS", true}});
  for (const v1::ModelInfo& m : status.models()) {
    models.AddRow({m.name(), StateName(m.state()), Devices(m), HumanBytes(SumBytes(m).total()),
                   YesNo(m.pinned()), absl::StrCat(m.running_requests()),
                   absl::StrCat(m.queued_requests()), absl::StrCat(m.requests_served()),
                   absl::StrCat(m.tokens_generated())});
  }
  absl::StrAppend(&out, "\n", models.Render());
  return out;
}

std::string FormatTopFrame(const v1::NodeStatus& status, const v1::NodeStatus* previous) {
  std::string out = Summary(status);
  Table devices({{"DEVICE"},
                 {"USED", true},
                 {"BUDGET", true},
                 {"USE", true},
                 {"WEIGHTS", true},
                 {"KV CACHE", true},
                 {"FREE", true},
                 {"PLACEABLE", true}});
  for (const v1::DeviceStatus& d : status.devices()) {
    const std::string use =
        d.budget() == 0 ? "-" : absl::StrFormat("%.0f%%", 100.0 * d.used() / d.budget());
    devices.AddRow({d.device(), HumanBytes(d.used()), HumanBytes(d.budget()), use,
                    HumanBytes(d.weights()), HumanBytes(d.kv_cache()), HumanBytes(d.free()),
                    HumanBytes(d.placeable())});
  }
  absl::StrAppend(&out, "\n", devices.Render());
  Table models({{"MODEL"},
                {"STATE"},
                {"DEVICE"},
                {"MEMORY", true},
                {"KV CACHE", true},
                {"RUNNING", true},
                {"QUEUED", true},
                {"REQ/S", true},
                {"TOK/S", true},
                {"REQUESTS", true},
                {"TOKENS", true}});
  const double seconds =
      previous == nullptr ? 0 : (status.time_unix_ms() - previous->time_unix_ms()) / 1e3;
  for (const v1::ModelInfo& m : status.models()) {
    const v1::DeviceBytes sum = SumBytes(m);
    std::string requests_per_second = "-", tokens_per_second = "-";
    if (seconds > 0) {
      for (const v1::ModelInfo& before : previous->models()) {
        // Counters restart when a model is unloaded and loaded again.
        if (before.name() != m.name() || before.requests_served() > m.requests_served() ||
            before.tokens_generated() > m.tokens_generated()) {
          continue;
        }
        requests_per_second = absl::StrFormat(
            "%.1f", static_cast<double>(m.requests_served() - before.requests_served()) / seconds);
        tokens_per_second = absl::StrFormat(
            "%.1f", static_cast<double>(m.tokens_generated() - before.tokens_generated()) / seconds);
      }
    }
    models.AddRow({m.name(), StateName(m.state()), Devices(m), HumanBytes(sum.total()),
                   HumanBytes(sum.kv_cache_in_use()), absl::StrCat(m.running_requests()),
                   absl::StrCat(m.queued_requests()), requests_per_second, tokens_per_second,
                   absl::StrCat(m.requests_served()), absl::StrCat(m.tokens_generated())});
  }
  absl::StrAppend(&out, "\n", models.Render());
  return out;
}

absl::StatusOr<std::string> MessageToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  // Scripts can rely on every field being there, zeros and empty lists included.
  options.always_print_primitive_fields = true;
  std::string json;
  const auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat("cannot print ", message.GetTypeName(),
                                            " as JSON: ", std::string(status.message())));
  }
  return json;
}

}  // namespace df11::ctl
