// ThreadSanitizer builds only: tells TSan about the happens-before edges of Abseil's Mutex,
// CondVar and Notification. Debian's Abseil is not built with TSan, so its locks are invisible to
// it and every access they guard would be reported as a race. These definitions interpose on the
// library's (the executable's symbols come first), call the library's own through dlsym, and add
// __tsan_acquire / __tsan_release around them, as an instrumented Abseil does itself.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();

namespace {

#define DF11_STRINGIZE2(x) #x
#define DF11_STRINGIZE(x) DF11_STRINGIZE2(x)

// The library's definition of `absl::<inline namespace>::<rest>`, `rest` being the mangled name
// after the namespaces (e.g. "5Mutex4LockEv"); `constant` marks a const member function.
void* Real(const char* rest, bool constant = false) {
  const std::string ns = DF11_STRINGIZE(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name =
      std::string(constant ? "_ZNK4absl" : "_ZN4absl") + std::to_string(ns.size()) + ns + rest;
  void* f = dlsym(RTLD_NEXT, name.c_str());
  if (f == nullptr) {
    std::fprintf(stderr, "TSan annotations: %s not found in Abseil\n", name.c_str());
    std::abort();
  }
  return f;
}

// The library's member function as a function of `this` and the arguments.
template <typename F>
F RealAs(const char* rest, bool constant = false) {
  return reinterpret_cast<F>(Real(rest, constant));
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  static const auto real = RealAs<void (*)(Mutex*)>("5Mutex4LockEv");
  real(this);
  __tsan_acquire(this);
}
void Mutex::ReaderLock() {
  static const auto real = RealAs<void (*)(Mutex*)>("5Mutex10ReaderLockEv");
  real(this);
  __tsan_acquire(this);
}
bool Mutex::TryLock() {
  static const auto real = RealAs<bool (*)(Mutex*)>("5Mutex7TryLockEv");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}
bool Mutex::ReaderTryLock() {
  static const auto real = RealAs<bool (*)(Mutex*)>("5Mutex13ReaderTryLockEv");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}
void Mutex::Unlock() {
  static const auto real = RealAs<void (*)(Mutex*)>("5Mutex6UnlockEv");
  __tsan_release(this);
  real(this);
}
void Mutex::ReaderUnlock() {
  static const auto real = RealAs<void (*)(Mutex*)>("5Mutex12ReaderUnlockEv");
  __tsan_release(this);
  real(this);
}
void Mutex::LockWhen(const Condition& cond) {
  static const auto real =
      RealAs<void (*)(Mutex*, const Condition&)>("5Mutex8LockWhenERKNS0_9ConditionE");
  real(this, cond);
  __tsan_acquire(this);
}
bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  static const auto real = RealAs<bool (*)(Mutex*, const Condition&, Duration)>(
      "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  const bool met = real(this, cond, timeout);
  __tsan_acquire(this);
  return met;
}
bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  static const auto real = RealAs<bool (*)(Mutex*, const Condition&, Time)>(
      "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  const bool met = real(this, cond, deadline);
  __tsan_acquire(this);
  return met;
}
// Abseil evaluates a waiter's Condition on whichever thread releases the mutex, under the
// library's own synchronization; the reads of a condition are of state its mutex guards (clang's
// thread-safety analysis checks that), so TSan does not record them.
bool Condition::Eval() const {
  static const auto real = RealAs<bool (*)(const Condition*)>("9Condition4EvalEv", true);
  __tsan_ignore_thread_begin();
  const bool met = real(this);
  __tsan_ignore_thread_end();
  return met;
}

// Await releases the mutex while it waits and holds it again when it returns.
void Mutex::Await(const Condition& cond) {
  static const auto real =
      RealAs<void (*)(Mutex*, const Condition&)>("5Mutex5AwaitERKNS0_9ConditionE");
  __tsan_release(this);
  real(this, cond);
  __tsan_acquire(this);
}
bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  static const auto real = RealAs<bool (*)(Mutex*, const Condition&, Duration)>(
      "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  __tsan_release(this);
  const bool met = real(this, cond, timeout);
  __tsan_acquire(this);
  return met;
}
bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  static const auto real = RealAs<bool (*)(Mutex*, const Condition&, Time)>(
      "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_release(this);
  const bool met = real(this, cond, deadline);
  __tsan_acquire(this);
  return met;
}

// A wait releases `mu` and holds it again when it returns.
void CondVar::Wait(Mutex* mu) {
  static const auto real = RealAs<void (*)(CondVar*, Mutex*)>("7CondVar4WaitEPNS0_5MutexE");
  __tsan_release(mu);
  real(this, mu);
  __tsan_acquire(mu);
}
bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  static const auto real = RealAs<bool (*)(CondVar*, Mutex*, Duration)>(
      "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  __tsan_release(mu);
  const bool timed_out = real(this, mu, timeout);
  __tsan_acquire(mu);
  return timed_out;
}
bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  static const auto real =
      RealAs<bool (*)(CondVar*, Mutex*, Time)>("7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  __tsan_release(mu);
  const bool timed_out = real(this, mu, deadline);
  __tsan_acquire(mu);
  return timed_out;
}

void Notification::Notify() {
  static const auto real = RealAs<void (*)(Notification*)>("12Notification6NotifyEv");
  __tsan_release(this);
  real(this);
}
void Notification::WaitForNotification() const {
  static const auto real =
      RealAs<void (*)(const Notification*)>("12Notification19WaitForNotificationEv", true);
  real(this);
  __tsan_acquire(const_cast<Notification*>(this));
}
bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  static const auto real = RealAs<bool (*)(const Notification*, Duration)>(
      "12Notification30WaitForNotificationWithTimeoutENS0_8DurationE", true);
  const bool notified = real(this, timeout);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}
bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  static const auto real = RealAs<bool (*)(const Notification*, Time)>(
      "12Notification31WaitForNotificationWithDeadlineENS0_4TimeE", true);
  const bool notified = real(this, deadline);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

ABSL_NAMESPACE_END
}  // namespace absl
