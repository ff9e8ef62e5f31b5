#include "preempt/signals.hpp"

#include <signal.h>

#include <atomic>
#include <cstring>

#include "common/error.hpp"

namespace hpctrain::preempt {
namespace {

std::atomic<int> g_pending{0};
static_assert(std::atomic<int>::is_always_lock_free, "the handler needs a lock-free flag");

std::vector<int>& installed() {
  static std::vector<int> signals;
  return signals;
}

extern "C" void on_stop_signal(int signal) { g_pending.store(signal, std::memory_order_relaxed); }

}  // namespace

int signal_number(spec::Signal signal) {
  switch (signal) {
    case spec::Signal::kUsr1:
      return SIGUSR1;
    case spec::Signal::kUsr2:
      return SIGUSR2;
    case spec::Signal::kTerm:
      return SIGTERM;
    case spec::Signal::kInt:
      return SIGINT;
    case spec::Signal::kHup:
      return SIGHUP;
    case spec::Signal::kUrg:
      return SIGURG;
    case spec::Signal::kXcpu:
      return SIGXCPU;
  }
  return SIGUSR2;
}

void install_stop_signals(const std::vector<int>& signals) {
  for (const int s : signals) {
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    if (::sigaction(s, &action, nullptr) != 0) {
      HPCTRAIN_THROW(rt::Error, std::string("cannot install a handler for signal ") + strsignal(s) +
                                    ": " + std::strerror(errno));
    }
    installed().push_back(s);
  }
}

void verify_stop_signals() {
  for (const int s : installed()) {
    struct sigaction current {};
    ::sigaction(s, nullptr, &current);
    if ((current.sa_flags & SA_SIGINFO) || current.sa_handler != on_stop_signal) {
      HPCTRAIN_THROW(rt::Error, std::string("the handler for ") + strsignal(s) +
                                    " was replaced after hpctrain installed it (by the "
                                    "communication backend?); preemption would be missed");
    }
  }
}

int pending_stop_signal() { return g_pending.load(std::memory_order_relaxed); }

}  // namespace hpctrain::preempt
