// The trainer's reporting: each event is handed to the Reporter once, and the Reporter gives it
// to every output rank 0 has — the log (lines on stdout), RUN_DIR/metrics.jsonl
// (docs/run-directory.md) and RUN_DIR/tensorboard/ (docs/tensorboard.md) — each writing what it
// shows of it. The other ranks' Reporter has no outputs. The events hold figures already agreed
// by the ranks (the reporter issues no collective) and their wall time, so that every output
// stamps an event alike.
// Thread safety: the training thread only.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "common/records.hpp"
#include "data/format.hpp"
#include "train/evaluate.hpp"
#include "train/straggler.hpp"

namespace hpctrain::train {

// What is trained, on what, how (the log's first line).
struct RunDescribed {
  std::string arch, precision;
  data::DatasetInfo dataset;
  int64_t world = 0, batch_size = 0, steps_per_epoch = 0, total_steps = 0;
  int threads = 0;
  bool device_path = false;
};

// A restart of a run whose checkpoint at `step` is marked finished.
struct AlreadyFinished {
  int64_t step = 0;
};

// Resuming from a checkpoint: its position, and where the counter continues (another world size
// continues at the equivalent step of the new per-step batch).
struct Resuming {
  int64_t step = 0, epoch = 0, consumed = 0;  // the checkpoint's (epoch 0-based)
  int64_t saved_world = 0, world = 0, continue_at = 0, total_steps = 0;
};

// The first training step of this process (docs/resilience.md times a recovery from it).
struct Started {
  int64_t step = 0, epoch = 0;  // epoch from 1
  int64_t world = 0;
  std::optional<int64_t> resumed_from;
  std::string srun_step_tag;
  double wall_time = 0;
};

// A log window of training steps: this attempt's steps first_step..step.
struct Trained {
  int64_t step = 0, epoch = 0, epochs = 0, total_steps = 0, first_step = 0;  // epoch from 1
  double loss = 0, lr = 0, images_per_s = 0, seconds = 0, loss_scale = 1, eta_s = 0;
  double checkpoint_seconds = 0;  // blocked in checkpoint saves since the previous window's line
  double wall_time = 0;
};

// Every rank's busy time per step over a log window, compared (train/straggler.hpp).
struct RanksCompared {
  int64_t step = 0;
  std::vector<double> p50, p95;  // by rank
  RankSpread spread;
  std::optional<std::string> slowest_host;
  double wall_time = 0;
};

// A node let go, a straggler's (kEvict) or one found computing wrong results (kCorrupt): the ranks
// and node the step supervisor is to treat as lost.
struct Evicting {
  records::MetricsKind kind = records::MetricsKind::kEvict;
  int64_t step = 0;
  std::vector<int> ranks;
  std::vector<std::string> hosts;  // every rank's host, by rank
  std::string srun_step_tag, message;
};

// An evaluation of the validation set.
struct Evaluated {
  int64_t step = 0, epoch = 0;  // epoch from 1
  EvalResult result;
  double seconds = 0, wall_time = 0;
};

// The loss diverged and the run rolled back: the model, optimizer and loss scale are the
// checkpoint's at `to_step`, and the samples of steps to_step+1..step are skipped (training goes
// on after `step`).
struct RolledBack {
  int64_t step = 0, to_step = 0, samples_skipped = 0;
  int64_t rollbacks = 0, max_rollbacks = 0;  // the run's so far, this one included; the limit
  std::string verdict;
  double wall_time = 0;
};

// The replay on divergence found no faulty node (the loss itself diverged): what it compared.
struct Replayed {
  int64_t step = 0;
  std::string verdict;
};

// The run stops before its end (a stop signal, the time limit, an eviction).
struct Stopping {
  int64_t step = 0, last_committed = -1;
  std::string reason;
  bool evicting = false;
};

// The end of the run (rank 0's final line). A resumed attempt reports what it ran itself and
// then the run's totals.
struct Finished {
  int64_t steps = 0, first_step = 0, epochs = 0;
  bool resumed = false;
  double train_seconds = 0, images_per_s = 0, peak_rss_mib = 0;
  std::optional<EvalResult> eval;
  std::optional<int64_t> averagings;  // local SGD: averagings this process did
  int64_t bytes_averaged = 0;         // and the bytes each contributed to them
  std::filesystem::path weights;
};

// One output: writes what it shows of each event; the rest it ignores.
class ReportOutput {
 public:
  virtual ~ReportOutput() = default;
  virtual void on(const RunDescribed&) {}
  virtual void on(const AlreadyFinished&) {}
  virtual void on(const Resuming&) {}
  virtual void on(const Started&) {}
  virtual void on(const Trained&) {}
  virtual void on(const RanksCompared&) {}
  virtual void on(const Evicting&) {}
  virtual void on(const Evaluated&) {}
  virtual void on(const RolledBack&) {}
  virtual void on(const Replayed&) {}
  virtual void on(const Stopping&) {}
  virtual void on(const Finished&) {}
};

// The log: rank 0's lines on `out` ("[rank 0/N host] epoch 1/3 step 40/702 loss ...").
std::unique_ptr<ReportOutput> log_output(std::ostream& out);
// RUN_DIR/metrics.jsonl, appended to (train, ranks, started, eval and evict records).
std::unique_ptr<ReportOutput> metrics_output(const std::filesystem::path& run_dir);
// RUN_DIR/tensorboard/: a new event file without the (tag, step)s earlier attempts wrote; its
// warnings on `warn`.
std::unique_ptr<ReportOutput> tensorboard_output(const std::filesystem::path& run_dir,
                                                 std::ostream& warn);

struct ReporterOptions {
  bool rank0 = false;
  std::ostream* out = nullptr;    // the log; null: none
  std::filesystem::path run_dir;  // metrics.jsonl and tensorboard/; empty: none
};

class Reporter {
 public:
  explicit Reporter(std::vector<std::unique_ptr<ReportOutput>> outputs)
      : outputs_(std::move(outputs)) {}
  // Rank 0's outputs as `options` asks (none on other ranks).
  explicit Reporter(const ReporterOptions& options);

  template <class Event>
  void report(const Event& event) {
    for (auto& output : outputs_) output->on(event);
  }

 private:
  std::vector<std::unique_ptr<ReportOutput>> outputs_;
};

}  // namespace hpctrain::train
