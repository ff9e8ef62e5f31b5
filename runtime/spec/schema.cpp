#include "spec/schema.hpp"

#include <algorithm>
#include <string>

#include "spec/choices.hpp"

namespace hpctrain::spec {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Builders keep the table readable: one line of intent per key.
Field str(std::string_view path, Presence presence, std::string_view def, Charset charset,
          std::string_view doc) {
  return {path, Type::kString, presence, def, -kInf, kInf, {}, charset, doc};
}
// An enumerated key: its allowed values are the enum's names (choices.hpp), listed nowhere else.
template <typename E>
Field choice(std::string_view path, std::string_view def, std::string_view doc) {
  return {path, Type::kString,   Presence::kDefault, def, -kInf,
          kInf, choices_of<E>(), Charset::kName,     doc};
}
Field integer(std::string_view path, Presence presence, std::string_view def, double min,
              double max, std::string_view doc) {
  return {path, Type::kInt, presence, def, min, max, {}, Charset::kFree, doc};
}
Field real(std::string_view path, Presence presence, std::string_view def, double min, double max,
           std::string_view doc) {
  return {path, Type::kFloat, presence, def, min, max, {}, Charset::kFree, doc};
}
Field boolean(std::string_view path, std::string_view def, std::string_view doc) {
  return {path, Type::kBool, Presence::kDefault, def, -kInf, kInf, {}, Charset::kFree, doc};
}
Field typed(std::string_view path, Type type, Presence presence, std::string_view def,
            Charset charset, std::string_view doc) {
  return {path, type, presence, def, -kInf, kInf, {}, charset, doc};
}

constexpr auto kReq = Presence::kRequired;
constexpr auto kOpt = Presence::kOptional;
constexpr auto kDef = Presence::kDefault;

std::vector<Field> make_fields() {
  return {
      // [job]: the Slurm allocation and the script around the worker.
      str("job.name", kReq, {}, Charset::kName,
          "Job name (Slurm --job-name); also {name} in run_dir."),
      str("job.profile", kOpt, {}, Charset::kName,
          "Site profile from sbatch/profiles/NAME.toml supplying defaults (--profile overrides)."),
      str("job.account", kOpt, {}, Charset::kName, "Slurm account to charge (--account)."),
      str("job.partition", kOpt, {}, Charset::kName, "Slurm partition (--partition)."),
      str("job.qos", kOpt, {}, Charset::kName, "Slurm quality of service (--qos)."),
      integer("job.nodes", kDef, "1", 1, 100000, "Number of nodes (--nodes)."),
      integer("job.tasks_per_node", kDef, "1", 1, 1024,
              "Ranks per node (--ntasks-per-node); equals gpus_per_node on GPU jobs."),
      integer("job.gpus_per_node", kDef, "0", 0, 64, "GPUs per node (--gpus-per-node); 0 for CPU."),
      integer("job.cpus_per_task", kDef, "1", 1, 4096, "CPU cores per rank (--cpus-per-task)."),
      str("job.mem", kOpt, {}, Charset::kMemory,
          "Memory per node (--mem), e.g. \"64G\"; \"0\" = all."),
      str("job.time", kDef, "\"01:00:00\"", Charset::kFree,
          "Time limit: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS."),
      str("job.constraint", kOpt, {}, Charset::kConstraint, "Node features (--constraint)."),
      boolean("job.exclusive", "false", "Whole nodes only (--exclusive)."),
      str("job.reservation", kOpt, {}, Charset::kName, "Slurm reservation (--reservation)."),
      str("job.nodelist", kOpt, {}, Charset::kHostlist,
          "Nodes the job must include (--nodelist), e.g. \"node[01-04]\"."),
      str("job.exclude", kOpt, {}, Charset::kHostlist,
          "Nodes the job must not run on (--exclude), e.g. \"node07,gpu[1-2]\"."),
      str("job.begin", kOpt, {}, Charset::kSlurmWord,
          "Start no earlier than (--begin): \"2026-12-01T08:00\", \"now+1hour\", \"16:00\"."),
      str("job.dependency", kOpt, {}, Charset::kSlurmWord,
          "Start after other jobs (--dependency): \"afterok:123\", \"afterany:123:124\", "
          "\"singleton\"; ',' all of them, '?' any."),
      typed(
          "job.mail_type", Type::kStringList, kDef, "[]", Charset::kName,
          "Mail on these events (--mail-type): BEGIN, END, FAIL, REQUEUE, TIME_LIMIT_90, ALL, ..."),
      str("job.mail_user", kOpt, {}, Charset::kSlurmWord,
          "Where the mail goes (--mail-user); default: Slurm's (the submitting user)."),
      str("job.run_dir", kReq, {}, Charset::kPath,
          "Absolute directory holding everything of this run; {name} expands to job.name."),
      typed("job.modules", Type::kStringList, kDef, "[]", Charset::kModule,
            "Environment modules to `module load`, in order."),
      typed("job.env", Type::kStringMap, kDef, "{}", Charset::kFree,
            "Environment variables exported to every rank (names checked, values quoted)."),
      typed("job.extra_sbatch", Type::kStringList, kDef, "[]", Charset::kFree,
            "Extra #SBATCH options, each \"--option\" or \"--option=value\" (validated)."),
      // Free here so that "" passes; cross_check.cpp allows only [a-z0-9_]+ otherwise.
      str("job.srun_mpi", kDef, "\"pmix\"", Charset::kFree,
          "srun --mpi plugin (pmix, pmi2, none); \"\" to leave srun's default."),
      str("job.worker", kOpt, {}, Charset::kFree,
          "hpctrain-worker executable; default: the one installed beside hpctrain."),
      choice<ContainerRuntime>(
          "job.container.runtime", "\"none\"",
          "Run the worker in a container: apptainer exec, or pyxis --container-image."),
      str("job.container.image", kOpt, {}, Charset::kFree, "Container image (file or reference)."),
      typed("job.container.mounts", Type::kStringList, kDef, "[]", Charset::kFree,
            "Bind mounts \"SRC[:DST]\" for the container."),

      // [data]
      typed("data.train", Type::kPathList, kOpt, {}, Charset::kFree,
            "Training HDF5 file(s): a path, a glob, or a list of them (one index space)."),
      typed("data.val", Type::kPathList, kOpt, {}, Charset::kFree,
            "Validation HDF5 file(s), same forms as train."),
      boolean("data.synthetic", "false",
              "Generate random data instead of reading files (benchmarks and smoke tests)."),
      integer("data.synthetic_samples", kDef, "1024", 1, 1e9,
              "Samples per epoch of synthetic data."),
      integer("data.synthetic_image_size", kDef, "32", 8, 1024, "Side of synthetic images."),
      integer("data.workers", kDef, "4", 0, 256, "Loader threads per rank."),
      integer("data.prefetch_batches", kDef, "4", 1, 256, "Batches prepared ahead per rank."),
      choice<TailPolicy>("data.shard_tail", "\"drop\"",
                         "Uneven tail of an epoch: drop it or pad with repeated samples."),
      boolean("data.file_locking", "false",
              "HDF5 file locking (off: it fails on many Lustre/GPFS mounts)."),
      boolean("data.skip_corrupt", "false",
              "JPEG datasets: replace a sample that does not decode by another of its batch and "
              "count it, instead of stopping with an error naming the file and sample."),
      choice<Augment>(
          "data.augment", "\"crop_flip\"",
          "Training augmentation; evaluation always uses the deterministic centre path."),
      integer("data.crop_padding", kDef, "4", 0, 64, "Padding for crop_flip's random crop."),
      integer("data.image_size", kOpt, {}, 8, 1024,
              "Output side length; default: the dataset's own size."),

      // [model]
      choice<Arch>("model.arch", "\"resnet18\"",
                   "Network architecture (torchvision's parameter names)."),
      choice<Stem>(
          "model.stem", "\"imagenet\"",
          "ResNet stem: 7x7/stride 2 + max-pool (imagenet) or 3x3/stride 1 (cifar, small images)."),
      integer("model.num_classes", kDef, "1000", 2, 1000000, "Number of output classes."),
      boolean("model.zero_init_residual", "false",
              "Zero-initialise each residual branch's last BN."),
      boolean("model.fused_bn", "false",
              "ResNets: each batch norm with its ReLU (and a block's residual add) as one op; "
              "the same parameters and state dict (docs/models.md)."),
      str("model.pretrained", kOpt, {}, Charset::kFree,
          "Initial weights: a state dict saved by PyTorch (torch.save) for the same architecture; "
          "a different num_classes gets a fresh classifier head."),
      typed("model.freeze", Type::kStringList, kDef, "[]", Charset::kFree,
            "Parameter-name prefixes to freeze (no gradient, no update), e.g. [\"conv1\", "
            "\"layer1\"]."),

      // [train]
      integer("train.epochs", kDef, "1", 1, 100000, "Passes over the training set."),
      integer("train.max_steps", kOpt, {}, 1, 1e12, "Stop after this many optimizer steps."),
      integer("train.batch_size", kDef, "32", 1, 65536, "Samples per rank per step."),
      choice<Precision>("train.precision", "\"fp32\"",
                        "fp16 uses dynamic loss scaling; bf16 needs none."),
      boolean("train.channels_last", "false", "NHWC memory format for convolutions."),
      boolean("train.cuda_graphs", "false",
              "GPU jobs: the step with fixed tensor addresses, captured as CUDA graphs and "
              "replayed."),
      boolean("train.tf32", "true",
              "Allow TF32 matrix math on GPUs (faster fp32 convolutions and matmuls)."),
      integer("train.threads", kOpt, {}, 1, 1024,
              "Compute threads per rank; default: job.cpus_per_task."),
      integer("train.seed", kDef, "42", 0, 9007199254740991.0,
              "Seed for weights, shuffling, augmentation."),
      real("train.label_smoothing", kDef, "0.0", 0.0, 0.999, "Cross-entropy label smoothing."),
      real("train.grad_clip_norm", kOpt, {}, 0.0, kInf, "Clip the global gradient norm."),
      integer("train.log_every_steps", kDef, "50", 1, 1e9, "Steps between metrics lines."),
      integer("train.eval_every_epochs", kDef, "1", 0, 100000,
              "Epochs between validations; 0 = never."),
      real("train.bucket_mb", kDef, "25.0", 0.0625, 4096,
           "Gradient all-reduce bucket size in MiB (as PyTorch DDP's bucket_cap_mb)."),
      choice<GradCompression>("train.grad_compression", "\"none\"",
                              "Compress gradients for the all-reduce."),
      choice<Sync>("train.sync", "\"allreduce\"",
                   "allreduce: gradients averaged every step (as DDP); local_sgd: each rank steps "
                   "alone and the parameters are averaged every sync_every_steps steps."),
      integer("train.sync_every_steps", kDef, "16", 1, 1000000,
              "local_sgd: local steps between two averagings of parameters and buffers."),
      integer("train.sync_warmup_steps", kDef, "0", 0, 1e12,
              "local_sgd: steps of plain all-reduce training before the local steps begin."),
      choice<OuterOptimizer>("train.outer_optimizer", "\"none\"",
                             "local_sgd: none (the ranks' mean becomes the model) or nesterov "
                             "(SGD with Nesterov momentum on the averaged change, as DiLoCo)."),
      real("train.outer_lr", kDef, "0.7", 0.0, 100.0,
           "local_sgd with outer_optimizer = nesterov: the outer step's learning rate."),
      real("train.outer_momentum", kDef, "0.9", 0.0, 0.999999,
           "local_sgd with outer_optimizer = nesterov: the outer step's momentum."),
      integer("train.rendezvous_timeout_s", kDef, "600", 1, 86400,
              "Deadline for all ranks to join the process group."),
      integer("train.collective_timeout_s", kDef, "600", 1, 86400,
              "Deadline for any collective; a rank that misses it is reported and the job ends."),
      choice<Optimizer>("train.optimizer.name", "\"sgd\"", "Optimizer."),
      real("train.optimizer.lr", kDef, "0.1", 0.0, 1e6,
           "Learning rate at schedule.reference_batch (scaled when schedule.scale_lr)."),
      real("train.optimizer.momentum", kDef, "0.9", 0.0, 0.999999, "SGD momentum."),
      boolean("train.optimizer.nesterov", "false", "SGD Nesterov momentum."),
      real("train.optimizer.weight_decay", kDef, "0.0001", 0.0, 10.0, "Weight decay."),
      typed("train.optimizer.betas", Type::kFloatList, kDef, "[0.9, 0.999]", Charset::kFree,
            "AdamW betas (two values in [0, 1))."),
      real("train.optimizer.eps", kDef, "1e-08", 0.0, 1.0, "AdamW epsilon."),
      boolean("train.optimizer.decay_bn_bias", "true",
              "Apply weight decay to batch-norm weights and biases too; false exempts them."),
      choice<Schedule>("train.schedule.name", "\"cosine\"", "Learning-rate schedule after warmup."),
      real("train.schedule.warmup_epochs", kDef, "0.0", 0.0, 1000,
           "Linear warmup length in epochs."),
      integer("train.schedule.step_size", kDef, "30", 1, 1e9, "Epochs between decays (step)."),
      typed("train.schedule.milestones", Type::kIntList, kDef, "[]", Charset::kFree,
            "Epochs at which to decay (multistep), increasing."),
      real("train.schedule.gamma", kDef, "0.1", 0.0, 1.0, "Decay factor (step, multistep)."),
      real("train.schedule.min_lr", kDef, "0.0", 0.0, 1e6, "Floor of the cosine schedule."),
      boolean("train.schedule.scale_lr", "true",
              "Linear scaling rule: lr x global batch / reference_batch."),
      integer("train.schedule.reference_batch", kDef, "256", 1, 1e9,
              "Global batch size the configured lr is meant for."),

      // [checkpoint]
      integer("checkpoint.every_steps", kDef, "1000", 0, 1e12,
              "Checkpoint every N steps; 0 = off."),
      real("checkpoint.every_minutes", kDef, "0.0", 0.0, 1e6,
           "Checkpoint every N minutes; 0 = off."),
      integer("checkpoint.keep_last", kDef, "3", 2, 1000,
              "Committed checkpoints to keep (at least 2, so a damaged newest has a fallback)."),
      integer("checkpoint.keep_every", kDef, "0", 0, 1e12,
              "Also keep, for good, every checkpoint whose step is a multiple of this; 0 = none."),
      boolean("checkpoint.async", "false", "Write checkpoints in the background."),
      integer("checkpoint.commit_timeout_s", kDef, "600", 1, 86400,
              "Deadline for every rank to finish its part of a checkpoint."),
      integer("checkpoint.lustre_stripe_count", kDef, "0", -1, 4096,
              "On Lustre: OSTs each checkpoint file is striped over; 0 = default, -1 = all."),
      integer("checkpoint.lustre_stripe_size_mib", kDef, "0", 0, 4096,
              "On Lustre: stripe size in MiB; 0 = the filesystem's default."),

      // [preemption]
      boolean("preemption.enabled", "true",
              "Ask Slurm for a warning signal, checkpoint on it and requeue (--requeue)."),
      choice<Signal>("preemption.signal", "\"USR2\"",
                     "Signal Slurm sends before the time limit (--signal)."),
      integer("preemption.signal_lead_s", kDef, "300", 10, 65535,
              "Seconds before the time limit the signal arrives."),
      integer("preemption.max_restarts", kDef, "20", 0, 10000,
              "Requeues allowed (SLURM_RESTART_COUNT below this)."),
      integer("preemption.max_consecutive_failures", kDef, "2", 0, 1000,
              "Failed attempts in a row that are still requeued (counted apart from preemptions)."),
      integer("preemption.max_attempts_without_progress", kDef, "5", 0, 1000,
              "Attempts in a row that end without a new committed checkpoint; the next one is "
              "not requeued (the job stops, reason no_progress). 0 = no such limit."),
      boolean("preemption.chain", "true",
              "Where Slurm refuses scontrol requeue (JobRequeue=0, a partition or QoS that "
              "forbids it), submit the next job of a chain instead: it starts once this one "
              "has ended and resumes from the checkpoint as a requeued attempt would."),

      // [resilience]
      integer(
          "resilience.spare_nodes", kDef, "0", 0, 10000,
          "Extra nodes in the allocation that stand by to replace a lost one (--nodes adds them)."),
      choice<OnNodeLoss>("resilience.on_node_loss", "\"auto\"",
                         "When a node is lost: replace (a spare takes its place), shrink (spares "
                         "first, then fewer nodes), requeue; auto = replace with spares, else "
                         "requeue."),
      integer("resilience.max_node_losses", kDef, "3", 0, 1000,
              "Node losses recovered inside the allocation; the next one requeues the job."),
      integer("resilience.heartbeat_timeout_s", kDef, "10", 2, 3600,
              "A rank silent this long is lost: the others stop instead of waiting for the "
              "collective timeout."),
      integer("resilience.hang_timeout_s", kDef, "0", 0, 86400,
              "A rank alive but without progress this long is hung: every rank stops, naming "
              "the ranks the others wait for; 0 = 10x the median step time, at least 60 s."),
      integer("resilience.hang_grace_s", kDef, "90", 1, 86400,
              "After a hang verdict, how long the step may take to end (the named ranks print "
              "their stacks first) before the batch job kills it."),
      boolean("resilience.evict_stragglers", "false",
              "Let a node go that is slower than the others for straggler_windows log windows "
              "in a row: every rank checkpoints and the node is replaced as if lost."),
      real("resilience.straggler_ratio", kDef, "1.5", 1.05, 1000,
           "A node is a straggler when its ranks' median busy time per step is this many times "
           "the nodes' median (and 20 ms more)."),
      integer("resilience.straggler_windows", kDef, "3", 1, 1000,
              "Log windows in a row (train.log_every_steps each) that the same node must be the "
              "straggler before it is evicted."),
      typed("resilience.stop_on", Type::kStringList, kDef, "[\"bad_input\", \"diverged\", \"oom\"]",
            Charset::kName,
            "Causes of an attempt's end that stop the run at once instead of a retry: bad_input, "
            "diverged, oom, filesystem, network, gpu_hardware, unknown (docs/resilience.md)."),
      real("resilience.loss_spike_factor", kDef, "0", 0, 1e12,
           "The loss diverged when a log window's loss is this many times the median of the "
           "last 8 windows (after 8 windows), e.g. 10; 0 (off) = only a non-finite loss."),
      integer("resilience.fp16_skip_limit", kDef, "100", 0, 1000000,
              "In fp16, the loss diverged when the loss scaler skipped every step for this many "
              "steps in a row; 0 = off."),
      integer("resilience.max_rollbacks", kDef, "3", 0, 1000,
              "A diverged loss rolls the run back to the last checkpoint before the offending "
              "log window and skips the samples of the steps since, this many times at most; "
              "then, or at 0, the run stops as diverged."),
      boolean("resilience.replay_on_divergence", "false",
              "Before a rollback, every rank and a rank on another node recompute the offending "
              "steps' batches from the checkpoint's weights: a node whose results differ is "
              "faulty (silent data corruption) and is let go as a lost node instead."),
      boolean("resilience.require_same_binary", "true",
              "An attempt whose hpctrain-worker differs (SHA-256) from the one the run's first "
              "attempt recorded stops instead of resuming with other code; false = go on and "
              "note the change (docs/resilience.md)."),

      // [tracking]
      str("tracking.mlflow_uri", kOpt, {}, Charset::kFree,
          "An MLflow tracking server (http://host:5000): the run's params, metrics, tags and "
          "report go to one MLflow run across requeues and chains, pushed by the launcher side "
          "(docs/tracking.md)."),
      str("tracking.experiment", kOpt, {}, Charset::kFree,
          "The MLflow experiment the run goes to (created when missing); default: job.name."),

      // [sweep]
      choice<SweepMode>("sweep.mode", "\"grid\"",
                        "grid: every combination of params; zip: the i-th value of each."),
      integer("sweep.max_parallel", kDef, "0", 0, 1000,
              "Array tasks running at once; 0 = no limit."),
      typed("sweep.params", Type::kSweepMap, kOpt, {}, Charset::kFree,
            "Dotted spec key -> list of values; each array task gets one combination."),
  };
}

}  // namespace

const std::vector<std::string_view>& tables() {
  static const std::vector<std::string_view> kTables = {
      "job",        "job.container",   "data",           "model",
      "train",      "train.optimizer", "train.schedule", "checkpoint",
      "preemption", "resilience",      "tracking",       "sweep"};
  return kTables;
}

const std::vector<Field>& fields() {
  static const std::vector<Field> kFields = make_fields();
  return kFields;
}

const Field* find_field(std::string_view path) {
  for (const auto& f : fields()) {
    if (f.path == path) return &f;
  }
  return nullptr;
}

bool is_table(std::string_view path) {
  const auto& t = tables();
  return std::find(t.begin(), t.end(), path) != t.end();
}

std::string_view type_name(Type type) {
  switch (type) {
    case Type::kString:
      return "string";
    case Type::kInt:
      return "integer";
    case Type::kFloat:
      return "number";
    case Type::kBool:
      return "boolean";
    case Type::kStringList:
      return "list of strings";
    case Type::kIntList:
      return "list of integers";
    case Type::kFloatList:
      return "list of numbers";
    case Type::kStringMap:
      return "table of strings";
    case Type::kPathList:
      return "string or list of strings";
    case Type::kSweepMap:
      return "table of lists";
  }
  return "value";
}

size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment distance; keys are short, so the full matrix is fine.
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

namespace {

std::pair<std::string_view, std::string_view> split_last(std::string_view path) {
  const auto dot = path.rfind('.');
  if (dot == std::string_view::npos) return {{}, path};
  return {path.substr(0, dot), path.substr(dot + 1)};
}

// Every key and table name, the candidates for a suggestion.
std::vector<std::string_view> all_names() {
  std::vector<std::string_view> names(tables().begin(), tables().end());
  for (const auto& f : fields()) names.push_back(f.path);
  return names;
}

}  // namespace

std::string suggest_key(std::string_view path) {
  const auto [parent, leaf] = split_last(path);
  const auto names = all_names();
  // 1. A sibling with a close name: [job] nodse -> job.nodes.
  std::string_view best;
  size_t best_distance = 0;
  for (auto name : names) {
    const auto [p, l] = split_last(name);
    if (p != parent) continue;
    const size_t dist = edit_distance(leaf, l);
    const size_t limit = std::max<size_t>(1, std::min(leaf.size(), l.size()) / 3);
    if (dist <= limit && (best.empty() || dist < best_distance)) {
      best = name;
      best_distance = dist;
    }
  }
  if (!best.empty()) return std::string(best);
  // 2. The same name in another table: train.lr -> train.optimizer.lr.
  for (auto name : names) {
    if (split_last(name).second == leaf) return std::string(name);
  }
  // 3. The closest full path.
  for (auto name : names) {
    const size_t dist = edit_distance(path, name);
    if (dist <= std::max<size_t>(2, path.size() / 4) && (best.empty() || dist < best_distance)) {
      best = name;
      best_distance = dist;
    }
  }
  return std::string(best);
}

}  // namespace hpctrain::spec
