#include "daemon/runtime/text/tokenizer/normalizer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "codec/base/status_macros.h"
#include "daemon/runtime/text/tokenizer/json_fields.h"
#include "daemon/runtime/text/tokenizer/text_util.h"

namespace df11::runtime::tokenizer_internal {

absl::StatusOr<Normalizer> Normalizer::FromJson(const Json* normalizer) {
  Normalizer n;
  if (normalizer != nullptr) DF11_RETURN_IF_ERROR(n.AddStep(*normalizer, "normalizer", false));
  return n;
}

absl::Status Normalizer::AddStep(const Json& v, const std::string& path, bool nested) {
  DF11_ASSIGN_OR_RETURN(const std::string type, ComponentType(v, path));
  if (type == "NFC") {
    // NFC is idempotent: a run of NFCs is one.
    if (steps_.empty() || steps_.back().kind != Kind::kNfc)
      steps_.push_back(Step{Kind::kNfc, "", ""});
    return absl::OkStatus();
  }
  if (type == "Replace") {
    DF11_ASSIGN_OR_RETURN(const StringReplace r, ParseStringReplace(v, path, kSupported));
    steps_.push_back(Step{Kind::kReplace, r.pattern, r.content});
    return absl::OkStatus();
  }
  if (type == "Prepend") {
    Step step;
    step.kind = Kind::kPrepend;
    DF11_ASSIGN_OR_RETURN(step.content, RequiredString(v, "prepend", path));
    steps_.push_back(std::move(step));
    return absl::OkStatus();
  }
  if (type == "Sequence" && !nested) {
    const Json* list = FindField(v, "normalizers");
    if (list == nullptr || !list->is_array()) {
      return Malformed(absl::StrCat(path, ".normalizers"), "expected an array");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      DF11_RETURN_IF_ERROR(AddStep((*list)[i], absl::StrCat(path, ".normalizers[", i, "]"), true));
    }
    return absl::OkStatus();
  }
  return Unsupported(path, absl::StrCat("type \"", type, "\""), kSupported);
}

std::string Normalizer::Normalize(std::string_view text) const {
  std::string out(text);
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::kNfc:
        out = Nfc(out);
        break;
      case Kind::kReplace:
        // A String pattern is an escaped literal to Oniguruma: leftmost, non-overlapping matches.
        out = ReplaceAll(out, step.pattern, step.content);
        break;
      case Kind::kPrepend:
        if (!out.empty()) out.insert(0, step.content);
        break;
    }
  }
  return out;
}

}  // namespace df11::runtime::tokenizer_internal
