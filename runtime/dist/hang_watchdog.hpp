// The hang watchdog (docs/resilience.md "Hangs") on the heartbeat's store connection and beats
// (dist/heartbeat.hpp drives it once a beat): every rank's beat carries where its training stands
// (dist/progress.hpp) to rank 0 in its node's record; rank 0 judges them, and when some rank has
// made no progress past its limit it forms the verdict (dist/hang_verdict.hpp), has it recorded
// (on_hang) and returns it for the heartbeat to post. carry_out() ends a rank on a verdict: the
// line on stderr, the threads' stacks of a rank named (dist/stack_dump.hpp), then hang_exit_status,
// once the ranks named have printed theirs (srun would end them with the first rank to exit
// otherwise); nobody waits for the stacks of a silent rank, which cannot print them. Thread safety:
// watch_reported() and carry_out() from the heartbeat's beat thread; ending() from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
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
  HangWatchdog(HangOptions options, int rank, int world_size,
               std::shared_ptr<const std::vector<std::string>> hosts,
               std::chrono::milliseconds beat_interval);

  // Rank 0, each beat: every rank's progress as the nodes' records report it (`where`, by rank;
  // rank 0's own is read here); the verdict when one is due, after on_hang has recorded it (an
  // exception from on_hang is reported on stderr and otherwise ignored). `beat_ages`: at `now`,
  // since each rank's beat last moved (the heartbeat's).
  std::optional<HangVerdict> watch_reported(
      Clock::time_point now, const std::vector<std::optional<progress::Snapshot>>& where,
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
  void wait_for_the_others(KvStore& store, const HangVerdict& verdict) const;

  HangOptions o_;
  int rank_ = 0, world_size_ = 1;
  std::shared_ptr<const std::vector<std::string>> hosts_;
  std::chrono::milliseconds interval_;
  ProgressWatch progress_;
  std::atomic<bool> ending_{false};
};

}  // namespace hpctrain::dist
