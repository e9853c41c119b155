// How df11ctl shows the daemon's messages: aligned tables and key/value blocks for people, and
// the proto messages as JSON for scripts. Pure functions of their inputs (no clock, no terminal),
// so the tests can compare whole outputs.
//
//   std::cout << FormatModelTable(list.models());
//   std::cout << MessageToJson(status).value() << "\n";
#ifndef DF11_CLIENT_CTL_FORMAT_H_
#define DF11_CLIENT_CTL_FORMAT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "df11/v1/model_host.pb.h"
#include "google/protobuf/message.h"
#include "google/protobuf/repeated_ptr_field.h"

namespace df11::ctl {

namespace v1 = ::df11::v1;
using Models = google::protobuf::RepeatedPtrField<v1::ModelInfo>;

// Columns padded to their widest cell, two spaces apart, no trailing blanks; each line ends with
// "\n". Right-aligned columns suit numbers.
class Table {
 public:
  struct Column {
    std::string title;
    bool right = false;
  };
  explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}
  // `cells` must have one entry per column.
  void AddRow(std::vector<std::string> cells);
  std::string Render() const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// "ready", "loading", ...; "unknown" for UNSPECIFIED or a value this build does not know.
std::string StateName(v1::ModelState state);
// "resolving", "downloading", "placing", "done"; "unknown" otherwise.
std::string PhaseName(v1::LoadPhase phase);
// "stop", "length"; "" for UNSPECIFIED.
std::string FinishReasonName(v1::FinishReason reason);
// Seconds as "250ms", "30s", "5m", "1h30m", "0s".
std::string FormatSeconds(double seconds);

// The per-kind byte counts of a model summed over its devices.
v1::DeviceBytes SumBytes(const v1::ModelInfo& model);

// `list`: one row per model; "no models loaded\n" for none.
std::string FormatModelTable(const Models& models);
// `get`: every field of one model, one per line.
std::string FormatModelInfo(const v1::ModelInfo& model);
// `estimate`: what loading `source` would take.
std::string FormatEstimate(const std::string& source, const v1::EstimateModelResponse& estimate);
// `status`: a summary line, the devices' memory by kind, then the models.
std::string FormatNodeStatus(const v1::NodeStatus& status);
// `top`: one frame: memory and load per device and per model. With the frame before it
// (`previous`, may be null), each model's requests and tokens per second between the two, by the
// daemon's clock; "-" without one, or for a model that was not in it.
std::string FormatTopFrame(const v1::NodeStatus& status, const v1::NodeStatus* previous);

// The message as one line of JSON with the proto field names, every field present.
// kInternal if protobuf cannot print it.
absl::StatusOr<std::string> MessageToJson(const google::protobuf::Message& message);

}  // namespace df11::ctl

#endif  // DF11_CLIENT_CTL_FORMAT_H_
