// Store: atomic, checksummed checkpoints of opaque files in RUN_DIR/checkpoints
// (docs/checkpoint-format.md). The trainer decides what the files hold; the store only makes
// them durable, visible all at once, verifiable and few.
//
// Protocol (each rank has a Store with its rank id; collectives are the caller's):
//   1. every rank: write_part(step, files) into ".step-NNNNNNNNN.tmp" (or start_write/wait);
//   2. the caller agrees across ranks that every write_part succeeded;
//   3. rank 0: commit(step, meta) renames the directory to "step-NNNNNNNNN" and writes
//      manifest.json, the commit point, then applies retention; or, when any rank failed,
//      abandon(step).
// At start-up rank 0 calls clean_leftovers() and apply_striping() before any rank writes; then
// every rank calls load_latest(), and the caller agrees on the step (see load_latest).
//
// Thread safety: one thread drives a Store. start_write() runs write_part on a background
// thread; until its result is collected (poll/wait) the Store refuses another write and a
// commit. Stores of different ranks in one process (tests) may share an Env.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/env.hpp"
#include "checkpoint/striping.hpp"

namespace hpctrain::spec {
struct Spec;
}

namespace hpctrain::checkpoint {

// Bumped when the layout or manifest changes incompatibly; load refuses other versions.
inline constexpr int64_t kFormatVersion = 1;

// Set from the job spec by store_options_from_spec(); the fields without a spec key keep the
// library's settings below.
struct StoreOptions {
  int64_t keep_last = 0;            // newest committed steps kept, >= 1
  int64_t keep_every = 0;           // also keep every step divisible by this; 0 = none
  int64_t lustre_stripe_count = 0;  // 0 = the filesystem's default, -1 = all OSTs
  int64_t lustre_stripe_size = 0;   // bytes; 0 = the filesystem's default
  // Files 0640 and directories 0750 instead of 0600 and 0700.
  bool group_readable = false;
  // Damaged checkpoints passed over, retention failures, striping: one line each. Empty: stderr
  // with the rank prefix.
  std::function<void(const std::string&)> report;

  // Checks the invariants the store relies on; throws rt::Error naming the first invalid field.
  void validate() const;
};

StoreOptions store_options_from_spec(const spec::Spec& spec);

// This rank's files of one step: name -> bytes. Names are the caller's, unique across ranks
// (each rank writes into the same step directory): letters, digits, '.', '_', '-', not starting
// with '.', and not "manifest.json".
struct Part {
  std::map<std::string, std::string> files;
};

struct WriteResult {
  bool ok = false;
  std::string error;  // what failed: the operation, the file and the OS's text
  int64_t bytes = 0;
  double seconds = 0;
  explicit operator bool() const { return ok; }
};

struct Loaded {
  int64_t step = 0;
  int64_t world_size = 0;  // of the run that saved it
  nlohmann::json meta;     // commit()'s meta
  std::map<std::string, std::string> files;
};

class Store {
 public:
  // Creates `dir` (RUN_DIR/checkpoints) when it is missing and refuses one that is not ours: not
  // owned by this user, or writable by others. Throws rt::Error naming it.
  Store(std::string dir, StoreOptions options, int rank, int world_size, Env& env = default_env());
  // Waits for a write still in flight: it cannot be abandoned half-way.
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Phase 1, every rank: writes its files for `step` into the step's temporary directory, each
  // fsynced, with its part manifest (name, size and XXH3-64 of each file), and fsyncs the
  // directory. Never throws for I/O: a failure comes back as the result's error.
  WriteResult write_part(int64_t step, const Part& part);

  // write_part on a background thread, on a snapshot the store owns. At most one in flight:
  // starting another before collecting this one's result throws rt::Error.
  void start_write(int64_t step, Part part);
  // nullopt while the write runs; then its result, once (the next write may start). Throws
  // rt::Error when no write was started.
  std::optional<WriteResult> poll();
  // Blocks until the write finishes and returns its result. Throws rt::Error when none started.
  WriteResult wait();
  bool write_in_flight() const { return inflight_.valid(); }

  // Phase 2, rank 0, once every rank's write_part succeeded: renames the temporary directory to
  // step-NNNNNNNNN, fsyncs the parent, writes manifest.json (every file of every rank, the step,
  // world size, format version and `meta`, a JSON object) through a temporary file, fsync and
  // rename, and fsyncs the step directory: the commit point. Then applies retention, whose
  // failures are reported, not thrown (the step is committed). Throws rt::Error naming what
  // failed; then nothing is committed and abandon() or clean_leftovers() removes what is left.
  void commit(int64_t step, const nlohmann::json& meta);

  // Rank 0 (a no-op elsewhere), when any rank failed: removes what of `step` is not committed
  // (the temporary directory, a renamed one without manifest). Waits for this rank's write in
  // flight first and discards its result. Failures are reported, not thrown.
  void abandon(int64_t step);

  // The newest committed step not above `at_most` whose files this rank reads all match the
  // manifest (size and XXH3): those written by this rank's id and the `shared` ones named (rank
  // 0's replicated state, say). A damaged step (a file truncated, changed, missing or a symlink;
  // the manifest missing, garbled or lacking a named file; the directory writable by others) is
  // reported with the reason and an older one tried. nullopt when none is good.
  // Ranks verify different files, so they may disagree: the caller agrees on the minimum of the
  // ranks' steps and, where that is lower than a rank's, that rank loads again with at_most set
  // to it.
  std::optional<Loaded> load_latest(const std::vector<std::string>& shared = {},
                                    int64_t at_most = std::numeric_limits<int64_t>::max());

  // Rank 0 at start-up, before any rank writes (a no-op elsewhere): removes what interrupted
  // saves of ours left, temporary directories ".step-N.tmp" and "step-N" directories without
  // manifest.json (renamed but never committed); leaves everything else alone. Returns the
  // names removed.
  std::vector<std::string> clean_leftovers();

  // Rank 0 at start-up, before the first save (a no-op elsewhere): stripes the directory on
  // Lustre when options ask for it (striping.hpp). A failure is reported and the store goes on
  // with the filesystem's default layout. Returns the plan.
  StripePlan apply_striping();

  // Steps with a manifest that parses, ascending: cheap (no file is hashed), for status and
  // retention. Throws rt::Error when the directory or a manifest cannot be read.
  std::vector<int64_t> committed_steps() const;

  const std::string& dir() const { return dir_; }
  // "step-NNNNNNNNN": layout::checkpoint_name (common/run_layout.hpp), which also parses names.
  static std::string step_name(int64_t step);

 private:
  std::string path_of(const std::string& name) const;
  std::string temp_dir(int64_t step) const;
  std::string final_dir(int64_t step) const;
  void report(const std::string& line) const;
  uint32_t file_mode() const;
  uint32_t dir_mode() const;
  void require_rank0(const char* what) const;
  void require_idle(const char* what) const;
  // Loads and checks step `step`; on failure returns why.
  std::optional<Loaded> try_load(int64_t step, const std::vector<std::string>& shared,
                                 std::string* why) const;
  nlohmann::json merged_manifest(int64_t step, const nlohmann::json& meta) const;
  void move_aside(int64_t step);
  void write_manifest(const std::string& step_dir, const std::string& text);
  void retain(int64_t newest);

  std::string dir_;
  StoreOptions options_;
  int rank_, world_size_;
  Env& env_;
  std::future<WriteResult> inflight_;
};

}  // namespace hpctrain::checkpoint
