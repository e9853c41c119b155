#include "codec/mapping_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>

namespace df11::codec {
namespace {

constexpr int kSlots = 4096;

// A slot is claimed through `used`; `begin` is published last (0: not in use), so the handler
// never sees a half-written range.
struct Slot {
  std::atomic<bool> used{false};
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> faulted{false};
};
Slot g_slots[kSlots];
uintptr_t g_page_mask = 0;
struct sigaction g_previous;

void OnSigbus(int signal, siginfo_t* info, void* context) {
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  // Only a read past a file's end (BUS_ADRERR, from the kernel) is absorbed; a SIGBUS sent by a
  // process (si_code <= 0) carries no address.
  const bool past_end = info->si_code == BUS_ADRERR;
  for (Slot& slot : past_end ? std::span<Slot>(g_slots) : std::span<Slot>()) {
    const uintptr_t begin = slot.begin.load(std::memory_order_acquire);
    if (begin == 0 || address < begin || address >= slot.end.load(std::memory_order_relaxed)) {
      continue;
    }
    // A zero page in place of the one past the file's end; the faulting read runs again on it.
    void* page = reinterpret_cast<void*>(address & g_page_mask);
    if (::mmap(page, ~g_page_mask + 1, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) !=
        MAP_FAILED) {
      slot.faulted.store(true, std::memory_order_relaxed);
      return;
    }
    break;
  }
  // Not a guarded mapping: what was there before.
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(signal, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(signal);
  } else {
    // The default action: a fault is re-run on return and gets it; a sent signal is raised again.
    ::signal(SIGBUS, SIG_DFL);
    if (info->si_code <= 0) ::raise(SIGBUS);
  }
}

}  // namespace

void InstallMappingGuard() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_page_mask = ~(static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE)) - 1);
    struct sigaction action = {};
    action.sa_sigaction = OnSigbus;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &g_previous);
  });
}

int GuardMapping(const void* addr, size_t size) {
  for (int i = 0; i < kSlots; ++i) {
    bool expected = false;
    if (!g_slots[i].used.compare_exchange_strong(expected, true)) continue;
    g_slots[i].faulted.store(false, std::memory_order_relaxed);
    g_slots[i].end.store(reinterpret_cast<uintptr_t>(addr) + size, std::memory_order_relaxed);
    g_slots[i].begin.store(reinterpret_cast<uintptr_t>(addr), std::memory_order_release);
    return i;
  }
  return -1;
}

void UnguardMapping(int slot) {
  if (slot < 0) return;
  g_slots[slot].begin.store(0, std::memory_order_release);
  g_slots[slot].used.store(false, std::memory_order_release);
}

bool MappingFaulted(int slot) {
  return slot >= 0 && g_slots[slot].faulted.load(std::memory_order_relaxed);
}

}  // namespace df11::codec
