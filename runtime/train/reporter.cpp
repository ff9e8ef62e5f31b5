#include "train/reporter.hpp"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "common/error.hpp"
#include "common/records.hpp"
#include "common/run_layout.hpp"
#include "tensorboard/event_file.hpp"
#include "train/metrics.hpp"
#include "version.hpp"

namespace hpctrain::train {
namespace {

// "1h02m", "4m05s", "12s".
std::string duration_text(double seconds) {
  const auto s = static_cast<int64_t>(std::max(0.0, seconds) + 0.5);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60));
  } else if (s >= 60) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  }
  return buf;
}

using ll = long long;

class LogOutput : public ReportOutput {
 public:
  using ReportOutput::on;
  explicit LogOutput(std::ostream& out) : out_(out) {}

  void on(const RunDescribed& e) override {
    const data::DatasetInfo& info = e.dataset;
    out_ << rt::rank_prefix() << "training " << e.arch << " on " << info.num_samples
         << (info.encoding == data::Encoding::kRaw ? " images " : " JPEG images up to ")
         << info.height << "x" << info.width << "x" << info.channels << ", " << e.world
         << " ranks x " << e.batch_size << " per step, " << e.steps_per_epoch
         << " steps per epoch, " << e.total_steps << " steps, " << e.precision << ", " << e.threads
         << " threads per rank"
         << (e.device_path ? "; the device path (uint8 input normalised on the device, "
                             "decisions one step late, fused optimizer)"
                           : "")
         << std::endl;
  }

  void on(const AlreadyFinished& e) override {
    out_ << rt::rank_prefix() << "this run finished already (checkpoint step " << e.step
         << " is marked finished); nothing to do" << std::endl;
  }

  void on(const Resuming& e) override {
    out_ << rt::rank_prefix() << "resuming from checkpoint step " << e.step << " (epoch "
         << e.epoch + 1 << ", sample " << e.consumed << " of its order)";
    if (e.saved_world != e.world) {
      out_ << " saved by " << e.saved_world << " ranks, now " << e.world << ": continuing at step "
           << e.continue_at << " of " << e.total_steps;
    }
    out_ << std::endl;
  }

  void on(const Trained& e) override {
    char line[256];
    std::snprintf(line, sizeof line,
                  "epoch %lld/%lld step %lld/%lld loss %.4f lr %.5f images/s %.0f (steps "
                  "%lld-%lld) scale %g eta %s",
                  static_cast<ll>(e.epoch), static_cast<ll>(e.epochs), static_cast<ll>(e.step),
                  static_cast<ll>(e.total_steps), e.loss, e.lr, e.images_per_s,
                  static_cast<ll>(e.first_step), static_cast<ll>(e.step), e.loss_scale,
                  duration_text(e.eta_s).c_str());
    out_ << rt::rank_prefix() << line << std::endl;
  }

  void on(const RanksCompared& e) override {
    if (!e.spread.behind) return;
    const int64_t slowest = e.spread.slowest;
    const std::string host =
        e.slowest_host && !e.slowest_host->empty() ? " (" + *e.slowest_host + ")" : "";
    char line[256];
    std::snprintf(line, sizeof line,
                  "straggler: rank %lld%s busy %.3f s a step (p50; p95 %.3f s), %.1fx the "
                  "ranks' median %.3f s; the others wait for it",
                  static_cast<ll>(slowest), host.c_str(), e.spread.slowest_s,
                  e.p95[static_cast<size_t>(slowest)], e.spread.slowest_s / e.spread.median_s,
                  e.spread.median_s);
    out_ << rt::rank_prefix() << line << std::endl;
  }

  void on(const Evaluated& e) override {
    const EvalResult& r = e.result;
    char line[192];
    std::snprintf(line, sizeof line,
                  "eval epoch %lld step %lld: top-1 %.2f%% top-5 %.2f%% loss %.4f (%lld "
                  "images, %.1f s)",
                  static_cast<ll>(e.epoch), static_cast<ll>(e.step), 100 * r.top1, 100 * r.top5,
                  r.loss, static_cast<ll>(r.samples), e.seconds);
    out_ << rt::rank_prefix() << line << std::endl;
  }

  void on(const RolledBack& e) override {
    out_ << rt::rank_prefix() << "the loss diverged at step " << e.step << ": " << e.verdict
         << "; rolled back to the checkpoint of step " << e.to_step << " and skipped the "
         << e.samples_skipped << " samples of steps " << e.to_step + 1 << "-" << e.step
         << " (rollback " << e.rollbacks << " of at most " << e.max_rollbacks
         << ", resilience.max_rollbacks)" << std::endl;
  }

  void on(const Replayed& e) override {
    out_ << rt::rank_prefix() << "replay at step " << e.step << ": " << e.verdict << std::endl;
  }

  void on(const Stopping& e) override {
    out_ << rt::rank_prefix() << "stopping at step " << e.step << " (" << e.reason
         << "); last committed checkpoint: step " << e.last_committed
         << (e.evicting ? "; exiting for the step supervisor to replace the node"
                        : "; exiting for the job to be requeued")
         << std::endl;
  }

  // "final: test top-1 ...; 702 steps, 3 epochs in ..." for a run trained in one attempt; a
  // resumed attempt says what it ran itself ("this attempt: steps 406-702 (297) in ...") and then
  // the run's totals ("the run: 702 steps, 3 epochs"): the time and rate are this attempt's.
  void on(const Finished& r) override {
    std::ostringstream line;
    line << rt::rank_prefix() << "final: " << std::fixed;
    if (r.eval) {
      line << std::setprecision(2) << "test top-1 " << 100 * r.eval->top1 << "% top-5 "
           << 100 * r.eval->top5 << "% loss " << std::setprecision(4) << r.eval->loss << " ("
           << r.eval->samples << " images); ";
    }
    if (!r.resumed) {
      line << r.steps << " steps, " << r.epochs << " epochs";
    } else if (r.steps > r.first_step) {
      line << "this attempt: steps " << r.first_step + 1 << "-" << r.steps << " ("
           << r.steps - r.first_step << ")";
    } else {
      line << "this attempt: no steps left to take (resumed at step " << r.first_step << ")";
    }
    if (r.steps > r.first_step) {
      line << " in " << std::setprecision(1) << r.train_seconds << " s, " << std::setprecision(0)
           << r.images_per_s << " images/s (training alone)";
    }
    line << std::setprecision(0) << ", peak RSS " << r.peak_rss_mib << " MiB per rank (max)";
    if (r.averagings) {
      const int64_t n = *r.averagings;
      line << "; local SGD" << (r.resumed ? " (this attempt)" : "") << ": " << n
           << " averagings of " << std::setprecision(1)
           << static_cast<double>(r.bytes_averaged) / std::max<int64_t>(1, n) / (1024.0 * 1024.0)
           << " MiB";
    }
    if (r.resumed) line << "; the run: " << r.steps << " steps, " << r.epochs << " epochs";
    if (!r.weights.empty()) line << "; weights " << r.weights.string();
    out_ << line.str() << std::endl;
  }

 private:
  std::ostream& out_;
};

// metrics.jsonl through its typed records (common/records.hpp), one line each.
class MetricsOutput : public ReportOutput {
 public:
  using ReportOutput::on;
  explicit MetricsOutput(const std::filesystem::path& run_dir)
      : log_(run_dir / layout::kMetrics), run_dir_(run_dir) {}

  void on(const Started& e) override {
    records::StartedRecord r;
    r.step = e.step;
    r.epoch = e.epoch;
    r.world_size = e.world;
    r.resumed_from = e.resumed_from;
    if (!e.srun_step_tag.empty()) r.tag = e.srun_step_tag;
    r.version = std::string(kVersion) + "+" + kCommit;
    r.wall_time = e.wall_time;
    log_.write(r);
  }

  void on(const Trained& e) override {
    records::TrainRecord r;
    r.step = e.step;
    r.epoch = e.epoch;
    r.loss = e.loss;
    r.lr = e.lr;
    r.images_per_s = e.images_per_s;
    r.window_first_step = e.first_step;
    r.window_seconds = e.seconds;
    r.loss_scale = e.loss_scale;
    r.checkpoint_seconds = e.checkpoint_seconds;
    r.wall_time = e.wall_time;
    log_.write(r);
  }

  void on(const RanksCompared& e) override {
    records::RanksRecord r;
    r.step = e.step;
    r.busy_p50_s = e.p50;
    r.busy_p95_s = e.p95;
    r.slowest_rank = e.spread.slowest;
    r.slowest_host = e.slowest_host;
    r.median_busy_s = e.spread.median_s;
    r.slowest_busy_s = e.spread.slowest_s;
    if (e.spread.behind) r.behind_rank = e.spread.slowest;
    r.wall_time = e.wall_time;
    log_.write(r);
  }

  void on(const RolledBack& e) override {
    records::RollbackRecord r;
    r.step = e.step;
    r.rolled_back_to = e.to_step;
    r.skipped_from = e.to_step + 1;
    r.samples_skipped = e.samples_skipped;
    r.rollbacks = e.rollbacks;
    r.message = e.verdict;
    r.wall_time = e.wall_time;
    log_.write(r);
  }

  void on(const Evicting& e) override {
    write_suspects(run_dir_, e.kind, e.srun_step_tag, e.step, e.ranks, e.hosts, e.message);
  }

  void on(const Evaluated& e) override {
    records::EvalRecord r;
    r.step = e.step;
    r.epoch = e.epoch;
    r.loss = e.result.loss;
    r.top1 = e.result.top1;
    r.top5 = e.result.top5;
    r.samples = e.result.samples;
    r.seconds = e.seconds;
    r.wall_time = e.wall_time;
    log_.write(r);
  }

 private:
  records::MetricsLog log_;
  std::filesystem::path run_dir_;
};

class TensorBoardOutput : public ReportOutput {
 public:
  using ReportOutput::on;
  TensorBoardOutput(const std::filesystem::path& run_dir, std::ostream& warn)
      : events_(run_dir / layout::kTensorBoard, warn) {}

  void on(const Trained& e) override {
    events_.write(e.step, e.wall_time,
                  {{"train/loss", e.loss},
                   {"train/lr", e.lr},
                   {"train/images_per_s", e.images_per_s},
                   {"train/loss_scale", e.loss_scale}});
  }

  void on(const Evaluated& e) override {
    events_.write(
        e.step, e.wall_time,
        {{"eval/top1", e.result.top1}, {"eval/top5", e.result.top5}, {"eval/loss", e.result.loss}});
  }

 private:
  tensorboard::EventWriter events_;
};

}  // namespace

std::unique_ptr<ReportOutput> log_output(std::ostream& out) {
  return std::make_unique<LogOutput>(out);
}

std::unique_ptr<ReportOutput> metrics_output(const std::filesystem::path& run_dir) {
  return std::make_unique<MetricsOutput>(run_dir);
}

std::unique_ptr<ReportOutput> tensorboard_output(const std::filesystem::path& run_dir,
                                                 std::ostream& warn) {
  return std::make_unique<TensorBoardOutput>(run_dir, warn);
}

Reporter::Reporter(const ReporterOptions& options) {
  if (!options.rank0) return;
  if (!options.run_dir.empty()) {
    outputs_.push_back(metrics_output(options.run_dir));
    outputs_.push_back(tensorboard_output(options.run_dir, std::cerr));
  }
  if (options.out) outputs_.push_back(log_output(*options.out));
}

}  // namespace hpctrain::train
