// ThreadSanitizer and Debian's abseil: Debian's libabsl_synchronization is
// not instrumented, and absl::Mutex waits on futexes, so TSan sees none of
// the ordering an absl::Mutex, CondVar or Notification gives, neither in
// remat's code nor inside gRPC (whose own mutexes are absl::Mutex), and
// reports every access under such a mutex as a race. Linked only into
// --config=tsan builds: these definitions take the place of the library's
// (the executable's symbols come first in the dynamic lookup), call the
// library's own through dlsym(RTLD_NEXT), and tell TSan what happened:
// a release on the mutex's address before it is given up, an acquire after
// it is taken. A Condition is evaluated inside the library, by the waiting
// thread or by whichever thread unlocks, while the mutex is truly held:
// each evaluation is wrapped the same way (acquire, evaluate, release).
#if defined(__SANITIZE_THREAD__)

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

extern "C" {
void __tsan_acquire(void* addr);
void __tsan_release(void* addr);
}

namespace {

// The library's definition of `mangled` (Debian 12's abseil, inline
// namespace debian3).
template <typename F>
F Real(const char* mangled) {
  void* f = dlsym(RTLD_NEXT, mangled);
  if (f == nullptr) {
    std::fprintf(stderr, "tsan_absl_sync: %s not found: %s\n", mangled,
                 dlerror());
    std::abort();
  }
  return reinterpret_cast<F>(f);
}

#define REAL(type, mangled) \
  static const auto real = Real<type>(mangled)

void Acquired(const void* mu) { __tsan_acquire(const_cast<void*>(mu)); }
void Releasing(const void* mu) { __tsan_release(const_cast<void*>(mu)); }

// A Condition that tells TSan the mutex is held while `cond` is evaluated.
struct HeldCondition {
  const absl::Condition* cond;
  void* mu;
  static bool Eval(HeldCondition* c) {
    __tsan_acquire(c->mu);
    const bool met = c->cond->Eval();
    __tsan_release(c->mu);
    return met;
  }
};

}  // namespace

// The Condition to pass on: `cond` wrapped for mutex `mu`.
#define HELD(cond)                                  \
  HeldCondition held{&(cond), this};                \
  const Condition wrapped(&HeldCondition::Eval, &held)

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex4LockEv");
  real(this);
  Acquired(this);
}

void Mutex::ReaderLock() {
  REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex10ReaderLockEv");
  real(this);
  Acquired(this);
}

bool Mutex::TryLock() {
  REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex7TryLockEv");
  const bool locked = real(this);
  if (locked) Acquired(this);
  return locked;
}

bool Mutex::ReaderTryLock() {
  REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex13ReaderTryLockEv");
  const bool locked = real(this);
  if (locked) Acquired(this);
  return locked;
}

void Mutex::Unlock() {
  REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex6UnlockEv");
  Releasing(this);
  real(this);
}

void Mutex::ReaderUnlock() {
  REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex12ReaderUnlockEv");
  Releasing(this);
  real(this);
}

void Mutex::LockWhen(const Condition& cond) {
  REAL(void (*)(Mutex*, const Condition&),
       "_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE");
  HELD(cond);
  real(this, wrapped);
  Acquired(this);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  REAL(void (*)(Mutex*, const Condition&),
       "_ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE");
  HELD(cond);
  real(this, wrapped);
  Acquired(this);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  REAL(bool (*)(Mutex*, const Condition&, absl::Duration),
       "_ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_"
       "8DurationE");
  HELD(cond);
  const bool met = real(this, wrapped, timeout);
  Acquired(this);  // held either way
  return met;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, absl::Time deadline) {
  REAL(bool (*)(Mutex*, const Condition&, absl::Time),
       "_ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_"
       "4TimeE");
  HELD(cond);
  const bool met = real(this, wrapped, deadline);
  Acquired(this);
  return met;
}

void Mutex::Await(const Condition& cond) {
  REAL(void (*)(Mutex*, const Condition&),
       "_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE");
  HELD(cond);
  Releasing(this);
  real(this, wrapped);
  Acquired(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
  REAL(bool (*)(Mutex*, const Condition&, absl::Duration),
       "_ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_"
       "8DurationE");
  HELD(cond);
  Releasing(this);
  const bool met = real(this, wrapped, timeout);
  Acquired(this);
  return met;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, absl::Time deadline) {
  REAL(bool (*)(Mutex*, const Condition&, absl::Time),
       "_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_"
       "4TimeE");
  HELD(cond);
  Releasing(this);
  const bool met = real(this, wrapped, deadline);
  Acquired(this);
  return met;
}

void CondVar::Wait(Mutex* mu) {
  REAL(void (*)(CondVar*, Mutex*), "_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE");
  Releasing(mu);
  real(this, mu);
  Acquired(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
  REAL(bool (*)(CondVar*, Mutex*, absl::Duration),
       "_ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  Releasing(mu);
  const bool timed_out = real(this, mu, timeout);
  Acquired(mu);
  return timed_out;
}

bool CondVar::WaitWithDeadline(Mutex* mu, absl::Time deadline) {
  REAL(bool (*)(CondVar*, Mutex*, absl::Time),
       "_ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  Releasing(mu);
  const bool timed_out = real(this, mu, deadline);
  Acquired(mu);
  return timed_out;
}

// HasBeenNotified is inline (an acquire load of notified_yet_ in the
// caller's code), so the release goes on that flag's address too.
void Notification::Notify() {
  REAL(void (*)(Notification*), "_ZN4absl7debian312Notification6NotifyEv");
  Releasing(this);
  Releasing(&notified_yet_);
  real(this);
}

void Notification::WaitForNotification() const {
  REAL(void (*)(const Notification*),
       "_ZNK4absl7debian312Notification19WaitForNotificationEv");
  real(this);
  Acquired(this);
}

bool Notification::WaitForNotificationWithTimeout(
    absl::Duration timeout) const {
  REAL(bool (*)(const Notification*, absl::Duration),
       "_ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_"
       "8DurationE");
  const bool notified = real(this, timeout);
  if (notified) Acquired(this);
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(absl::Time deadline) const {
  REAL(bool (*)(const Notification*, absl::Time),
       "_ZNK4absl7debian312Notification31WaitForNotificationWithDeadlineENS0_"
       "4TimeE");
  const bool notified = real(this, deadline);
  if (notified) Acquired(this);
  return notified;
}

ABSL_NAMESPACE_END
}  // namespace absl

// Reports TSan is told to drop, in every --config=tsan binary (tests and the
// rematd they start alike, with no file to find at run time). Each entry is
// a false positive in a Debian library, never in remat's code. TSan sees
// nothing of what an uninstrumented library does except the calls it makes
// to intercepted functions (malloc, free, memcpy, sendmsg, recvmsg, close);
// where the library orders those calls with its own atomics, TSan reports
// them as races. A called_from_lib entry makes TSan ignore the memory
// accesses of intercepted calls made from inside that library only (matched
// by the library's file name, so it holds where the library's own frames
// have no symbol); remat's accesses, the messages it serializes into gRPC's
// buffers included, are still checked, and synchronisation is still seen.
// * libabsl_graphcycles_internal: abseil's deadlock-detection graph, which
//   every absl::Mutex (gRPC's included) updates under abseil's own SpinLock;
//   that lock's atomics live in uninstrumented code, so TSan sees only the
//   graph's memmove calls, unordered.
// * libgrpc, libgpr, libupb (gRPC core, its support library and its copy of
//   upb): gRPC hands buffers, calls and closures between its threads through
//   reference counts, lock-free queues (combiner, work serializer, ExecCtx)
//   and its event engine, all atomics in uninstrumented code: TSan sees a
//   slice allocated by one thread and freed, parsed or sent (sendmsg) by
//   another, a socket closed after another thread's sendmsg on it, unordered.
// * libabsl_status, libabsl_cord, libabsl_cord_internal: copies of an
//   absl::Status (and the Cords of its payloads) share one heap
//   representation, freed by whichever copy drops the last reference (an
//   atomic decrement inside the library); TSan sees the delete but not the
//   decrement that orders it after the other copies' reads (StrCat of the
//   message, payload compares). A Cord's tree nodes are allocated and freed
//   in libabsl_cord_internal (a Cord built on a gRPC thread, dropped by
//   rematd's serving queue).
// * race:grpc::internal::CallOpSet (the one entry that is not by library):
//   gRPC++'s header templates, compiled into remat's binaries. An operation
//   set is filled by the thread that starts it (FillOps, e.g. a worker
//   answering a call) and finalized by the thread that takes its tag off the
//   completion queue (FinalizeResult, rematd's I/O thread, or a client's);
//   the completion queue in uninstrumented gRPC core orders the two, and
//   TSan cannot see it. Only races whose stacks pass through CallOpSet are
//   dropped.
extern "C" const char* __tsan_default_suppressions() {
  return "called_from_lib:libabsl_graphcycles_internal.so\n"
         "called_from_lib:libgrpc.so\n"
         "called_from_lib:libgpr.so\n"
         "called_from_lib:libupb.so\n"
         "called_from_lib:libabsl_status.so\n"
         "called_from_lib:libabsl_cord.so\n"
         "called_from_lib:libabsl_cord_internal.so\n"
         "race:grpc::internal::CallOpSet\n";
}

#endif  // __SANITIZE_THREAD__
