#include "train/trainer.hpp"

#include <sys/resource.h>

#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "common/error.hpp"
#include "common/run_layout.hpp"
#include "common/time.hpp"
#include "dist/grad_sync.hpp"
#include "dist/progress.hpp"
#include "model/weights.hpp"
#include "preempt/signals.hpp"
#include "spec/spec.hpp"
#include "train/agreement.hpp"
#include "train/builders.hpp"
#include "train/checkpointing.hpp"
#include "train/divergence.hpp"
#include "train/log_window.hpp"
#include "train/replay_plan.hpp"
#include "train/reporter.hpp"
#include "train/schedule.hpp"
#include "train/straggler.hpp"
#include "train/train_input.hpp"
#include "train/train_step.hpp"
#include "train/validator.hpp"

namespace hpctrain::train {
namespace {

double peak_rss_mib() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

// What the loop itself needs of the spec.
struct TrainerConfig {
  int64_t epochs = 0, eval_every_epochs = 0, log_every_steps = 1;
  std::string arch, precision;  // their names, for the log
  int64_t batch_size = 0;       // per rank
  int64_t max_rollbacks = 0;    // resilience.max_rollbacks
  bool replay_on_divergence = false;
  std::string srun_step_tag;      // TrainOptions::srun_step_tag
  std::filesystem::path weights;  // where rank 0 writes the final weights; empty: nowhere
};

TrainerConfig trainer_config_from_spec(const spec::Spec& spec, const TrainOptions& options) {
  TrainerConfig c;
  c.epochs = spec.train.epochs;
  c.eval_every_epochs = spec.train.eval_every_epochs;
  c.log_every_steps = spec.train.log_every_steps;
  c.arch = spec::name_of(spec.model.arch);
  c.precision = spec::name_of(spec.train.precision);
  c.batch_size = spec.train.batch_size;
  c.max_rollbacks = spec.resilience.max_rollbacks;
  c.replay_on_divergence = spec.resilience.replay_on_divergence;
  c.srun_step_tag = options.srun_step_tag;
  if (!options.run_dir.empty()) c.weights = options.run_dir / layout::kWeights;
  return c;
}

// The parts a Trainer composes, each built from the spec by its adapter.
struct TrainerParts {
  TrainerConfig config;
  StepPlan plan;
  std::unique_ptr<TrainInput> input;
  std::unique_ptr<TrainStep> train_step;
  std::unique_ptr<Validator> validator;
  std::unique_ptr<Checkpointer> checkpointer;
  std::unique_ptr<Reporter> reporter;
  std::unique_ptr<StragglerMonitor> stragglers;
  DivergenceOptions divergence;
  // Another rank's training input, for the replay on divergence (train/replay_plan.hpp).
  std::function<std::unique_ptr<TrainInput>(int rank)> input_of_rank;
};

// The parts in an order that matters: the data before the model (the model seeds torch's
// generator), the model before the optimizer; the checkpoint restores them all later
// (Trainer::restore()).
TrainerParts trainer_from_spec(const spec::Spec& spec, dist::Communicator& comm,
                               const TrainOptions& options) {
  const at::Device device = comm.device();
  const TrainHooks& hooks = options.hooks;
  configure_backends_from_spec(spec, device, hooks.fp16_on_cpu);
  // The device path (uint8 batches normalised on the device, the agreement read one step late,
  // fused optimizer kernels) on GPUs, or on the CPU when asked, to test it.
  const InputPath path = choose_input_path(device, hooks.device_path_on_cpu);
  TrainData data = data_from_spec(spec, comm.rank(), comm.size(), path);
  const data::DatasetInfo info = data.train_source->info();
  std::shared_ptr<model::Classifier> model = model_from_spec(spec, info.channels, device, comm);
  TrainerParts parts;
  parts.config = trainer_config_from_spec(spec, options);
  StepParts step;
  step.params = model_params(*model);
  step.grad_sync = std::make_unique<dist::GradSync>(step.params.names, step.params.all, comm,
                                                    dist::grad_sync_options_from_spec(spec));
  step.local_sgd = local_sgd_from_spec(spec, *model, step.params.named, comm);
  parts.input = std::make_unique<TrainInput>(data.train_source, std::move(data.train), device,
                                             spec.train.channels_last, path,
                                             open_trace(hooks, options.srun_step_tag, comm.rank()));
  parts.plan = step_plan_from_spec(spec, info, parts.input->steps_per_epoch(), comm.size());
  step.schedule = std::make_unique<LrSchedule>(schedule_config_from_spec(
      spec, parts.plan.global_batch, parts.plan.steps_per_epoch, parts.plan.total_steps));
  step.optimizer = optimizer_from_spec(spec, step.params.named, step.schedule->lr_at(0));
  step.scaler = scaler_from_spec(spec, hooks, device);
  parts.reporter =
      std::make_unique<Reporter>(ReporterOptions{comm.rank() == 0, options.out, options.run_dir});
  parts.validator = std::make_unique<Validator>(validator_options_from_spec(spec), data.val_source,
                                                std::move(data.val), *model, comm);
  parts.train_step =
      std::make_unique<TrainStep>(train_step_options_from_spec(spec, hooks, comm.rank()), model,
                                  std::move(step), parts.input->info(), path.device, comm);
  CheckpointOptions checkpointing =
      checkpoint_options_from_spec(spec, options.run_dir, options.job_end_time, hooks);
  checkpointing.hosts = options.hosts;
  parts.checkpointer = std::make_unique<Checkpointer>(checkpointing, comm, options.out);
  parts.stragglers = std::make_unique<StragglerMonitor>(
      straggler_monitor_from_spec(spec.resilience, options.hosts));
  parts.divergence = divergence_options_from_spec(spec);
  if (spec.resilience.replay_on_divergence) {
    parts.input_of_rank = [spec, device, path, &comm](int rank) {
      TrainData other = data_from_spec(spec, rank, comm.size(), path);
      return std::make_unique<TrainInput>(other.train_source, std::move(other.train), device,
                                          spec.train.channels_last, path, nullptr);
    };
  }
  return parts;
}

// Where the run stands: the step counter, where this process began, the epoch position it
// resumed at, and the last step's duration.
struct Counters {
  int64_t step = 0, first_step = 0, start_epoch = 0, start_consumed = 0;
  double last_step_s = 0;
  double checkpoint_s = 0;  // blocked in saves since the last train line (its checkpoint_seconds)
};

// The loss diverged over steps first_step..last_step: the run rolls back when the step ends.
struct PendingRollback {
  std::string verdict;
  int64_t first_step = 0, last_step = 0;
};

// The divergence guard and what follows its verdicts: the rollback due, the run's rollbacks so
// far, and the replay's source of another rank's batches.
struct Divergence {
  DivergenceGuard guard;
  std::optional<PendingRollback> pending;
  int64_t rollbacks = 0;      // the run's, from the checkpoint resumed and this attempt's
  int64_t skipped_steps = 0;  // this attempt's steps skipped by rollbacks
  std::function<std::unique_ptr<TrainInput>(int rank)> input_of_rank;  // replay_on_divergence
};

// Why the run stops before its end, once it does.
struct StopState {
  bool requested = false;
  std::string reason;
  std::string evicted;      // the straggler's node let go (resilience.evict_stragglers)
  bool time_limit = false;  // before the job's time limit, not for a signal
};

class Trainer {
 public:
  Trainer(TrainerParts parts, dist::Communicator& comm)
      : comm_(comm),
        config_(std::move(parts.config)),
        plan_(parts.plan),
        input_(std::move(parts.input)),
        train_step_(std::move(parts.train_step)),
        validator_(std::move(parts.validator)),
        checkpointer_(std::move(parts.checkpointer)),
        reporter_(std::move(parts.reporter)),
        stragglers_(std::move(parts.stragglers)),
        window_(comm),
        divergence_{DivergenceGuard(parts.divergence), std::nullopt, 0, 0,
                    std::move(parts.input_of_rank)} {}

  TrainResult run() {
    restore();
    TrainResult result;
    if (resumed_ && resumed_->finished) {
      reporter_->report(AlreadyFinished{at_.step});
      result.steps = at_.step;
      result.already_finished = true;
      return result;
    }
    const auto t0 = Clock::now();
    window_.start();
    result.first_step = at_.first_step;
    result.resumed = resumed_.has_value();
    // The epochs the run had begun before this attempt (a position mid-epoch has begun its epoch).
    result.epochs = at_.start_epoch + (at_.start_consumed > 0 ? 1 : 0);
    int64_t epoch = at_.start_epoch, consumed = at_.start_consumed;
    while (epoch < config_.epochs && at_.step < plan_.total_steps) {
      train_epoch(epoch, consumed);
      if (divergence_.pending) {
        // Training goes on where the skip ended, in this epoch or a later one.
        const data::LoaderState at = roll_back();
        epoch = at.epoch;
        consumed = at.consumed;
        if (stop_.requested) break;
        continue;
      }
      result.epochs = epoch + 1;
      if (stop_.requested) break;
      evaluate_after(epoch, result);
      ++epoch;
      consumed = 0;
    }
    progress::enter(progress::Phase::kFinishing);
    result.steps = at_.step;
    result.train_seconds = seconds_since(t0) - validator_->seconds();  // training alone
    const int64_t trained = at_.step - at_.first_step - divergence_.skipped_steps;
    result.images_per_s =
        trained > 0 ? static_cast<double>(trained * plan_.global_batch) / result.train_seconds : 0;
    describe_static_step();
    return stop_.requested ? stopped(result) : finished(result);
  }

 private:
  // train.cuda_graphs: what the static step did, on each rank's output.
  void describe_static_step() const {
    const StaticStep* s = train_step_->static_step();
    if (!s) return;
    std::cout << "rank " << comm_.rank() << ": static step: "
              << (s->graphs().capture()
                      ? "CUDA graphs, " + std::to_string(s->graphs().captures()) +
                            " segment captures, " + std::to_string(s->graphs().replays()) +
                            " replays, " + std::to_string(s->graphs().graph_nodes()) +
                            " graph nodes a step"
                      : std::string("the eager twin (no capture)"))
              << "; " << s->addresses().size() << " tensors at fixed addresses, checked in "
              << s->checked_steps() << " steps" << std::endl;
  }

  // Restores the newest checkpoint into the parts, and says what is trained.
  void restore() {
    resumed_ = checkpointer_->restore(train_step_->state());
    if (resumed_) {
      resume_from(*resumed_);
      divergence_.rollbacks = resumed_->position.rollbacks;
    }
    progress::begin_training(at_.step);
    train_step_->restored();
    reporter_->report(RunDescribed{config_.arch, config_.precision, input_->info(), comm_.size(),
                                   config_.batch_size, plan_.steps_per_epoch, plan_.total_steps,
                                   at::get_num_threads(), input_->path().device});
  }

  // Continues where the checkpoint stopped. At the same world size and batch the step counter and
  // the schedule continue exactly; otherwise the global data position carries over and the
  // counter restarts at the equivalent step of the new per-step batch.
  void resume_from(const Resumed& r) {
    at_.start_epoch = r.position.epoch;
    at_.start_consumed = r.position.consumed;
    at_.step = step_of(r);
    at_.first_step = at_.step;
    reporter_->report(Resuming{r.position.step, r.position.epoch, r.position.consumed, r.world_size,
                               comm_.size(), at_.step, plan_.total_steps});
  }

  // The step counter at a checkpoint's position: its own at the same world size, else the
  // equivalent step of this run's per-step batch.
  int64_t step_of(const Resumed& r) const {
    if (r.world_size == comm_.size()) return r.position.step;
    return r.position.epoch * plan_.steps_per_epoch + r.position.consumed / plan_.global_batch;
  }

  void train_epoch(int64_t epoch, int64_t consumed) {
    train_step_->model().train();
    input_->start_epoch(epoch, consumed);
    const auto contribute = [this](float* slots) {
      contribute_stop(slots, preempt::pending_stop_signal());
      checkpointer_->contribute(slots, at_.last_step_s);
    };
    auto last_step_end = Clock::now();
    while (at_.step < plan_.total_steps) {
      const std::optional<StepTaken> taken = train_step_->run(*input_, at_.step, contribute);
      if (!taken) break;
      window_.add_step(taken->loss, taken->busy_s);
      ++at_.step;
      progress::set_step(at_.step);
      progress::enter(progress::Phase::kStepEnd);
      end_step(epoch, taken->lr, taken->agreed);
      const auto now = Clock::now();
      at_.last_step_s = std::chrono::duration<double>(now - last_step_end).count();
      last_step_end = now;
      if (stop_.requested || divergence_.pending) return;
    }
  }

  // After the step (the counter advanced): acts on the agreement this step may act on (none on
  // the device path's first step), logs, and saves when due or stopping.
  void end_step(int64_t epoch, double lr, const Agreed& agreed) {
    checkpointer_->settle(agreed);
    const float* slots = agreed.slots ? agreed.slots : kNothingAgreed;
    if (auto reason = stop_reason(slots, preempt::pending_stop_signal())) {
      stop_.requested = true;
      stop_.reason = std::move(*reason);
      stop_.time_limit = slots[Agreement::kDeadline] > 0 && slots[Agreement::kStop] <= 0;
    }
    if (at_.step == at_.first_step + 1) {
      reporter_->report(
          Started{at_.step, epoch + 1, comm_.size(),
                  resumed_ ? std::optional<int64_t>(resumed_->position.step) : std::nullopt,
                  config_.srun_step_tag, unix_time()});
    }
    if (at_.step % config_.log_every_steps == 0 || at_.step == plan_.total_steps ||
        stop_.requested) {
      report_window(epoch, lr);
    }
    if (divergence_.pending) return;  // nothing of this step is saved
    const auto save_start = Clock::now();
    save(checkpointer_->due(at_.step, plan_.total_steps, stop_.requested, agreed),
         /*finished=*/false);
    at_.checkpoint_s += seconds_since(save_start);
  }

  // The log window: one all-reduce of its figures, the stragglers judged, the line reported.
  void report_window(int64_t epoch, double lr) {
    const WindowFigures f = window_.close(at_.step);
    const double loss_scale = train_step_->loss_scale();
    if (!stop_.requested && at_.step < plan_.total_steps) watch_stragglers(f.busy_p50);
    const double wall_time = unix_time();
    if (const auto spread = stragglers_->compare(f.busy_p50)) {
      reporter_->report(RanksCompared{at_.step, f.busy_p50, f.busy_p95, *spread,
                                      stragglers_->host(spread->slowest), wall_time});
    }
    Trained t;
    t.step = at_.step;
    t.epoch = epoch + 1;
    t.epochs = config_.epochs;
    t.total_steps = plan_.total_steps;
    t.first_step = f.first_step;
    t.loss = f.mean_loss;
    t.lr = lr;
    t.images_per_s = static_cast<double>(f.steps * plan_.global_batch) / f.seconds;
    t.seconds = f.seconds;
    t.loss_scale = loss_scale;
    t.eta_s = static_cast<double>(plan_.total_steps - at_.step) * f.seconds /
              static_cast<double>(f.steps);
    t.checkpoint_seconds = at_.checkpoint_s;
    at_.checkpoint_s = 0;
    t.wall_time = wall_time;
    reporter_->report(t);
    // After the line: metrics.jsonl keeps the loss that diverged.
    if (auto verdict = divergence_.guard.watch(f.first_step, at_.step, f.mean_loss, loss_scale)) {
      divergence_found(*verdict, divergence_.guard.offending_from(f.first_step, at_.step));
    }
  }

  // The loss diverged over steps first_step..at_.step (every rank found it at the same step):
  // the run rolls back when the step ends, or stops as diverged once it has rolled back
  // resilience.max_rollbacks times.
  void divergence_found(const std::string& verdict, int64_t first_step) {
    if (divergence_.rollbacks >= config_.max_rollbacks) {
      diverged(config_.max_rollbacks == 0
                   ? verdict + " (resilience.max_rollbacks = 0: no rollback)"
                   : verdict + "; the run rolled back " + std::to_string(divergence_.rollbacks) +
                         " times already (resilience.max_rollbacks = " +
                         std::to_string(config_.max_rollbacks) + ")");
    }
    // A rollback now would skip the rest of training and end on the checkpoint's weights, a run
    // called completed that never trained past its divergence.
    if (at_.step >= plan_.total_steps) {
      diverged(verdict +
               "; the last steps of training diverged, and a rollback would skip to the "
               "end");
    }
    divergence_.pending = PendingRollback{verdict, first_step, at_.step};
  }

  // The rollback (collective, every rank alike): restores the newest checkpoint before the
  // offending steps, skips the samples of every step from it through the last offending one (the
  // data position is exact, so the skip is the same on a rerun) and saves that position at once,
  // so that an attempt that resumes after this goes on past the skipped samples. Returns the
  // position training goes on from.
  data::LoaderState roll_back() {
    const PendingRollback r = *std::exchange(divergence_.pending, std::nullopt);
    progress::enter(progress::Phase::kCheckpoint);
    checkpointer_->drain();
    const std::optional<Resumed> back =
        checkpointer_->restore(train_step_->state(), r.first_step - 1);
    if (!back) {
      diverged(r.verdict + "; no committed checkpoint before step " + std::to_string(r.first_step) +
               " to roll back to");
    }
    train_step_->restored();
    const int64_t to_step = step_of(*back);
    if (divergence_.input_of_rank && comm_.size() > 1 && !train_step_->local_sgd()) {
      if (replay_finds_fault(r, *back, to_step)) return input_->state();  // stopping
      // The replay moved the batch-norm statistics: the checkpoint again.
      checkpointer_->restore(train_step_->state(), r.first_step - 1);
      train_step_->restored();
    }
    const int64_t skipped = r.last_step - to_step;
    const data::LoaderState at =
        input_->skip(back->position.epoch, back->position.consumed, skipped, plan_.global_batch);
    at_.step = r.last_step;
    divergence_.skipped_steps += skipped;
    progress::set_step(at_.step);
    ++divergence_.rollbacks;
    window_.discard();
    divergence_.guard.rolled_back();
    reporter_->report(RolledBack{r.last_step, to_step, skipped * plan_.global_batch,
                                 divergence_.rollbacks, config_.max_rollbacks, r.verdict,
                                 unix_time()});
    const auto save_start = Clock::now();
    const bool committed = save(SaveKind::kBlocking, /*finished=*/false);
    at_.checkpoint_s += seconds_since(save_start);
    if (!committed) {
      HPCTRAIN_THROW(rt::Error, "the checkpoint after the rollback (step " +
                                    std::to_string(at_.step) +
                                    ") was not committed (the lines above say why)");
    }
    return at;
  }

  // Every rank reached the same verdict at the same step (the window's figures are all-reduced):
  // each stops with DivergedError (kExitDiverged), saving nothing; a save in flight from before
  // ends as it would.
  [[noreturn]] void diverged(const std::string& verdict) {
    checkpointer_->drain();
    const int64_t last = checkpointer_->last_committed();
    HPCTRAIN_THROW(rt::DivergedError,
                   "the loss diverged at step " + std::to_string(at_.step) + ": " + verdict +
                       "; last committed checkpoint: " +
                       (last >= 0 ? "step " + std::to_string(last) : std::string("none")));
  }

  // resilience.replay_on_divergence (train/replay_plan.hpp; collective): every rank recomputes
  // its own batches of the offending steps and those of the ranks it witnesses, from the weights
  // just restored; the digests go to every rank in one all-reduce. A node (on one node, a rank) in
  // every disagreement is faulty: the ranks stop as for a straggler, saving nothing, and the worker
  // exits for the node to be let go (true). Otherwise the loss itself diverged (false).
  bool replay_finds_fault(const PendingRollback& r, const Resumed& back, int64_t to_step) {
    const int world = comm_.size(), rank = comm_.rank();
    std::vector<std::string> hosts(world);
    for (int q = 0; q < world; ++q) hosts[q] = stragglers_->host(q).value_or("");
    const std::vector<int> witness = witnesses(hosts);
    const int64_t steps = r.last_step - r.first_step + 1;
    at::Tensor digests = at::zeros({world, 2, steps, 3}, at::kDouble);
    // Deterministic kernels for the recomputation (cuDNN's autotuner may pick another algorithm on
    // each GPU).
    auto& context = at::globalContext();
    const bool deterministic = context.deterministicCuDNN(), benchmark = context.benchmarkCuDNN();
    context.setDeterministicCuDNN(true);
    context.setBenchmarkCuDNN(false);
    const auto recompute = [&](TrainInput& input, int of, int role) {
      input.skip(back.position.epoch, back.position.consumed, r.first_step - 1 - to_step,
                 plan_.global_batch);
      for (int64_t s = 0; s < steps; ++s) {
        std::optional<DeviceBatch> batch = input.next(r.first_step - 1 + s);
        if (!batch) {  // the window goes on into the next epoch
          input.start_epoch(input.state().epoch + 1, 0);
          batch = input.next(r.first_step - 1 + s);
        }
        if (!batch) break;
        const std::array<double, 3> d = train_step_->witness(*batch);
        for (int k = 0; k < 3; ++k) digests[of][role][s][k] = d[k];
      }
    };
    recompute(*input_, rank, 0);
    for (const int of : witnessed_by(witness, rank)) {
      const std::unique_ptr<TrainInput> theirs = divergence_.input_of_rank(of);
      recompute(*theirs, of, 1);
    }
    context.setDeterministicCuDNN(deterministic);
    context.setBenchmarkCuDNN(benchmark);
    at::Tensor all = digests.to(comm_.device());
    comm_.all_reduce(all);  // each slot is one rank's
    all = all.cpu().contiguous();
    const auto at = all.accessor<double, 4>();
    const auto same = [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); };
    std::vector<std::pair<int, int>> disagreeing;
    for (int q = 0; q < world; ++q) {
      bool agree = true;
      for (int64_t s = 0; s < steps; ++s) {
        for (int k = 0; k < 3; ++k) agree = agree && same(at[q][0][s][k], at[q][1][s][k]);
      }
      if (!agree && witness[q] != q) disagreeing.emplace_back(q, witness[q]);
    }
    const std::string recomputed = "steps " + std::to_string(r.first_step) + "-" +
                                   std::to_string(r.last_step) + "'s batches, recomputed on " +
                                   "every rank and its witness from the checkpoint of step " +
                                   std::to_string(to_step);
    const std::optional<Fault> fault = fault_of(disagreeing, hosts);
    if (!fault) {
      reporter_->report(
          Replayed{r.last_step, disagreeing.empty()
                                    ? recomputed + ": every result agrees; the loss itself diverged"
                                    : recomputed + ": " + std::to_string(disagreeing.size()) +
                                          " ranks' results differ from their witnesses', with no "
                                          "one node in every disagreement; rolling back"});
      return false;
    }
    std::string ranks_text;
    for (const int q : fault->ranks)
      ranks_text += (ranks_text.empty() ? "" : ", ") + std::to_string(q);
    const std::string who = fault->host.empty()
                                ? "rank " + ranks_text
                                : "node " + fault->host + " (ranks " + ranks_text + ")";
    const std::string message = "silent data corruption: " + who +
                                " computed other results than its witnesses on other ranks for the "
                                "same batches from the same weights (" +
                                recomputed + ")";
    stop_.requested = true;
    stop_.evicted = fault->host.empty() ? hosts[fault->ranks.front()] : fault->host;
    stop_.reason = message + "; evicting the node";
    reporter_->report(Evicting{records::MetricsKind::kCorrupt, r.last_step, fault->ranks, hosts,
                               config_.srun_step_tag, message});
    return true;
  }

  // resilience.evict_stragglers: every rank reads the same busy times (the window's all-reduce)
  // and so reaches the same verdict with no message; the ranks then stop as after a stop signal
  // (a checkpoint at this step) and the worker exits kExitEvict; rank 0 first records the node
  // in metrics.jsonl for the step supervisor.
  void watch_stragglers(const std::vector<double>& p50) {
    const std::optional<Eviction> e = stragglers_->watch(p50);
    if (!e) return;
    stop_.requested = true;
    stop_.evicted = e->node;
    stop_.reason = e->message + "; evicting the node";
    std::vector<std::string> hosts;
    for (int r = 0; r < comm_.size(); ++r) hosts.push_back(stragglers_->host(r).value_or(""));
    reporter_->report(Evicting{records::MetricsKind::kEvict, at_.step, e->ranks, hosts,
                               config_.srun_step_tag, e->message});
  }

  // After `epoch`: evaluates when due (every eval_every_epochs, and after the last).
  void evaluate_after(int64_t epoch, TrainResult& result) {
    const bool last = epoch + 1 == config_.epochs || at_.step >= plan_.total_steps;
    const int64_t every = config_.eval_every_epochs;
    if (!validator_->enabled() || !(last || (every > 0 && (epoch + 1) % every == 0))) return;
    train_step_->average_diverged();  // one model to evaluate
    result.eval = validator_->run(at_.step);
    // Evaluation time is not training throughput: the window's clock skips it.
    window_.exclude(validator_->last_seconds());
    reporter_->report(
        Evaluated{at_.step, epoch + 1, *result.eval, validator_->last_seconds(), unix_time()});
  }

  // Saves a checkpoint of the current position as `kind` says; false when it was written at once
  // and not committed.
  bool save(SaveKind kind, bool finished) {
    if (kind == SaveKind::kNone) return true;
    // No checkpoint of weights that a non-finite loss came from (fp32 and bf16; in fp16 the loss
    // scaler skips such steps): one all-reduce per save.
    if (!divergence_.guard.fp16() && !window_.finite_so_far()) {
      const std::string verdict =
          "a loss since the last log line is not finite (found before the checkpoint of step " +
          std::to_string(at_.step) + ", which is not written)";
      if (finished) diverged(verdict);
      divergence_found(verdict, at_.step - window_.steps() + 1);
      return true;
    }
    progress::enter(progress::Phase::kCheckpoint);
    train_step_->flush();
    const data::LoaderState loader = input_->state();
    return checkpointer_->save(train_step_->state(),
                               {at_.step, loader.epoch, loader.consumed, divergence_.rollbacks},
                               finished, kind);
  }

  TrainResult stopped(TrainResult result) {
    checkpointer_->drain();
    result.stopped = true;
    result.time_limit = stop_.time_limit;
    result.evicted = stop_.evicted;
    reporter_->report(
        Stopping{at_.step, checkpointer_->last_committed(), stop_.reason, !stop_.evicted.empty()});
    return result;
  }

  TrainResult finished(TrainResult result) {
    model::Classifier& model = train_step_->model();
    train_step_->average_diverged();  // local SGD ends on one model
    sync_buffers(model, comm_);
    result.fingerprint = verify_identical_weights(model, comm_);
    result.peak_rss_mib = max_over_ranks(peak_rss_mib(), comm_);
    if (comm_.rank() == 0 && !config_.weights.empty()) {
      result.weights = config_.weights;
      model::save_weights(model, result.weights.string());
    }
    // Last: a restarted run that finds this checkpoint has nothing left to do. Without it the run
    // has not finished: exiting 0 would leave the step supervisor with no end of training
    // (classified unknown) and the requeued run with the last periodic checkpoint to resume.
    if (!save(SaveKind::kBlocking, /*finished=*/true)) {
      HPCTRAIN_THROW(rt::Error, "the end-of-training checkpoint (step " + std::to_string(at_.step) +
                                    ") was not committed (the lines above say why): the run has "
                                    "not finished");
    }
    Finished f;
    f.steps = result.steps;
    f.first_step = result.first_step;
    f.epochs = result.epochs;
    f.resumed = result.resumed;
    f.train_seconds = result.train_seconds;
    f.images_per_s = result.images_per_s;
    f.peak_rss_mib = result.peak_rss_mib;
    f.eval = result.eval;
    if (const LocalSgd* local_sgd = train_step_->local_sgd()) {
      f.averagings = local_sgd->synchronizations();
      f.bytes_averaged = local_sgd->bytes_averaged();
    }
    f.weights = result.weights;
    reporter_->report(f);
    return result;
  }

  dist::Communicator& comm_;
  TrainerConfig config_;
  StepPlan plan_;
  std::unique_ptr<TrainInput> input_;
  std::unique_ptr<TrainStep> train_step_;
  std::unique_ptr<Validator> validator_;
  std::unique_ptr<Checkpointer> checkpointer_;
  std::unique_ptr<Reporter> reporter_;
  std::unique_ptr<StragglerMonitor> stragglers_;
  LogWindow window_;
  Divergence divergence_;
  Counters at_;
  StopState stop_;
  std::optional<Resumed> resumed_;
};

}  // namespace

TrainResult train(const spec::Spec& spec, dist::Communicator& comm, const TrainOptions& options) {
  return Trainer(trainer_from_spec(spec, comm, options), comm).run();
}

}  // namespace hpctrain::train
