// Python's arithmetic operators on chat-template values: + - * / // % ** and unary - +, with
// Python's results (true division gives a float, // and % floor toward -inf, int ** negative
// int is a float, str + str, list + list, str * int, ...). Integers are int64: a result beyond
// it is kFailedPrecondition (Python's are unbounded). Type errors are kInvalidArgument with
// Python's TypeError / ZeroDivisionError text; an Undefined operand raises its own error.
#ifndef DF11_DAEMON_RUNTIME_TEXT_CHAT_OPERATORS_H_
#define DF11_DAEMON_RUNTIME_TEXT_CHAT_OPERATORS_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "daemon/runtime/text/chat/limits.h"
#include "daemon/runtime/text/chat/value.h"

namespace df11::runtime::chat {

// `op` is one of + - * / // % **.
absl::StatusOr<Value> BinaryOp(std::string_view op, const Value& a, const Value& b, Budget& budget);
// -v, or +v when `negate` is false.
absl::StatusOr<Value> UnaryOp(bool negate, const Value& v);

}  // namespace df11::runtime::chat

#endif  // DF11_DAEMON_RUNTIME_TEXT_CHAT_OPERATORS_H_
