#include "train/trainer.hpp"

#include <sys/resource.h>

#include <ATen/autocast_mode.h>
#ifdef HPCTRAIN_WITH_NCCL
#include <c10/cuda/CUDAFunctions.h>
#endif
#include <torch/nn/functional/loss.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/time.hpp"
#include "common/error.hpp"
#include "common/run_layout.hpp"
#include "dist/grad_sync.hpp"
#include "dist/progress.hpp"
#include "model/model.hpp"
#include "model/weights.hpp"
#include "preempt/signals.hpp"
#include "spec/spec.hpp"
#include "tensorboard/event_file.hpp"
#include "train/agreement.hpp"
#include "train/agreement_exchange.hpp"
#include "train/builders.hpp"
#include "train/checkpointing.hpp"
#include "train/device_input.hpp"
#include "train/fused_step.hpp"
#include "train/grad_scaler.hpp"
#include "train/local_sgd.hpp"
#include "train/metrics.hpp"
#include "train/optimizer.hpp"
#include "train/schedule.hpp"
#include "train/straggler.hpp"

namespace hpctrain::train {
namespace {

double peak_rss_mib() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

// Mixed precision for the forward pass, as torch.autocast(device, dtype) does; restores the
// previous state on exit.
class AutocastGuard {
 public:
  AutocastGuard(at::DeviceType device, spec::Precision precision)
      : device_(device), enabled_(precision != spec::Precision::kFp32) {
    if (!enabled_) return;
    previous_enabled_ = at::autocast::is_autocast_enabled(device_);
    previous_dtype_ = at::autocast::get_autocast_dtype(device_);
    at::autocast::set_autocast_enabled(device_, true);
    at::autocast::set_autocast_dtype(
        device_, precision == spec::Precision::kFp16 ? at::kHalf : at::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~AutocastGuard() {
    if (!enabled_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(device_, previous_enabled_);
    at::autocast::set_autocast_dtype(device_, previous_dtype_);
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  at::DeviceType device_;
  bool enabled_;
  bool previous_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kFloat;
};

// CUDA's sync debug mode for a scope (torch.cuda.set_sync_debug_mode): 1 warns, 2 throws on
// every operation that makes the host wait for the GPU. Nothing in CPU builds.
class SyncDebugScope {
 public:
  explicit SyncDebugScope(int mode) {
#ifdef HPCTRAIN_WITH_NCCL
    previous_ = static_cast<int>(c10::cuda::warning_state().get_sync_debug_mode());
    c10::cuda::warning_state().set_sync_debug_mode(static_cast<c10::cuda::SyncDebugMode>(mode));
#else
    (void)mode;
#endif
  }
  ~SyncDebugScope() {
#ifdef HPCTRAIN_WITH_NCCL
    c10::cuda::warning_state().set_sync_debug_mode(
        static_cast<c10::cuda::SyncDebugMode>(previous_));
#endif
  }
  SyncDebugScope(const SyncDebugScope&) = delete;
  SyncDebugScope& operator=(const SyncDebugScope&) = delete;

 private:
  int previous_ = 0;
};

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

class Trainer {
 public:
  Trainer(const spec::Spec& spec, dist::Communicator& comm, const TrainOptions& options)
      : spec_(spec), comm_(comm), options_(options), device_(comm.device()) {}

  TrainResult run() {
    setup();
    TrainResult result;
    if (resumed_ && resumed_->finished) {
      if (comm_.rank() == 0 && options_.out) {
        *options_.out << rt::rank_prefix() << "this run finished already (checkpoint step " << step_
                      << " is marked finished); nothing to do" << std::endl;
      }
      result.steps = step_;
      result.already_finished = true;
      return result;
    }
    const auto t0 = Clock::now();
    window_start_ = t0;
    result.first_step = first_step_;
    result.resumed = resumed_.has_value();
    // The epochs the run had begun before this attempt (a position mid-epoch has begun its epoch).
    result.epochs = start_epoch_ + (start_consumed_ > 0 ? 1 : 0);
    for (int64_t epoch = start_epoch_; epoch < spec_.train.epochs && step_ < plan_.total_steps;
         ++epoch) {
      train_epoch(epoch, epoch == start_epoch_ ? start_consumed_ : 0);
      result.epochs = epoch + 1;
      if (stop_) break;
      const bool last = epoch + 1 == spec_.train.epochs || step_ >= plan_.total_steps;
      const int64_t every = spec_.train.eval_every_epochs;
      if (data_.val && (last || (every > 0 && (epoch + 1) % every == 0))) {
        average_diverged();  // one model to evaluate
        result.eval = run_eval(epoch);
      }
    }
    progress::enter(progress::Phase::kFinishing);
    result.steps = step_;
    result.train_seconds = seconds_since(t0) - eval_seconds_;  // training alone
    result.images_per_s =
        step_ > first_step_
            ? static_cast<double>((step_ - first_step_) * plan_.global_batch) / result.train_seconds
            : 0;
    if (stop_) {
      checkpointer_->drain();
      result.stopped = true;
      result.evicted = evicted_;
      if (comm_.rank() == 0 && options_.out) {
        *options_.out << rt::rank_prefix() << "stopping at step " << step_ << " (" << stop_reason_
                      << "); last committed checkpoint: step " << checkpointer_->last_committed()
                      << (evicted_.empty() ? "; exiting for the job to be requeued"
                                           : "; exiting for the batch script to replace the node")
                      << std::endl;
      }
      return result;
    }
    average_diverged();  // local SGD ends on one model
    sync_buffers();
    result.fingerprint = verify_identical_weights();
    result.peak_rss_mib = max_over_ranks(peak_rss_mib());
    if (comm_.rank() == 0 && !options_.run_dir.empty()) {
      result.weights = options_.run_dir / layout::kWeights;
      model::save_weights(*model_, result.weights.string());
    }
    // Last: a restarted run that finds this checkpoint has nothing left to do.
    save(/*finished=*/true, /*allow_async=*/false);
    log_final(result);
    return result;
  }

 private:
  // The parts in an order that matters: the data before the model (the model seeds torch's
  // generator), the model before the optimizer, everything the checkpoint holds before restore(),
  // and the fused optimizer after it.
  void setup() {
    configure_backends(spec_, device_, options_.fp16_on_cpu);
    // The device path (uint8 batches normalised on the device, the agreement read one step
    // late, fused optimizer kernels) on GPUs, or on the CPU when asked, to test it.
    input_path_ = choose_input_path(device_, options_.device_path_on_cpu);
    deferred_ = input_path_.device;
    if (device_.is_cuda()) sync_debug_ = options_.cuda_sync_debug;
    data_ = build_data(spec_, comm_.rank(), comm_.size(), input_path_);
    train_info_ = data_.train_source->info();
    model_ = initial_model(spec_, train_info_.channels, device_, comm_);
    params_ = model_params(*model_);
    grad_sync_ = std::make_unique<dist::GradSync>(params_.names, params_.all, comm_,
                                                  dist::grad_sync_options_from_spec(spec_));
    local_sgd_ = build_local_sgd(spec_, *model_, params_.named, comm_);
    data_.train->start_epoch(0, 0);
    const int64_t steps_per_epoch = data_.train->num_batches();
    input_ = std::make_unique<DeviceInput>(*data_.train, device_, spec_.train.channels_last,
                                           input_path_);
    plan_ = plan_steps(spec_, train_info_, steps_per_epoch, comm_.size());
    schedule_ = std::make_unique<LrSchedule>(schedule_config_from_spec(
        spec_, plan_.global_batch, plan_.steps_per_epoch, plan_.total_steps));
    optimizer_ = make_optimizer(spec_, params_.named, schedule_->lr_at(0));
    scaler_ = build_scaler(spec_, options_, device_);
    if (comm_.rank() == 0 && !options_.run_dir.empty()) {
      metrics_ = std::make_unique<MetricsLog>(options_.run_dir / layout::kMetrics);
      // The same records for TensorBoard, without the (tag, step)s an earlier attempt wrote.
      events_ = std::make_unique<tensorboard::EventWriter>(options_.run_dir / layout::kTensorBoard,
                                                           std::cerr);
    }
    trace_ = open_trace(options_, comm_.rank());
    state_ = std::make_unique<TrainingState>(TrainingState{
        *model_, *optimizer_, params_.named, scaler_.get(), train_info_, local_sgd_.get()});
    checkpointer_ = build_checkpointer(spec_, options_, comm_);
    resumed_ = checkpointer_->restore(*state_);
    if (resumed_) resume_from(*resumed_);
    progress::begin_training(step_);
    if (deferred_) fused_ = std::make_unique<FusedStep>(*optimizer_, params_.named);
    agreement_ = std::make_unique<AgreementExchange>(comm_, device_);
    window_loss_ = at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(device_));
    log_training();
  }

  // Rank 0: what is trained, on what, how.
  void log_training() {
    if (comm_.rank() != 0 || !options_.out) return;
    const data::DatasetInfo& info = train_info_;
    *options_.out << rt::rank_prefix() << "training " << spec::name_of(spec_.model.arch) << " on "
                  << info.num_samples
                  << (info.encoding == data::Encoding::kRaw ? " images " : " JPEG images up to ")
                  << info.height << "x" << info.width << "x" << info.channels << ", "
                  << comm_.size() << " ranks x " << spec_.train.batch_size << " per step, "
                  << plan_.steps_per_epoch << " steps per epoch, " << plan_.total_steps
                  << " steps, " << spec::name_of(spec_.train.precision) << ", "
                  << at::get_num_threads() << " threads per rank"
                  << (deferred_ ? "; the device path (uint8 input normalised on the device, "
                                  "decisions one step late, fused optimizer)"
                                : "")
                  << std::endl;
  }

  // Rank 0: the final line (evaluation, steps, throughput, memory, local SGD, weights). A run
  // trained in one attempt says "702 steps, 3 epochs in ..."; a resumed attempt says what it ran
  // itself ("this attempt: steps 406-702 (297) in ...") and then the run's totals ("the run: 702
  // steps, 3 epochs"): the time and rate are always this attempt's.
  void log_final(const TrainResult& r) {
    if (comm_.rank() != 0 || !options_.out) return;
    std::ostringstream line;
    line << rt::rank_prefix() << "final: " << std::fixed;
    if (r.eval) {
      line << std::setprecision(2) << "test top-1 " << 100 * r.eval->top1 << "% top-5 "
           << 100 * r.eval->top5 << "% loss " << std::setprecision(4) << r.eval->loss << " ("
           << r.eval->samples << " images); ";
    }
    const bool resumed = r.resumed;
    if (!resumed) {
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
    if (local_sgd_) {
      const int64_t n = local_sgd_->synchronizations();
      line << "; local SGD" << (resumed ? " (this attempt)" : "") << ": " << n << " averagings of "
           << std::setprecision(1)
           << static_cast<double>(local_sgd_->bytes_averaged()) / std::max<int64_t>(1, n) /
                  (1024.0 * 1024.0)
           << " MiB";
    }
    if (resumed) line << "; the run: " << r.steps << " steps, " << r.epochs << " epochs";
    if (!r.weights.empty()) line << "; weights " << r.weights.string();
    *options_.out << line.str() << std::endl;
  }

  Position position() const {
    const auto loader = input_->state();
    return {step_, loader.epoch, loader.consumed};
  }

  // Continues where the checkpoint stopped. At the same world size and batch the step counter and
  // the schedule continue exactly; otherwise the global data position carries over and the
  // counter restarts at the equivalent step of the new per-step batch.
  void resume_from(const Checkpointer::Resumed& r) {
    start_epoch_ = r.position.epoch;
    start_consumed_ = r.position.consumed;
    const bool same = r.world_size == comm_.size();
    step_ =
        same ? r.position.step
             : r.position.epoch * plan_.steps_per_epoch + r.position.consumed / plan_.global_batch;
    first_step_ = step_;
    if (comm_.rank() == 0 && options_.out) {
      *options_.out << rt::rank_prefix() << "resuming from checkpoint step " << r.position.step
                    << " (epoch " << r.position.epoch + 1 << ", sample " << r.position.consumed
                    << " of its order)";
      if (!same) {
        *options_.out << " saved by " << r.world_size << " ranks, now " << comm_.size()
                      << ": continuing at step " << step_ << " of " << plan_.total_steps;
      }
      *options_.out << std::endl;
    }
  }

  void train_epoch(int64_t epoch, int64_t consumed) {
    model_->train();
    input_->start_epoch(epoch, consumed);
    const auto ce = torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(
        spec_.train.label_smoothing);
    auto last_step_end = Clock::now();
    while (step_ < plan_.total_steps) {
      // The step's work up to the agreement: on a GPU nothing in it waits for the device
      // (HPCTRAIN_CUDA_SYNC_DEBUG checks that).
      std::optional<SyncDebugScope> no_sync;
      if (sync_debug_) no_sync.emplace(sync_debug_);
      const auto step_start = Clock::now();
      progress::enter(progress::Phase::kDataWait);
      auto batch = input_->next();
      if (!batch) break;
      const double lr = schedule_->lr_at(step_);
      set_lr(*optimizer_, lr);
      trace_batch(*batch);
      const at::Tensor loss = forward_backward(*batch, ce);
      // This rank's own work in the step, before it first waits for its peers (the straggler
      // report's measure; on GPUs the host's view: data waits and launches, not kernel time).
      busy_window_.push_back(seconds_since(step_start));
      grad_sync_->finish();
      progress::enter(progress::Phase::kAgreement);
      // One small all-reduce per step settles everything the ranks must decide alike
      // (train/agreement.hpp).
      Agreed agreed;
      if (deferred_) {
        agree_on_device();
      } else {
        agreed = agree_on_host();
      }
      if (local_sgd_ && local_sgd_->due()) {
        progress::enter(progress::Phase::kAverage);
        local_sgd_->synchronize();
      }
      no_sync.reset();
      if (deferred_) agreed = agreement_->previous();  // the step before's
      window_loss_ += loss.detach().to(at::kDouble);
      ++window_steps_;
      ++step_;
      progress::set_step(step_);
      progress::enter(progress::Phase::kStepEnd);
      end_step(epoch, lr, agreed);
      const auto now = Clock::now();
      step_seconds_ = std::chrono::duration<double>(now - last_step_end).count();
      last_step_end = now;
      if (stop_) return;
    }
  }

  // Diagnostics (options.trace_samples): the batch's epoch, step and samples.
  void trace_batch(const DeviceBatch& batch) {
    if (!trace_) return;
    *trace_ << batch.epoch << ' ' << step_;
    for (const int64_t sample : batch.samples) *trace_ << ' ' << sample;
    *trace_ << '\n' << std::flush;
  }

  // The step's gradients, on their way to the other ranks (GradSync); returns the loss.
  at::Tensor forward_backward(const DeviceBatch& batch,
                              const torch::nn::functional::CrossEntropyFuncOptions& ce) {
    optimizer_->zero_grad();
    // Local SGD: after its warm-up the gradients stay on each rank (no all-reduce).
    if (local_sgd_) {
      const bool local = local_sgd_->local(step_);
      grad_sync_->set_enabled(!local);
      if (local) local_sgd_->start_local_step();
    }
    grad_sync_->prepare();
    at::Tensor loss;
    progress::enter(progress::Phase::kForward);
    {
      AutocastGuard autocast(device_.type(), spec_.train.precision);
      loss = torch::nn::functional::cross_entropy(model_->forward(batch.images), batch.labels, ce);
    }
    progress::enter(progress::Phase::kBackward);
    (scaler_ ? scaler_->scale(loss) : loss).backward();
    return loss;
  }

  // After the step (the counter advanced): acts on the agreement this step may act on (none on
  // the device path's first step), logs, and saves when due or stopping.
  void end_step(int64_t epoch, double lr, const Agreed& agreed) {
    const float* slots = agreed.slots ? agreed.slots : kNothingAgreed;
    checkpointer_->settle(slots, agreed.gathered_at);
    if (auto reason = stop_reason(slots, preempt::pending_stop_signal())) {
      stop_ = true;
      stop_reason_ = std::move(*reason);
    }
    if (step_ == first_step_ + 1) log_started(epoch);
    if (step_ % spec_.train.log_every_steps == 0 || step_ == plan_.total_steps || stop_) {
      log_train(epoch, lr);
    }
    if (stop_ ||
        (step_ < plan_.total_steps && checkpointer_->due(step_, slots, agreed.gathered_at))) {
      save(/*finished=*/false, /*allow_async=*/!stop_);
    }
  }

  // This rank's contributions to the step's agreement (the fp16 verdict aside).
  void contribute(float* slots) {
    contribute_stop(slots, preempt::pending_stop_signal());
    checkpointer_->contribute(slots, step_seconds_);
  }

  // The CPU path: the agreement is all-reduced and read at once, and the step taken (or, fp16,
  // skipped) on the host's verdict.
  Agreed agree_on_host() {
    float slots[Agreement::kSize] = {};
    at::Tensor found_inf;
    if (scaler_) {
      found_inf = scaler_->unscale(params_.trainable);
      slots[Agreement::kFoundInf] = found_inf.item<float>();
    }
    contribute(slots);
    const Agreed agreed = agreement_->reduce_now(slots, step_);
    const bool skip = agreed.slots[Agreement::kFoundInf] > 0;
    if (scaler_) scaler_->update(found_inf.fill_(skip ? 1.0f : 0.0f));
    if (!skip) {
      if (spec_.train.grad_clip_norm) {
        torch::nn::utils::clip_grad_norm_(params_.trainable, *spec_.train.grad_clip_norm);
      }
      optimizer_->step();
    }
    return agreed;
  }

  // The device path: nothing waits for the device. The fp16 verdict goes into the agreement on
  // the device and the fused optimizer skips on it there; the agreed values come back to the
  // host asynchronously and are acted on one step late (AgreementExchange::previous()).
  void agree_on_device() {
    float slots[Agreement::kSize] = {};
    contribute(slots);
    at::Tensor agreement = agreement_->stage(slots);
    at::Tensor found_inf;
    if (scaler_) {
      agreement.narrow(0, Agreement::kFoundInf, 1).copy_(scaler_->unscale(params_.trainable));
    }
    agreement_->reduce(agreement);
    if (scaler_) {
      found_inf = agreement.narrow(0, Agreement::kFoundInf, 1).clamp_max(1);
      scaler_->update(found_inf);
    }
    if (spec_.train.grad_clip_norm) {
      clip_grad_norm_on_device(params_.trainable, *spec_.train.grad_clip_norm);
    }
    fused_->step(found_inf);
    agreement_->send_home(agreement, step_);
  }

  // Saves a checkpoint of the current position (the device path's step counts first).
  void save(bool finished, bool allow_async) {
    progress::enter(progress::Phase::kCheckpoint);
    if (fused_) fused_->flush_state();
    checkpointer_->save(*state_, position(), finished, allow_async);
  }

  // The first step of this process: where it resumed and on how many ranks (docs/resilience.md
  // times a recovery from it).
  void log_started(int64_t epoch) {
    if (comm_.rank() != 0 || !metrics_) return;
    nlohmann::json record = {{"kind", "started"},       {"step", step_},
                             {"epoch", epoch + 1},      {"world_size", comm_.size()},
                             {"resumed_from", nullptr}, {"wall_time", unix_time()}};
    if (resumed_) record["resumed_from"] = resumed_->position.step;
    if (!options_.step_tag.empty()) record["tag"] = options_.step_tag;
    metrics_->write(record);
  }

  void log_train(int64_t epoch, double lr) {
    // One all-reduce per log line: the loss summed over the window and the ranks, and every
    // rank's busy time per step (its p50 and p95 over the window) in its own slots.
    const int64_t world = comm_.size();
    const auto [p50, p95] = busy_percentiles();
    at::Tensor gathered =
        at::zeros({1 + 2 * world}, at::TensorOptions().dtype(at::kDouble).device(device_));
    gathered.narrow(0, 0, 1).copy_(window_loss_);
    gathered.narrow(0, 1 + comm_.rank(), 1).fill_(p50);
    gathered.narrow(0, 1 + world + comm_.rank(), 1).fill_(p95);
    comm_.all_reduce(gathered);
    const at::Tensor host = gathered.cpu();
    const double* all = host.data_ptr<double>();
    // The window: this attempt's steps since its last log line (or since it started).
    const int64_t steps = window_steps_;
    const int64_t window_first = step_ - steps + 1;
    const double mean_loss = all[0] / static_cast<double>(steps * world);
    const double seconds = seconds_since(window_start_);
    const double images_per_s = static_cast<double>(steps * plan_.global_batch) / seconds;
    const double scale = scaler_ ? scaler_->current_scale() : 1.0;
    window_loss_.zero_();
    window_steps_ = 0;
    window_start_ = Clock::now();
    watch_stragglers(all + 1);
    if (comm_.rank() != 0) return;
    report_stragglers(all + 1, all + 1 + world);
    const double eta = static_cast<double>(plan_.total_steps - step_) * seconds / steps;
    const double wall_time = unix_time();
    if (metrics_) {
      metrics_->write({{"kind", "train"},
                       {"step", step_},
                       {"epoch", epoch + 1},
                       {"loss", mean_loss},
                       {"lr", lr},
                       {"images_per_s", images_per_s},
                       {"window_first_step", window_first},
                       {"window_seconds", seconds},
                       {"loss_scale", scale},
                       {"wall_time", wall_time}});
    }
    if (events_) {
      events_->write(step_, wall_time,
                     {{"train/loss", mean_loss},
                      {"train/lr", lr},
                      {"train/images_per_s", images_per_s},
                      {"train/loss_scale", scale}});
    }
    if (options_.out) {
      char line[256];
      std::snprintf(line, sizeof line,
                    "epoch %lld/%lld step %lld/%lld loss %.4f lr %.5f images/s %.0f (steps "
                    "%lld-%lld) scale %g eta %s",
                    static_cast<long long>(epoch + 1), static_cast<long long>(spec_.train.epochs),
                    static_cast<long long>(step_), static_cast<long long>(plan_.total_steps),
                    mean_loss, lr, images_per_s, static_cast<long long>(window_first),
                    static_cast<long long>(step_), scale, duration_text(eta).c_str());
      *options_.out << rt::rank_prefix() << line << std::endl;
    }
  }

  // The median and 95th percentile of this rank's busy times since the last log line; clears them.
  std::pair<double, double> busy_percentiles() {
    std::vector<double> v = std::exchange(busy_window_, {});
    if (v.empty()) return {0, 0};
    std::sort(v.begin(), v.end());
    const auto at = [&](double q) {
      return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
    };
    return {at(0.5), at(0.95)};
  }

  // Rank 0: every rank's busy time per step (p50, p95 over the log window) in metrics.jsonl with
  // the window's verdict ("behind_rank": the slowest rank, when clearly behind the median:
  // train/straggler.hpp's compare_ranks), and a line naming that rank.
  void report_stragglers(const double* p50, const double* p95) {
    const int64_t world = comm_.size();
    if (world < 2) return;
    const RankSpread spread = compare_ranks(std::vector<double>(p50, p50 + world));
    const int64_t slowest = spread.slowest;
    if (metrics_) {
      nlohmann::json record = {{"kind", "ranks"},
                               {"step", step_},
                               {"busy_p50_s", std::vector<double>(p50, p50 + world)},
                               {"busy_p95_s", std::vector<double>(p95, p95 + world)},
                               {"slowest_rank", slowest},
                               {"slowest_host", static_cast<size_t>(slowest) < options_.hosts.size()
                                                    ? nlohmann::json(options_.hosts[slowest])
                                                    : nlohmann::json()},
                               {"median_busy_s", spread.median_s},
                               {"slowest_busy_s", spread.slowest_s},
                               {"wall_time", unix_time()}};
      if (spread.behind) record["behind_rank"] = slowest;
      metrics_->write(record);
    }
    if (options_.out && spread.behind) {
      char line[256];
      std::snprintf(line, sizeof line,
                    "straggler: rank %lld%s busy %.3f s a step (p50; p95 %.3f s), %.1fx the "
                    "ranks' median %.3f s; the others wait for it",
                    static_cast<long long>(slowest), host_of(slowest).c_str(), spread.slowest_s,
                    p95[slowest], spread.slowest_s / spread.median_s, spread.median_s);
      *options_.out << rt::rank_prefix() << line << std::endl;
    }
  }

  // resilience.evict_stragglers: every rank reads the same busy times (the all-reduce's result)
  // and so reaches the same verdict with no message (train/straggler.hpp: a node straggler_ratio
  // times the nodes' lower median and 20 ms more, for straggler_windows windows in a row); the
  // ranks then stop as after a stop signal (a checkpoint at this step) and the worker exits
  // kExitEvict; rank 0 first records the node in metrics.jsonl for the batch script.
  void watch_stragglers(const double* p50) {
    const auto& r = spec_.resilience;
    const auto& hosts = options_.hosts;
    if (!r.evict_stragglers || stop_ || step_ >= plan_.total_steps ||
        hosts.size() != static_cast<size_t>(comm_.size())) {
      return;
    }
    if (!straggler_watch_) straggler_watch_ = straggler_watch_from_spec(r);
    const auto verdict = straggler_watch_->observe(
        node_busy_times(hosts, std::vector<double>(p50, p50 + hosts.size())));
    if (!verdict) return;
    char text[320];
    std::snprintf(text, sizeof text,
                  "straggler: node %s busy %.3f s a step (its slowest rank's p50), %.1fx the "
                  "nodes' median %.3f s, for %lld log windows in a row",
                  verdict->node.c_str(), verdict->busy_s, verdict->busy_s / verdict->median_s,
                  verdict->median_s, static_cast<long long>(verdict->windows));
    stop_ = true;
    evicted_ = verdict->node;
    stop_reason_ = std::string(text) + "; evicting the node";
    if (comm_.rank() != 0) return;
    std::vector<int> ranks;
    for (size_t rank = 0; rank < hosts.size(); ++rank) {
      if (hosts[rank] == verdict->node) ranks.push_back(static_cast<int>(rank));
    }
    if (!options_.run_dir.empty()) {
      write_suspects(options_.run_dir, "evict", options_.step_tag, step_, ranks, hosts, text);
    }
  }

  // " (host)" of a rank, when known.
  std::string host_of(int64_t rank) const {
    const auto& hosts = options_.hosts;
    if (rank < 0 || static_cast<size_t>(rank) >= hosts.size() || hosts[rank].empty()) return "";
    return " (" + hosts[rank] + ")";
  }

  // The largest of every rank's `value` (the communicator sums: each rank fills its own slot).
  double max_over_ranks(double value) {
    at::Tensor all =
        at::zeros({comm_.size()}, at::TensorOptions().dtype(at::kDouble).device(device_));
    all[comm_.rank()] = value;
    comm_.all_reduce(all);
    return all.max().item<double>();
  }

  // Every rank must end with the same weights (data parallelism's invariant): each rank hashes
  // its parameters and buffers, says so on stderr ("final weights fnv1a64 0x..." or, with
  // `evaluated_at`, "weights evaluated at step N fnv1a64 0x..."), and the ranks compare the hashes;
  // a difference is an error naming the ranks that disagree with rank 0.
  uint64_t verify_identical_weights(std::optional<int64_t> evaluated_at = std::nullopt) {
    const uint64_t mine = weights_fingerprint(*model_);
    const std::string what = evaluated_at
                                 ? "weights evaluated at step " + std::to_string(*evaluated_at)
                                 : "final weights";
    std::cerr << rt::rank_prefix() << what << " fnv1a64 " << std::hex << "0x" << mine << std::dec
              << std::endl;
    at::Tensor all =
        at::zeros({comm_.size()}, at::TensorOptions().dtype(at::kLong).device(device_));
    all[comm_.rank()] = static_cast<int64_t>(mine);
    comm_.all_reduce(all);
    const at::Tensor host = all.cpu();
    std::string differ;
    for (int64_t r = 1; r < comm_.size(); ++r) {
      if (host[r].item<int64_t>() != host[0].item<int64_t>()) differ += " " + std::to_string(r);
    }
    if (!differ.empty()) {
      HPCTRAIN_THROW(rt::Error, "the ranks' " + what + " differ: rank(s)" + differ +
                                    " disagree with rank 0 (non-deterministic kernels, or a bug)");
    }
    return mine;
  }

  // Local SGD: averages the ranks' models when they took local steps since the last averaging
  // (before an evaluation and at the end).
  void average_diverged() {
    if (local_sgd_ && local_sgd_->diverged()) local_sgd_->synchronize();
  }

  // Batch-norm statistics are computed on each rank's shard; rank 0's are the model's (as DDP's
  // broadcast_buffers), so evaluation and the saved weights agree on every rank.
  void sync_buffers() {
    std::vector<at::Tensor> buffers;
    for (auto& b : model_->buffers()) buffers.push_back(b);
    if (!buffers.empty()) dist::broadcast_from_rank0(comm_, buffers);
  }

  EvalResult run_eval(int64_t epoch) {
    progress::enter(progress::Phase::kEval);
    sync_buffers();
    // Local SGD evaluates one model, the ranks' mean (average_diverged() before): checked, as the
    // ranks' models differ between averagings and each would otherwise score its own on its shard.
    if (local_sgd_) verify_identical_weights(step_);
    model_->eval();
    const auto t0 = Clock::now();
    const spec::Precision precision = spec_.train.precision;
    const at::DeviceType device = device_.type();
    EvalResult r = evaluate(
        [&](const at::Tensor& x) {
          progress::tick();  // a batch evaluated: progress inside the phase
          AutocastGuard autocast(device, precision);
          return model_->forward(x);
        },
        [&](const data::Batch& b) {
          DeviceBatch d =
              to_device_batch(b, data_.val->transform(), device_, spec_.train.channels_last);
          return std::make_pair(d.images, d.labels);
        },
        *data_.val, data_.val_source->size(), comm_);
    model_->train();
    if (comm_.rank() == 0) {
      const double wall_time = unix_time();
      if (metrics_) {
        metrics_->write({{"kind", "eval"},
                         {"step", step_},
                         {"epoch", epoch + 1},
                         {"loss", r.loss},
                         {"top1", r.top1},
                         {"top5", r.top5},
                         {"samples", r.samples},
                         {"seconds", seconds_since(t0)},
                         {"wall_time", wall_time}});
      }
      if (events_) {
        events_->write(step_, wall_time,
                       {{"eval/top1", r.top1}, {"eval/top5", r.top5}, {"eval/loss", r.loss}});
      }
      if (options_.out) {
        char line[192];
        std::snprintf(line, sizeof line,
                      "eval epoch %lld step %lld: top-1 %.2f%% top-5 %.2f%% loss %.4f (%lld "
                      "images, %.1f s)",
                      static_cast<long long>(epoch + 1), static_cast<long long>(step_),
                      100 * r.top1, 100 * r.top5, r.loss, static_cast<long long>(r.samples),
                      seconds_since(t0));
        *options_.out << rt::rank_prefix() << line << std::endl;
      }
    }
    // Evaluation time is not training throughput: the window's clock skips it.
    window_start_ += std::chrono::duration_cast<Clock::duration>(Clock::now() - t0);
    eval_seconds_ += seconds_since(t0);
    return r;
  }

  const spec::Spec& spec_;
  dist::Communicator& comm_;
  TrainOptions options_;
  at::Device device_;

  TrainData data_;
  data::DatasetInfo train_info_;
  InputPath input_path_;
  bool deferred_ = false;  // the device path's agreement and optimizer (agree_on_device)
  std::unique_ptr<DeviceInput> input_;
  std::unique_ptr<FusedStep> fused_;
  std::unique_ptr<AgreementExchange> agreement_;
  int sync_debug_ = 0;  // HPCTRAIN_CUDA_SYNC_DEBUG: 1 warn, 2 error on a host sync in a step
  // resilience.evict_stragglers: the verdict's count of windows in a row (made on the first
  // window), and the node let go (stop_ set for it).
  std::optional<StragglerWatch> straggler_watch_;
  std::string evicted_;
  std::shared_ptr<model::Classifier> model_;
  ModelParams params_;
  std::unique_ptr<dist::GradSync> grad_sync_;
  std::unique_ptr<LocalSgd> local_sgd_;  // train.sync = "local_sgd"
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<GradScaler> scaler_;
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<tensorboard::EventWriter> events_;

  StepPlan plan_;
  int64_t step_ = 0, first_step_ = 0, start_epoch_ = 0, start_consumed_ = 0;
  std::unique_ptr<TrainingState> state_;
  std::unique_ptr<Checkpointer> checkpointer_;
  std::optional<Checkpointer::Resumed> resumed_;
  std::unique_ptr<std::ofstream> trace_;
  bool stop_ = false;
  std::string stop_reason_;
  double step_seconds_ = 0;
  at::Tensor window_loss_;
  std::vector<double> busy_window_;  // this rank's busy seconds of each step since the last log
  int64_t window_steps_ = 0;
  double eval_seconds_ = 0;
  Clock::time_point window_start_;
};

}  // namespace

uint64_t weights_fingerprint(const torch::nn::Module& model) {
  uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a, over the state dict's bytes in order
  for (const auto& item : model::state_dict(model)) {
    const at::Tensor t = item.value().detach().contiguous().cpu();
    const auto* bytes = static_cast<const unsigned char*>(t.data_ptr());
    const size_t n = static_cast<size_t>(t.numel()) * t.element_size();
    for (size_t i = 0; i < n; ++i) {
      hash ^= bytes[i];
      hash *= 0x100000001b3ULL;
    }
  }
  return hash;
}

TrainResult train(const spec::Spec& spec, dist::Communicator& comm, const TrainOptions& options) {
  return Trainer(spec, comm, options).run();
}

}  // namespace hpctrain::train
