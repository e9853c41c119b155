// Status propagation macros. Abseil 20220623 ships no status_macros.h, so df11d keeps its own.
//
//   DF11_RETURN_IF_ERROR(WriteHeader(out));
//   DF11_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(path));
#ifndef DF11_CODEC_BASE_STATUS_MACROS_H_
#define DF11_CODEC_BASE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define DF11_STATUS_CONCAT_INNER_(a, b) a##b
#define DF11_STATUS_CONCAT_(a, b) DF11_STATUS_CONCAT_INNER_(a, b)

// Returns the status of `expr` from the enclosing function when it is not OK.
#define DF11_RETURN_IF_ERROR(expr)                      \
  do {                                                  \
    ::absl::Status df11_status_ = (expr);               \
    if (!df11_status_.ok()) return df11_status_;        \
  } while (0)

// Evaluates `rexpr` (an absl::StatusOr<T>); on error returns its status, otherwise moves the value
// into the declaration or assignment `lhs`.
#define DF11_ASSIGN_OR_RETURN(lhs, rexpr) \
  DF11_ASSIGN_OR_RETURN_IMPL_(DF11_STATUS_CONCAT_(df11_statusor_, __LINE__), lhs, rexpr)

#define DF11_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // DF11_CODEC_BASE_STATUS_MACROS_H_
