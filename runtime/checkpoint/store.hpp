// Store: atomic, checksummed checkpoints of opaque files in RUN_DIR/checkpoints
// (docs/checkpoint-format.md). The trainer decides what the files hold; the store only makes
// them durable, visible all at once, verifiable and few.
//
// Protocol (each rank has a Store with its rank id and the node layout; collectives are the
// caller's):
//   1. every rank: write_part(step, files) into ".step-NNNNNNNNN.tmp" (or start_write/wait);
//   2. the caller agrees across ranks that every write_part succeeded;
//   3. every rank: merge_node(step): each node's leader (its lowest rank) merges its node's part
//      manifests into one node manifest; the others do nothing;
//   4. the caller agrees that every merge succeeded;
//   5. rank 0: commit(step, meta), once every merge succeeded: checks its own node's manifest,
//      renames the directory to "step-NNNNNNNNN" and writes manifest.json (the node layout, not
//      one entry per node), the commit point, then applies retention; or, when any rank failed,
//      abandon(step). The commit reads one node manifest whatever the node count (bench/scale:
//      at 10,240 ranks reading all 1,280 was 28x the commit at 64); every node manifest carries
//      its own XXH3, which each rank checks at load, so one damaged after its merge is found
//      there and the ranks' agreement falls back to the previous step (as for a damaged file).
// At start-up rank 0 calls clean_leftovers() and apply_striping() before any rank writes; then
// every rank calls load_latest(), and the caller agrees on the step (see load_latest).
//
// Thread safety: one thread drives a Store. start_write() runs write_part on a background
// thread; until its result is collected (poll/wait) the Store refuses another write, a merge and
// a commit. Stores of different ranks in one process (tests, the many-rank emulator: one Store
// per emulated rank, each on its own thread) may share an Env and a NodeLayout.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/env.hpp"
#include "checkpoint/striping.hpp"

namespace hpctrain::spec {
struct Spec;
}

namespace hpctrain::checkpoint {

// Bumped when the layout or manifest changes incompatibly. Written: this one (3: manifest.json
// holds the node layout; each node manifest its own XXH3). Read: this one, 2 (manifest.json
// lists every node manifest with its XXH3) and 1 (manifest.json lists every file); others are
// passed over as damaged.
inline constexpr int64_t kFormatVersion = 3;
inline constexpr int64_t kOldestFormatVersion = 1;

// Which ranks share a node, for the node manifests: rank r is on node node_of(r). Nodes are
// numbered by their lowest rank (node 0 holds rank 0), whatever labels they were given; a node's
// ranks need not be contiguous. Any partition of the ranks is correct (every file is still
// checked); the real one makes the merges run in parallel, one per node, near the data.
// Immutable after construction: shared by the Stores of every rank of a process.
class NodeLayout {
 public:
  // `labels[r]` names rank r's node (any values; equal labels, same node). Throws rt::Error when
  // empty.
  explicit NodeLayout(const std::vector<int>& labels);
  // Every rank its own node (the layout of a Store given none).
  static std::shared_ptr<const NodeLayout> one_per_rank(int world_size);
  // Ranks of the same host share a node: hosts[r] is rank r's host.
  static std::shared_ptr<const NodeLayout> from_hosts(const std::vector<std::string>& hosts);

  int world_size() const { return static_cast<int>(node_of_rank_.size()); }
  int nodes() const { return static_cast<int>(ranks_.size()); }
  int node_of(int rank) const { return node_of_rank_.at(static_cast<size_t>(rank)); }
  // node_of() of every rank, by rank.
  const std::vector<int>& node_of_ranks() const { return node_of_rank_; }
  // Ascending; the first is the node's leader, which merges its part manifests.
  const std::vector<int>& ranks_of(int node) const { return ranks_.at(static_cast<size_t>(node)); }
  int leader(int node) const { return ranks_of(node).front(); }

 private:
  std::vector<int> node_of_rank_;
  std::vector<std::vector<int>> ranks_;
};

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

// XXH3-64 of `data` as the manifests write it: 16 lowercase hex digits.
std::string xxh3_64_hex(std::string_view data);

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
  int64_t world_size = 0;      // of the run that saved it
  int64_t format_version = 0;  // kFormatVersion, or an older one still read
  nlohmann::json meta;         // commit()'s meta
  std::map<std::string, std::string> files;
};

class Store {
 public:
  // Creates `dir` (RUN_DIR/checkpoints) when it is missing and refuses one that is not ours: not
  // owned by this user, or writable by others. Throws rt::Error naming it.
  // Every rank its own node (NodeLayout::one_per_rank).
  Store(std::string dir, StoreOptions options, int rank, int world_size, Env& env = default_env());
  // Ranks grouped by `layout` (its world size is the store's): node manifests merge each node's
  // parts. Many Stores of one process should share one layout (it holds O(ranks)).
  Store(std::string dir, StoreOptions options, int rank, std::shared_ptr<const NodeLayout> layout,
        Env& env = default_env());
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

  // Phase 1b, every rank, once every rank's write_part succeeded: on a node's leader, reads the
  // part manifests of the node's ranks, checks them (step, rank, world size, each file there
  // whole by its size, no name twice) and writes the node manifest ".node-K.json" (every file of
  // the node: rank, size, XXH3-64), fsynced with the directory. Elsewhere does nothing and
  // succeeds. Never throws for I/O: a failure (naming the rank whose part is missing or bad)
  // comes back as the result's error. `bytes` is the node manifest's size.
  WriteResult merge_node(int64_t step);

  // Phase 2, rank 0, once every merge_node succeeded (the caller's vote: not checked beyond
  // rank 0's own node, so that the commit's cost does not grow with the nodes): reads and checks
  // its node's manifest, renames the temporary directory to step-NNNNNNNNN, fsyncs the parent,
  // writes manifest.json (the step, world size, format version, the node layout and `meta`, a
  // JSON object) through a temporary file, fsync and rename, and fsyncs the step directory: the
  // commit point. Then applies retention, whose failures are reported, not thrown (the step is
  // committed). Throws rt::Error naming what failed (its node manifest missing names the node's
  // ranks whose part is missing too); then nothing is committed and abandon() or
  // clean_leftovers() removes what is left.
  void commit(int64_t step, const nlohmann::json& meta);

  // Rank 0 (a no-op elsewhere), when any rank failed: removes what of `step` is not committed
  // (the temporary directory, a renamed one without manifest). Waits for this rank's write in
  // flight first and discards its result. Failures are reported, not thrown.
  void abandon(int64_t step);

  // The newest committed step not above `at_most` whose files this rank reads all match the
  // manifest (size and XXH3): those written by this rank's id and the `shared` ones named (rank
  // 0's replicated state, say). In formats 2 and 3 they are checked through manifest.json, the
  // node manifests holding them (their XXH3 in manifest.json in format 2, in themselves in 3)
  // and the files: this rank's node's, then node 0's, then others only for a shared name not
  // found there. A damaged step (a file truncated, changed, missing or a symlink; the manifest or
  // a node manifest it needs missing, garbled, of another step or node, or lacking a named file;
  // the directory writable by others) is reported with the reason and an older one tried.
  // nullopt when none is good. Reads every format version from kOldestFormatVersion.
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

  // Rank 0: waits until the steps retention retired are removed. Retention un-commits a step and
  // renames it aside at once (".step-NNNNNNNNN.retired-K"); removing its files (2N of them at N
  // ranks) runs on a thread of rank 0's own, off the commit's path, where every rank would wait
  // for it. The destructor does not wait: it stops the removal between two files, and
  // clean_leftovers() finishes it at the next start. For tests and the emulator.
  void wait_retired();

  const std::string& dir() const { return dir_; }
  int rank() const { return rank_; }
  const NodeLayout& layout() const { return *layout_; }
  // Whether this rank merges its node's part manifests (the node's lowest rank).
  bool node_leader() const { return layout_->leader(layout_->node_of(rank_)) == rank_; }
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
  // Checks the node manifest of `node` against the layout and its own XXH3; throws rt::Error
  // naming it (and, when missing, the node's ranks whose part manifest is missing too).
  void check_node_manifest(int64_t step, int node) const;
  nlohmann::json commit_manifest(int64_t step, const nlohmann::json& meta) const;
  void move_aside(int64_t step);
  void write_manifest(const std::string& step_dir, const std::string& text);
  void retain(int64_t newest);
  // Un-commits committed step `step` durably and renames it aside: one rename, whatever it holds.
  std::string retire(int64_t step);

  class Retirer;

  std::string dir_;
  StoreOptions options_;
  int rank_, world_size_;
  std::shared_ptr<const NodeLayout> layout_;
  Env& env_;
  std::future<WriteResult> inflight_;
  std::unique_ptr<Retirer> retirer_;  // rank 0, from the first retirement; stopped first
};

}  // namespace hpctrain::checkpoint
