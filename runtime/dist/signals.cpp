#include "dist/signals.hpp"

#include <signal.h>

#include <atomic>
#include <cstring>
#include <map>
#include <stdexcept>

#include "common/error.hpp"

namespace hpctrain::dist {
namespace {

std::atomic<int> g_pending{0};
static_assert(std::atomic<int>::is_always_lock_free, "the handler needs a lock-free flag");

std::vector<int>& installed() {
  static std::vector<int> signals;
  return signals;
}

extern "C" void on_stop_signal(int signal) { g_pending.store(signal, std::memory_order_relaxed); }

}  // namespace

int signal_number(const std::string& name) {
  static const std::map<std::string, int> kSignals = {
      {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"INT", SIGINT},
      {"HUP", SIGHUP},   {"URG", SIGURG},   {"XCPU", SIGXCPU}};
  auto it = kSignals.find(name);
  if (it == kSignals.end()) throw std::invalid_argument("unknown signal name '" + name + "'");
  return it->second;
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

}  // namespace hpctrain::dist
