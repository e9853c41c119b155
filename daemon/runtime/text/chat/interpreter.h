// Runs a parsed chat template (ast.h) against a context of variables, with Jinja's semantics:
//
//   - Variables resolve from the innermost scope out: a for-loop iteration's scope (its targets,
//     `loop`, and whatever it sets), the template's top-level `set`s, the render context
//     (messages, tools, ...), then the globals of builtins.h. A `set` inside a loop body is local
//     to that iteration, as in Jinja; namespace() objects are how state leaves a loop.
//   - `loop` has index, index0, revindex, revindex0, first, last, length, previtem, nextitem,
//     depth, depth0 and cycle(); `for ... if cond` filters before counting; `{% else %}` runs
//     when nothing was iterated; break and continue act on the innermost loop.
//   - {{ x }} prints str(x): Python's repr for lists, dicts, None, True and floats, "" for an
//     Undefined. `a if c` without else is an Undefined when c is false.
//   - raise_exception(msg) stops rendering with kInvalidArgument whose message is exactly msg.
//
// Every other error carries "chat template line N: " and keeps the code from value.h /
// builtins.h; the limits of limits.h are kResourceExhausted.
#ifndef DF11_DAEMON_RUNTIME_TEXT_CHAT_INTERPRETER_H_
#define DF11_DAEMON_RUNTIME_TEXT_CHAT_INTERPRETER_H_

#include <string>

#include "absl/status/statusor.h"
#include "daemon/runtime/text/chat/ast.h"
#include "daemon/runtime/text/chat/limits.h"
#include "daemon/runtime/text/chat/value.h"

namespace df11::runtime::chat {

// Folds constant subexpressions of `program` as jinja2's optimizer does when it compiles a
// template (Node.as_const, kept when the value has a safe repr; the whole expression of a {{ }}
// is folded whatever its value). Output is the same as unfolded evaluation, except where Jinja's
// own folding changes it: a folded slice goes through getitem, so `{{ 1[::2] }}` prints "" where
// a slice evaluated at render time raises. Call once, after Parse.
void FoldConstants(Program& program);

// The text `program` renders to with the variables in `context`. Thread-safe for concurrent
// calls on one Program (it is only read).
absl::StatusOr<std::string> RenderProgram(const Program& program, const Dict& context,
                                          const RenderLimits& limits);

}  // namespace df11::runtime::chat

#endif  // DF11_DAEMON_RUNTIME_TEXT_CHAT_INTERPRETER_H_
