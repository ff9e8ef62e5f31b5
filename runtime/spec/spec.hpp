// The resolved job spec: a TOML file, a site profile and --set overrides merged over the schema's
// defaults, checked, and frozen to canonical TOML that the job itself reads.
// Thread safety: load() is reentrant; a Spec is a plain value.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "spec/choices.hpp"
#include "spec/diagnostics.hpp"

namespace hpctrain::spec {

// Every value below comes from the schema (defaults included): members carry no defaults of their
// own. An absent optional key is nullopt (or an empty list for data.train/val, sweep.params).
struct ContainerSpec {
  ContainerRuntime runtime = ContainerRuntime::kNone;
  std::optional<std::string> image;
  std::vector<std::string> mounts;
};

struct JobSpec {
  std::string name;
  std::optional<std::string> profile, account, partition, qos, mem, constraint;
  std::optional<std::string> reservation, nodelist, exclude, begin, dependency, mail_user;
  std::vector<std::string> mail_type;
  int64_t nodes = 0, tasks_per_node = 0, gpus_per_node = 0, cpus_per_task = 0;
  std::string time;          // normalised: [D-]HH:MM:SS
  int64_t time_seconds = 0;  // the same, in seconds
  bool exclusive = false;
  std::string run_dir;  // absolute, {name} expanded
  std::vector<std::string> modules;
  std::map<std::string, std::string> env;
  std::vector<std::string> extra_sbatch;
  std::string srun_mpi;
  std::string worker;  // absolute path
  ContainerSpec container;

  int64_t world_size() const { return nodes * tasks_per_node; }
};

struct DataSpec {
  std::vector<std::string> train, val;  // absolute paths or globs
  bool synthetic = false;
  int64_t synthetic_samples = 0, synthetic_image_size = 0;
  int64_t workers = 0, prefetch_batches = 0;
  TailPolicy shard_tail = TailPolicy::kDrop;
  Augment augment = Augment::kNone;
  bool file_locking = false;
  bool skip_corrupt = false;
  int64_t crop_padding = 0;
  std::optional<int64_t> image_size;
};

struct ModelSpec {
  Arch arch = Arch::kResNet18;
  Stem stem = Stem::kImageNet;
  int64_t num_classes = 0;
  bool zero_init_residual = false;
  bool fused_bn = false;  // ResNet blocks' BN (+ add) + ReLU as one op (model/fused_bn.hpp)
  std::optional<std::string> pretrained;  // absolute path
  std::vector<std::string> freeze;
};

struct OptimizerSpec {
  Optimizer name = Optimizer::kSgd;
  double lr = 0, momentum = 0, weight_decay = 0, eps = 0;
  bool nesterov = false;
  std::vector<double> betas;
  bool decay_bn_bias = false;
};

struct ScheduleSpec {
  Schedule name = Schedule::kConstant;
  double warmup_epochs = 0, gamma = 0, min_lr = 0;
  int64_t step_size = 0, reference_batch = 0;
  std::vector<int64_t> milestones;
  bool scale_lr = true;
};

struct TrainSpec {
  int64_t epochs = 0;
  std::optional<int64_t> max_steps;
  int64_t batch_size = 0;
  Precision precision = Precision::kFp32;
  bool channels_last = false;
  bool cuda_graphs = false;  // the static step as CUDA graphs (train/static_step.hpp)
  bool tf32 = false;
  std::optional<int64_t> threads;
  int64_t seed = 0;
  double label_smoothing = 0;
  std::optional<double> grad_clip_norm;
  int64_t log_every_steps = 0, eval_every_epochs = 0;
  double bucket_mb = 0;
  GradCompression grad_compression = GradCompression::kNone;
  Sync sync = Sync::kAllReduce;
  int64_t sync_every_steps = 0, sync_warmup_steps = 0;
  OuterOptimizer outer_optimizer = OuterOptimizer::kNone;
  double outer_lr = 0, outer_momentum = 0;
  int64_t rendezvous_timeout_s = 0, collective_timeout_s = 0;
  OptimizerSpec optimizer;
  ScheduleSpec schedule;
};

struct CheckpointSpec {
  int64_t every_steps = 0;
  double every_minutes = 0;
  int64_t keep_last = 0, keep_every = 0;
  bool async = false;
  int64_t commit_timeout_s = 0;
  int64_t lustre_stripe_count = 0, lustre_stripe_size_mib = 0;
};

struct PreemptionSpec {
  bool enabled = false;
  Signal signal = Signal::kUsr2;
  int64_t signal_lead_s = 0, max_restarts = 0, max_consecutive_failures = 0;
  int64_t max_attempts_without_progress = 0;
  bool chain = false;
};

struct ResilienceSpec {
  int64_t spare_nodes = 0;
  OnNodeLoss on_node_loss = OnNodeLoss::kAuto;
  int64_t max_node_losses = 0, heartbeat_timeout_s = 0, hang_timeout_s = 0, hang_grace_s = 0;
  bool evict_stragglers = false;
  // A later attempt whose worker binary differs from the first attempt's stops (bitwise resume).
  bool require_same_binary = true;
  double straggler_ratio = 0;
  int64_t straggler_windows = 0;
  // Causes that stop the run at once rather than retry (names of records::Cause).
  std::vector<std::string> stop_on;
  // The divergence guard (train/divergence.hpp): a loss this many times the median of the recent
  // log windows (0 = off), or fp16 skipping every step for this many steps (0 = off), diverged.
  double loss_spike_factor = 0;
  int64_t fp16_skip_limit = 0;
  // A diverged run rolls back to the last checkpoint before the offending steps and skips their
  // samples, this many times at most; then (and at 0) it stops as diverged.
  int64_t max_rollbacks = 0;
  // Before a rollback, the offending steps' batches are recomputed by each rank and by a rank on
  // another node: a node whose results differ is named faulty and let go instead.
  bool replay_on_divergence = false;

  // kAuto resolved: replace when there are spare nodes, else requeue.
  OnNodeLoss policy() const {
    if (on_node_loss != OnNodeLoss::kAuto) return on_node_loss;
    return spare_nodes > 0 ? OnNodeLoss::kReplace : OnNodeLoss::kRequeue;
  }
};

// Where the run's params, metrics, tags and report go (launcher/tracking, docs/tracking.md).
struct TrackingSpec {
  std::optional<std::string> mlflow_uri;  // an MLflow tracking server: http(s)://host:port[/path]
  std::optional<std::string> experiment;  // its experiment; absent: job.name
};

struct SweepSpec {
  SweepMode mode = SweepMode::kGrid;
  int64_t max_parallel = 0;
  // Dotted key -> the TOML text of each value, in the order written.
  std::vector<std::pair<std::string, std::vector<std::string>>> params;
};

struct Spec {
  JobSpec job;
  DataSpec data;
  ModelSpec model;
  TrainSpec train;
  CheckpointSpec checkpoint;
  PreemptionSpec preemption;
  ResilienceSpec resilience;
  TrackingSpec tracking;
  SweepSpec sweep;

  bool is_array() const { return !sweep.params.empty(); }
};

// Files larger than this are refused before parsing.
inline constexpr std::uintmax_t kMaxSpecBytes = 1 << 20;
// Deeper nesting of arrays and inline tables is refused before parsing.
inline constexpr int kMaxNesting = 32;

struct LoadOptions {
  std::filesystem::path spec_file;
  std::vector<std::string> overrides;  // "dotted.key=value"
  std::optional<std::string> profile;  // --profile; wins over job.profile
  // HPCTRAIN_PROFILE (a site's module, scripts/env.sh): the profile when neither --profile nor
  // job.profile names one.
  std::optional<std::string> default_profile;
  std::vector<std::filesystem::path> profile_dirs;  // searched in order for NAME.toml
  std::filesystem::path default_worker;             // used when job.worker is not set
  // Where the spec's relative paths (data, worker, pretrained weights, a container image) start
  // instead of the spec file's folder: hpctrain --host checks a copy of the spec in a staging
  // folder on the login node, and its relative paths are the login node's, from the remote
  // working directory (--paths-relative-to).
  std::optional<std::filesystem::path> paths_relative_to;
  bool check_paths = true;  // data files and the worker must exist (submit time)
  // Tests only (the worker's HPCTRAIN_FP16_ON_CPU): fp16 accepted in a CPU job.
  bool allow_fp16_on_cpu = false;
  // Tests only (the worker's HPCTRAIN_GPU_PATH_ON_CPU): train.cuda_graphs accepted in a CPU job,
  // where its eager twin runs.
  bool allow_gpu_path_on_cpu = false;
};

struct Resolved {
  Spec spec;
  std::vector<Spec> tasks;  // one per array task when [sweep] has params, else empty
  std::vector<Diagnostic> warnings;
};

// Reads, merges and checks. Throws SpecError with every problem found.
Resolved load(const LoadOptions& options);

// Canonical TOML of a resolved spec: every key, schema order, byte-identical for equal specs.
std::string freeze(const Spec& spec);
// What freeze writes, key by key: each present key (dotted) and its TOML text, in schema order
// (tracking's params).
std::vector<std::pair<std::string, std::string>> frozen_values(const Spec& spec);

// Parses a Slurm time limit ("90", "1:30:00", "2-12", ...) to seconds; nullopt if malformed.
std::optional<int64_t> parse_slurm_time(const std::string& text);
// Formats seconds as Slurm's [D-]HH:MM:SS.
std::string format_slurm_time(int64_t seconds);

// Whether an environment variable name is reserved (Slurm, the loader, the shell, hpctrain).
bool is_reserved_env_name(const std::string& name);

}  // namespace hpctrain::spec
