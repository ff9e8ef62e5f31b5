#include "worker/run.hpp"

#include <sys/resource.h>

#include <csignal>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>

#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "dist/launch.hpp"
#include "dist/process_group.hpp"
#include "dist/progress.hpp"
#include "preempt/signals.hpp"
#include "spec/spec.hpp"
#include "train/metrics.hpp"
#include "train/trainer.hpp"
#include "worker/device.hpp"
#include "worker/env_overrides.hpp"
#include "worker/selftest.hpp"

namespace hpctrain::worker {
namespace {

spec::Spec load_spec(const std::string& file, const TestPlants& test) {
  spec::LoadOptions o;
  o.spec_file = file;
  o.check_paths = false;  // the frozen spec was checked at submit time
  o.allow_fp16_on_cpu = test.fp16_on_cpu;
  o.allow_gpu_path_on_cpu = test.gpu_path_on_cpu;
  return spec::load(o).spec;
}

void describe(const dist::Launch& launch, const std::optional<spec::Spec>& spec,
              const std::string& backend, bool cuda) {
  auto j = nlohmann::json::parse(dist::to_json(launch.world));
  const auto plan = dist::plan_rendezvous(launch.world, launch.env);
  j["rendezvous"] = {{"method", plan.method},
                     {"host", plan.host},
                     {"port", plan.port},
                     {"port_source", plan.port_source},
                     {"agent_store", plan.agent_store}};
  j["backend"] = backend;
  j["device"] = cuda ? describe_device(launch.world.local_rank, launch.env) : std::string("cpu");
  if (spec) j["spec_world_size"] = spec->job.world_size();
  // A GPU job on a rank without a usable GPU: what training would refuse, and why.
  if (spec && spec->job.gpus_per_node > 0 && !cuda) j["cuda_problem"] = cuda_diagnosis();
  std::cout << j.dump() << std::endl;
}

// Rank 0 serves the store: a connection per rank for the training thread and another for the
// heartbeat (one a node: only node leaders keep one), besides Gloo's own pairs; the usual soft
// limit (1024) would end a job of a few hundred ranks at start. The soft limit goes up to the
// hard one. Below what joining certainly needs (rank 0: 2 per rank and 18, measured in the self
// test; the others: a Gloo pair per peer and a few) the rank refuses to start, naming the limit,
// rather than die later inside Gloo ("Too many open files", no rank named); below rank 0's 2 per
// rank, one per node and some room it warns.
void raise_open_file_limit(const dist::WorldInfo& world) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
    ::getrlimit(RLIMIT_NOFILE, &limit);
  }
  if (limit.rlim_cur == RLIM_INFINITY) return;
  const auto n = static_cast<rlim_t>(world.world_size);
  const rlim_t least = world.rank == 0 ? 2 * n + 18 : n + 8;
  if (limit.rlim_cur < least) {
    HPCTRAIN_THROW(rt::EnvError, "open files are limited to " + std::to_string(limit.rlim_cur) +
                                     " (ulimit -n, the hard limit too) and rank " +
                                     std::to_string(world.rank) + " of " +
                                     std::to_string(world.world_size) + " ranks needs at least " +
                                     std::to_string(least) +
                                     " to join: raise the hard limit (limits.conf, or the site's "
                                     "Slurm PropagateResourceLimits)");
  }
  const rlim_t needed = 2 * n + static_cast<rlim_t>(std::max(world.num_nodes, 1)) + 64;
  if (world.rank == 0 && limit.rlim_cur < needed) {
    std::cerr << rt::rank_prefix() << "warning: open files limited to " << limit.rlim_cur
              << " (ulimit -n, hard limit too); rank 0 of " << world.world_size
              << " ranks needs about " << needed << " for the store's connections" << std::endl;
  }
}

// The spec's ranks (nodes x tasks_per_node), or fewer whole nodes after the step supervisor
// shrank the world around a lost node (HPCTRAIN_WORLD_SIZE, resilience.on_node_loss = "shrink").
void check_world_size(const spec::Spec& spec, const dist::WorldInfo& world,
                      std::optional<int64_t> shrunk) {
  int64_t expected = spec.job.world_size();
  if (shrunk && *shrunk != expected) {
    const std::string text = std::to_string(*shrunk);
    if (spec.resilience.policy() != spec::OnNodeLoss::kShrink) {
      HPCTRAIN_THROW(rt::EnvError, "HPCTRAIN_WORLD_SIZE='" + text + "' differs from the spec's " +
                                       std::to_string(expected) +
                                       " ranks, and resilience.on_node_loss is not \"shrink\"");
    }
    if (*shrunk > expected || *shrunk % spec.job.tasks_per_node != 0) {
      HPCTRAIN_THROW(rt::EnvError, "HPCTRAIN_WORLD_SIZE='" + text +
                                       "' is not a whole number of nodes of " +
                                       std::to_string(spec.job.tasks_per_node) +
                                       " ranks, at most the spec's " + std::to_string(expected));
    }
    expected = *shrunk;
  }
  if (expected != world.world_size) {
    HPCTRAIN_THROW(rt::EnvError, "the spec asks for " + std::to_string(expected) +
                                     " ranks (nodes x tasks_per_node) but the job has " +
                                     std::to_string(world.world_size));
  }
}

// Which job this rank belongs to, for the rendezvous to refuse a store that serves another
// (dist/store_join.hpp): what every rank of one job shares and two jobs on one machine do not.
std::string job_identity(const dist::Launch& launch, const std::optional<spec::Spec>& spec) {
  std::string id;
  const auto add = [&](const std::string& part) { id += (id.empty() ? "" : ", ") + part; };
  const dist::WorldInfo& world = launch.world;
  if (!world.job_id.empty()) add("Slurm job " + world.job_id + " step " + world.step_id);
  const auto run = launch.env.find("TORCHELASTIC_RUN_ID");
  if (run != launch.env.end() && !run->second.empty()) add("torchrun run " + run->second);
  add(spec ? "run directory " + spec->job.run_dir : std::string("the self test"));
  return id;
}

// A bad HPCTRAIN_TEST_STALL is refused before the rendezvous, by every rank alike: refused after
// it, a rank that joined first exited while a peer was still connecting to it, and that peer
// waited out the rendezvous deadline. (No rank is -1: nothing is planted here.)
void check_stall_plant(const TestPlants& test) {
  if (test.stall.empty()) return;
  try {
    progress::plant_stall(test.stall, /*this_rank=*/-1);
  } catch (const std::invalid_argument& e) {
    HPCTRAIN_THROW(rt::EnvError, e.what());
  }
}

// Tests: a stall planted in one rank's training (dist/progress.hpp).
void plant_stall(const TestPlants& test, dist::ProcessGroup& group) {
  if (test.stall.empty()) return;
  try {
    const int rank = group.communicator().rank();
    const auto& hosts = group.hosts();
    progress::plant_stall(test.stall, rank,
                          static_cast<size_t>(rank) < hosts.size() ? hosts[rank] : "");
  } catch (const std::invalid_argument& e) {
    HPCTRAIN_THROW(rt::EnvError, e.what());
  }
}

// The test plants that reach the trainer.
train::TrainHooks train_hooks(const TestPlants& test) {
  train::TrainHooks h;
  h.trace_samples = test.trace_samples;
  h.device_path_on_cpu = test.gpu_path_on_cpu;
  h.cuda_sync_debug = test.cuda_sync_debug;
  h.fp16_init_scale = test.fp16_init_scale;
  h.fp16_on_cpu = test.fp16_on_cpu;
  h.fp16_growth_interval = test.fp16_growth_interval;
  h.resume_skip = test.resume_skip;
  h.resume_pieces_file = test.resume_pieces_file;
  h.slow_fsync_seconds = test.slow_fsync_seconds.value_or(0);
  h.poison_samples = test.poison_samples;
  h.faulty_rank = test.faulty_rank;
  h.host_read_in_step = test.host_read_in_step;
  h.static_step_eager = test.static_step_eager;
  return h;
}

void start_heartbeat(const spec::Spec& spec, dist::ProcessGroup& group,
                     const std::filesystem::path& run_dir, const std::string& srun_step_tag) {
  dist::HeartbeatOptions beat = dist::heartbeat_options_from_spec(spec);
  // The hang in metrics.jsonl, for the step supervisor: it treats the named ranks' nodes as lost.
  beat.on_hang = [run_dir, srun_step_tag, hosts = group.hosts()](const std::vector<int>& named,
                                                                 const std::string& message) {
    train::write_suspects(run_dir, records::MetricsKind::kHang, srun_step_tag,
                          progress::snapshot().step, named, hosts, message);
  };
  group.start_heartbeat(beat);
}

train::TrainOptions train_options(const std::filesystem::path& run_dir,
                                  const dist::WorldInfo& world, const dist::ProcessGroup& group,
                                  const EnvOverrides& env) {
  train::TrainOptions t;
  t.run_dir = run_dir;
  t.out = &std::cout;
  t.hosts = group.hosts();
  t.job_end_time = world.job_end_time;
  t.srun_step_tag = env.user.srun_step_tag;
  t.hooks = train_hooks(env.test);
  return t;
}

// Trains the spec in the joined group; returns the exit status.
int train_rank(const spec::Spec& spec, const dist::WorldInfo& world, dist::ProcessGroup& group,
               const EnvOverrides& env) {
  plant_stall(env.test, group);
  // The script exports the run directory (a job array task's own); a hand-started worker uses
  // the spec's.
  const std::filesystem::path run_dir =
      env.user.run_dir.empty() ? spec.job.run_dir : env.user.run_dir;
  std::filesystem::create_directories(run_dir);
  start_heartbeat(spec, group, run_dir, env.user.srun_step_tag);
  const train::TrainResult result =
      train::train(spec, group.communicator(), train_options(run_dir, world, group, env));
  group.leave();
  // Checkpointed to let a straggler's node go (the step supervisor replaces it), or after a stop
  // signal or before the time limit (the supervisor requeues the job).
  if (!result.evicted.empty()) return kExitEvict;
  if (!result.stopped) return kExitOk;
  // Why, for the step supervisor's classifier (stderr; the stop line went to stdout): a time
  // limit and a preemption are requeued alike but told apart in the ledger.
  if (world.rank == 0) {
    std::cerr << rt::rank_prefix() << kWorkerEndMarker
              << (result.time_limit ? "time_limit" : "preempted") << " (exit status "
              << kExitRequeue << "): checkpointed at step " << result.steps
              << (result.time_limit ? " before the job's time limit" : " after a stop signal")
              << std::endl;
  }
  return kExitRequeue;
}

}  // namespace

int run(const Options& options) {
  const EnvOverrides env = read_env_overrides(dist::current_environment());
  // libtorch logs c10d warnings with a C++ stack trace each; on hundreds of ranks that buries the
  // one line that matters (ours, which names rank, host and cause). Errors only, unless asked.
  if (!env.user.torch_log_level) FLAGS_caffe2_log_level = 2;
  std::optional<spec::Spec> spec;
  if (!options.spec_file.empty()) spec = load_spec(options.spec_file, env.test);
  // The stop signals first: before any backend starts and may install handlers of its own.
  const spec::Signal signal = spec ? spec->preemption.signal : spec::Signal::kUsr2;
  preempt::install_stop_signals({preempt::signal_number(signal), SIGTERM});

  const dist::Launch launch = dist::detect_launch();
  const dist::WorldInfo& world = launch.world;
  // The spec decides: a GPU job runs on GPUs or not at all, a CPU job on the CPU (Gloo) even where
  // a GPU is visible. Without a spec (--selftest, --describe-env) a usable GPU means NCCL.
  const bool cuda = spec ? spec->job.gpus_per_node > 0 && cuda_available() : cuda_available();
  const std::string backend = cuda ? "nccl" : "gloo";
  if (options.describe_env) {
    describe(launch, spec, backend, cuda);
    return kExitOk;
  }
  if (spec) require_cuda(static_cast<int>(spec->job.gpus_per_node), world, launch.env);
  if (spec && world.source != dist::EnvSource::kSingle) {
    check_world_size(*spec, world, env.user.world_size);
  }
  check_stall_plant(env.test);

  dist::JoinOptions join = spec ? dist::join_options_from_spec(*spec) : dist::JoinOptions{};
  join.backend = backend;
  join.job = job_identity(launch, spec);
  if (cuda) join.cuda_device = bind_device(world.local_rank, launch.env);
  raise_open_file_limit(world);
  auto group = dist::join(world, launch.env, join);
  // NCCL has taken SIGUSR1 before: make sure our handlers survived the backend's start.
  preempt::verify_stop_signals();

  if (options.selftest) {
    SelftestOptions o;
    o.max_bytes = options.selftest_max_bytes;
    o.soak_seconds = options.selftest_soak_s;
    const int failures = run_selftest(group->communicator(), o, std::cout);
    return failures == 0 ? kExitOk : kExitFailure;
  }
  if (!spec) {
    HPCTRAIN_THROW(rt::EnvError, "nothing to run: give --spec RUN_DIR/spec.toml (or --selftest)");
  }
  return train_rank(*spec, world, *group, env);
}

}  // namespace hpctrain::worker
