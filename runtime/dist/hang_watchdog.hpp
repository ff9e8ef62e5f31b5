// The hang watchdog (docs/resilience.md "Hangs") on the heartbeat's store connection and beats
// (dist/heartbeat.hpp drives it once a beat): every rank publishes where its training stands
// (dist/progress.hpp); rank 0 reads every rank's, and when some rank has made no progress past
// its limit it forms the verdict (dist/hang_verdict.hpp), has it recorded (on_hang) and returns it
// for the heartbeat to post. carry_out() ends a rank on a verdict: the line on stderr, the
// threads' stacks of a rank named (dist/stack_dump.hpp), then hang_exit_status, once the ranks
// named have printed theirs (srun would end them with the first rank to exit otherwise); nobody
// waits for the stacks of a silent rank, which cannot print them.
// Thread safety: publish(), watch() and carry_out() from the heartbeat's beat thread; ending()
// from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "dist/hang_verdict.hpp"
#include "dist/kv_store.hpp"

namespace hpctrain::dist {

class HangWatchdog {
 public:
  // hosts: every rank's, for the messages ("" or missing: unknown); beat_interval: the
  // heartbeat's. Keys go under "hb/".
  HangWatchdog(HangOptions options, int rank, int world_size, std::vector<std::string> hosts,
               std::chrono::milliseconds beat_interval);

  // A rank other than 0, each beat: its progress, for rank 0 to read.
  void publish(KvStore& store) const;
  // Leaving in order: this rank's progress as finishing, which the watch passes over.
  void publish_finishing(KvStore& store) const;

  // Rank 0, each beat: reads every rank's progress (one multi_get for those that published it);
  // the verdict when one is due, after on_hang has recorded it (an exception from on_hang is
  // reported on stderr and otherwise ignored). `beat_ages`: at `now`, since each rank's beat
  // counter last moved (the heartbeat's).
  std::optional<HangVerdict> watch(KvStore& store, Clock::time_point now,
                                   const std::vector<std::chrono::milliseconds>& beat_ages);

  // Ends this rank for `verdict`: prints `why`, marks that this rank has it, prints its stacks
  // when it is named (and dump_stacks), then waits for the named ranks' stacks (up to
  // kStackDumpDeadline + 10 s); rank 0, which serves the store, first waits (5 beats at most)
  // until every rank not silent has the verdict. A store gone meanwhile ends the waiting.
  [[noreturn]] void carry_out(KvStore& store, const std::string& why, const HangVerdict& verdict);

  // A verdict is being carried out: the store going quiet meanwhile (rank 0 has exited) is
  // expected, not a lost store.
  bool ending() const { return ending_.load(); }

 private:
  void read_progress(KvStore& store, Clock::time_point now);
  void wait_for_the_others(KvStore& store, const HangVerdict& verdict) const;

  HangOptions o_;
  int rank_ = 0, world_size_ = 1;
  std::vector<std::string> hosts_;
  std::chrono::milliseconds interval_;
  ProgressWatch progress_;
  // Rank 0's reads: a rank's progress key is looked for alone until it exists (multi_get would
  // wait for a key that is not there), then read with the others in one multi_get.
  std::vector<int> where_ranks_;  // ranks > 0 whose progress key exists
  std::vector<char> where_known_;
  std::atomic<bool> ending_{false};
};

}  // namespace hpctrain::dist
