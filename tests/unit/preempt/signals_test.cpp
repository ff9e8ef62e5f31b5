// Stop signals: the handler only records the signal; a handler replaced by a library is detected;
// every preemption.signal value maps to its signal.
#include "preempt/signals.hpp"

#include <gtest/gtest.h>
#include <signal.h>

#include <set>

#include "common/error.hpp"

namespace hpctrain::preempt {
namespace {

TEST(Signals, HandlerOnlyRecordsAndReplacementIsDetected) {
  install_stop_signals({SIGUSR2});
  EXPECT_NO_THROW(verify_stop_signals());
  ::raise(SIGUSR2);
  EXPECT_EQ(pending_stop_signal(), SIGUSR2);
  // A library replacing the handler is caught.
  auto previous = ::signal(SIGUSR2, SIG_IGN);
  EXPECT_THROW(verify_stop_signals(), rt::Error);
  ::signal(SIGUSR2, previous);
  EXPECT_NO_THROW(verify_stop_signals());
}

TEST(Signals, EverySpecSignalMapsToItsNumber) {
  EXPECT_EQ(signal_number(spec::Signal::kUsr1), SIGUSR1);
  EXPECT_EQ(signal_number(spec::Signal::kUsr2), SIGUSR2);
  EXPECT_EQ(signal_number(spec::Signal::kTerm), SIGTERM);
  EXPECT_EQ(signal_number(spec::Signal::kXcpu), SIGXCPU);
  std::set<int> distinct;
  for (size_t i = 0; i < spec::Names<spec::Signal>::kValues.size(); ++i) {
    distinct.insert(signal_number(static_cast<spec::Signal>(i)));
  }
  EXPECT_EQ(distinct.size(), spec::Names<spec::Signal>::kValues.size());
}

}  // namespace
}  // namespace hpctrain::preempt
