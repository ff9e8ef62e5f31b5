// The hang watchdog's decisions (docs/resilience.md "Hangs"), pure: how long a rank may make no
// progress (hang_limit, hang_allowance), whether a rank's beat is on time (beat_state), whom a hang
// verdict names and what it says (hang_verdict), rank 0's record of every rank's progress that
// feeds them (ProgressWatch), and the verdict's text as it travels through the store. The store
// traffic and carrying a verdict out are dist/hang_watchdog.hpp's; the beats themselves are
// dist/heartbeat.hpp's. Torch-free.
// Thread safety: the functions are reentrant; a ProgressWatch belongs to one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/time.hpp"
#include "dist/progress.hpp"

namespace hpctrain::dist {

// The hang watchdog's settings (dist/heartbeat.hpp's HeartbeatOptions carries them).
struct HangOptions {
  // A rank whose progress has not moved this long is hung; 0: automatic, 10 times the median
  // step time of rank 0, at least `hang_floor`. Start-up, the first step of the process and
  // finishing are not watched; a checkpoint has `checkpoint_timeout` at least.
  std::chrono::milliseconds hang_timeout{0};
  std::chrono::milliseconds hang_floor{60000};
  std::chrono::milliseconds checkpoint_timeout{600000};
  int hang_exit_status = 1;
  bool dump_stacks = true;  // the ranks named print their threads' stacks before exiting
  // Rank 0, before it posts a hang verdict: the ranks named and the message (the worker records
  // them for the step supervisor, which treats the named ranks' nodes as lost). Runs on the
  // heartbeat's thread; an exception is reported and otherwise ignored.
  std::function<void(const std::vector<int>& named, const std::string& message)> on_hang;
  // Where this rank's training stands; empty: progress::snapshot(), the process's own. The
  // many-rank emulator (bench/scale) gives each of its ranks its own.
  std::function<progress::Snapshot()> progress;
  // Ends this rank on a verdict, given the exit status and the line to print (with its newline).
  // Empty: the line on stderr in one write, then _exit(status): no destructors, no atexit handlers
  // (the main thread may be inside a collective that never returns). A hook that returns ends only
  // the heartbeat's threads (end_rank() throws RankEnded to them): the emulator's ranks are
  // threads of one process.
  std::function<void(int status, const std::string& line)> on_end;
};

// What end_rank() throws to the heartbeat's threads when on_end returned; not a std::exception,
// so that no handler of store errors takes it.
struct RankEnded {
  int status = 0;
};

// Ends this rank as `o.on_end` says (see there).
[[noreturn]] void end_rank(const HangOptions& o, int status, const std::string& line);

// This rank's progress: o.progress, or the process's.
progress::Snapshot current_progress(const HangOptions& o);

// The hang timeout in force: hang_timeout when set, else 10 times the median of `step_seconds`
// (rank 0's seconds per step so far), at least hang_floor (the floor alone before any step).
std::chrono::milliseconds hang_limit(const HangOptions& o, const std::vector<double>& step_seconds);

// How long a rank where `s` says may make no progress before it is hung: `limit` (hang_limit()),
// in a checkpoint the larger of it and checkpoint_timeout (a save slower than the hang timeout but
// within the commit timeout is no hang); nullopt where nothing is watched (start-up, the first
// step of the process, finishing).
std::optional<std::chrono::milliseconds> hang_allowance(const progress::Snapshot& s,
                                                        std::chrono::milliseconds limit,
                                                        const HangOptions& o);

// What rank 0 knows of one rank when it forms a hang verdict.
struct RankView {
  std::optional<progress::Snapshot> where;  // its last published progress (nullopt: none)
  std::chrono::milliseconds still{0};       // since its progress counter last moved
  std::chrono::milliseconds beat_age{0};    // since its beat counter last moved
  std::string host;                         // "" when unknown
};

struct HangVerdict {
  std::vector<int> named;   // the ranks the others wait for, ascending
  std::vector<int> silent;  // those of `named` whose heartbeat is silent too: no stacks to wait for
  std::string message;      // "hang: no progress for ..."
};

// A rank's beat as rank 0 sees it: on time (less than 1.5 beat intervals old: a rank alive, even
// one stuck in its training, beats every interval), late (up to 3 intervals: perhaps a slow beat,
// perhaps the last one) or silent (3 intervals or more: a stopped process, or one whose link is
// gone, well before the heartbeat timeout, 5 intervals at least, ends the job for it).
enum class Beat { kOnTime, kLate, kSilent };
Beat beat_state(std::chrono::milliseconds age, std::chrono::milliseconds beat_interval);

// The hang verdict, once some rank's progress has stood still for `longest` against `limit`
// (hang_limit()); nullopt while some rank's beat is late: rank 0 asks again at its next beat,
// when that rank has either beaten or fallen silent (2 intervals at most); a rank finishing,
// which stops beating as it leaves, is neither. The silent ranks are named, "silent" with the
// last progress they published: a process that does not answer at all is what the others wait
// for, and its published progress is only its last word. With none silent, the ranks furthest
// behind are named (the lowest step, then the earliest phase of it) with their phase and step.
// Either way the message ends with what the others are in.
std::optional<HangVerdict> hang_verdict(const std::vector<RankView>& ranks,
                                        std::chrono::milliseconds limit,
                                        std::chrono::milliseconds longest,
                                        std::chrono::milliseconds beat_interval);

// The verdict as rank 0 posts it for the others: "hang\n<named>\n<silent>\n<message>", the ranks
// comma-separated. decode_hang_verdict() reads it back; nullopt for any other verdict (a lost
// rank's: the heartbeat's own).
std::string encode_hang_verdict(const HangVerdict& v);
std::optional<HangVerdict> decode_hang_verdict(const std::string& text);

// Rank 0's record of every rank's progress: the last snapshot each published and when its
// counter last moved, and rank 0's own seconds per step (for the automatic hang timeout).
class ProgressWatch {
 public:
  explicit ProgressWatch(int world_size);

  // Rank `rank`'s progress as read at `now`; nullopt (nothing published yet) changes nothing.
  // A rank's progress stands still from the first observation until its counter moves.
  void observe(int rank, const std::optional<progress::Snapshot>& s, Clock::time_point now);

  // After observing every rank at `now` (rank 0 first among them): notes rank 0's step time,
  // and when some watched rank has stood still past its allowance (hang_allowance()), the verdict
  // (hang_verdict()) from the ranks' beat ages (since each one's beat counter last moved) and
  // hosts ("" or missing: unknown); nullopt otherwise.
  std::optional<HangVerdict> check(Clock::time_point now, const HangOptions& o,
                                   const std::vector<std::chrono::milliseconds>& beat_ages,
                                   const std::vector<std::string>& hosts,
                                   std::chrono::milliseconds beat_interval);

 private:
  std::chrono::milliseconds still(size_t rank, Clock::time_point now) const;
  void note_step_time(Clock::time_point now);

  std::vector<std::optional<progress::Snapshot>> where_;
  std::vector<Clock::time_point> progressed_;  // when each rank's counter last moved
  bool started_ = false;                       // progressed_ set at the first observation
  int64_t seen_step_ = -1;                     // rank 0's step at its last change
  Clock::time_point seen_step_at_;
  std::vector<double> step_seconds_;  // the last 64 (seconds per step between observations)
};

}  // namespace hpctrain::dist
