// Stage 5: checks across keys (each names the key to change) and of things outside the spec: data
// files, the worker executable, container images.
#include <glob.h>
#include <unistd.h>

#include <regex>
#include <set>

#include "common/records.hpp"
#include "spec/internal.hpp"

namespace hpctrain::spec {
namespace detail {
namespace {

namespace fs = std::filesystem;

const std::set<std::string>& managed_sbatch_options() {
  static const std::set<std::string> kManaged = {
      "job-name",        "output",        "error",         "open-mode",  "requeue",
      "no-requeue",      "signal",        "array",         "nodes",      "ntasks",
      "ntasks-per-node", "gpus-per-node", "cpus-per-task", "time",       "account",
      "partition",       "qos",           "mem",           "constraint", "exclusive",
      "chdir",           "wrap",          "parsable",      "wait",       "export",
      "export-file",     "test-only",     "batch",         "container",  "no-kill",
      "reservation",     "nodelist",      "exclude",       "begin",      "dependency",
      "mail-type",       "mail-user"};
  return kManaged;
}

std::string which_key_manages(const std::string& option) {
  static const std::map<std::string, std::string> kKeys = {
      {"job-name", "job.name"},
      {"nodes", "job.nodes"},
      {"ntasks-per-node", "job.tasks_per_node"},
      {"ntasks", "job.nodes and job.tasks_per_node"},
      {"gpus-per-node", "job.gpus_per_node"},
      {"cpus-per-task", "job.cpus_per_task"},
      {"time", "job.time"},
      {"account", "job.account"},
      {"partition", "job.partition"},
      {"qos", "job.qos"},
      {"mem", "job.mem"},
      {"constraint", "job.constraint"},
      {"exclusive", "job.exclusive"},
      {"reservation", "job.reservation"},
      {"nodelist", "job.nodelist"},
      {"exclude", "job.exclude"},
      {"begin", "job.begin"},
      {"dependency", "job.dependency"},
      {"mail-type", "job.mail_type"},
      {"mail-user", "job.mail_user"},
      {"signal", "preemption.signal and preemption.signal_lead_s"},
      {"requeue", "preemption.enabled"},
      {"no-requeue", "preemption.enabled"},
      {"no-kill", "resilience.on_node_loss"},
      {"array", "[sweep]"},
      {"output", "job.run_dir"},
      {"error", "job.run_dir"},
      {"chdir", "job.run_dir"}};
  auto it = kKeys.find(option);
  return it == kKeys.end() ? std::string() : it->second;
}

void check_extra_sbatch(const Typed& t, DiagnosticSink& sink) {
  static const std::regex kOption("--([a-z][a-z0-9-]*)(=[A-Za-z0-9._,:=@/+%*&|!()\\[\\]{}^~-]+)?");
  for (const auto& opt : std::get<std::vector<std::string>>(t.value)) {
    std::smatch m;
    if (!std::regex_match(opt, m, kOption)) {
      sink.error(t.origin, "job.extra_sbatch", quote(opt) + " is not a long sbatch option",
                 "write \"--option\" or \"--option=value\" (long form, no spaces or quotes)");
      continue;
    }
    const std::string name = m[1];
    if (managed_sbatch_options().count(name)) {
      const std::string key = which_key_manages(name);
      sink.error(t.origin, "job.extra_sbatch", "--" + name + " is set by hpctrain",
                 key.empty() ? "remove it" : "use " + key + " instead");
    }
  }
}

// Variables bash gives a meaning of its own: the batch script exports job.env with bash, which
// evaluates a value given to RANDOM, SRANDOM, OPTIND or HISTCMD as arithmetic (running any
// $(...) in an array subscript: code from the spec), refuses UID, EUID, PPID and BASH_VERSINFO
// (read-only), and replaces or drops the others before the worker sees them.
bool is_shell_variable(const std::string& name) {
  static const std::set<std::string> kBash = {
      "BASH",         "BASHOPTS", "BASHPID",    "DIRSTACK", "EPOCHREALTIME",
      "EPOCHSECONDS", "EUID",     "FUNCNAME",   "GROUPS",   "HISTCMD",
      "LINENO",       "OPTIND",   "PIPESTATUS", "PPID",     "RANDOM",
      "SECONDS",      "SHLVL",    "SRANDOM",    "UID",      "_"};
  return kBash.count(name) || name.rfind("BASH_", 0) == 0;  // BASH_ARGV0, BASH_COMPAT, ...
}

// Set by Slurm, the MPI launcher, the shell, the loader or hpctrain.
bool is_launcher_variable(const std::string& name) {
  static const std::set<std::string> kExact = {"PATH",
                                               "HOME",
                                               "USER",
                                               "LOGNAME",
                                               "SHELL",
                                               "PWD",
                                               "OLDPWD",
                                               "IFS",
                                               "BASH_ENV",
                                               "ENV",
                                               "SHELLOPTS",
                                               "BASHOPTS",
                                               "PS4",
                                               "PROMPT_COMMAND",
                                               "CDPATH",
                                               "GLOBIGNORE",
                                               "HOSTNAME",
                                               "TMPDIR",
                                               "CUDA_VISIBLE_DEVICES",
                                               "RANK",
                                               "WORLD_SIZE",
                                               "LOCAL_RANK",
                                               "LOCAL_WORLD_SIZE",
                                               "MASTER_ADDR",
                                               "MASTER_PORT",
                                               "GPU_DEVICE_ORDINAL",
                                               "ROCR_VISIBLE_DEVICES"};
  static const std::vector<std::string> kPrefixes = {"SLURM_",     "SBATCH_",   "SRUN_", "SALLOC_",
                                                     "PMIX_",      "PMI_",      "OMPI_", "LD_",
                                                     "BASH_FUNC_", "HPCTRAIN_", "MUNGE_"};
  if (kExact.count(name)) return true;
  for (const auto& p : kPrefixes) {
    if (name.rfind(p, 0) == 0) return true;
  }
  return false;
}

bool is_reserved(const std::string& name) {
  return is_launcher_variable(name) || is_shell_variable(name);
}

void check_env(const Typed& t, DiagnosticSink& sink) {
  static const std::regex kName("[A-Za-z_][A-Za-z0-9_]*");
  for (const auto& [name, value] : std::get<std::map<std::string, std::string>>(t.value)) {
    auto at = t.items.find(name);
    const Origin& origin = at == t.items.end() ? t.origin : at->second;
    if (!std::regex_match(name, kName) || name.size() > 256) {
      sink.error(origin, "job.env." + name, "not a valid environment variable name",
                 "letters, digits and '_', not starting with a digit");
    } else if (is_launcher_variable(name)) {
      sink.error(origin, "job.env." + name,
                 "reserved: set by Slurm, the MPI/PMIx launcher, the shell, the dynamic loader or "
                 "hpctrain itself",
                 "choose another variable; to load software use job.modules");
    } else if (is_shell_variable(name)) {
      sink.error(origin, "job.env." + name,
                 "reserved: bash, which runs the batch script, sets it itself, refuses it or "
                 "evaluates the value given as arithmetic: the worker would not get it as written",
                 "choose another variable");
    }
    if (value.size() > 32768) {
      sink.error(origin, "job.env." + name, "value longer than 32768 bytes");
    }
  }
}

size_t glob_count(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &g);
  const size_t n = rc == 0 ? g.gl_pathc : 0;
  globfree(&g);
  return n;
}

// Whether the spec file wrote `key` (not left to its default).
bool written(const Typedmap& m, const std::string& key) { return !origin_of(m, key).is_default(); }

// Ranks per GPU, fp16 and CUDA graphs on CPUs, and time left after the preemption warning.
void check_job_shape(const Spec& s, const Typedmap& m, const LoadOptions& options,
                     DiagnosticSink& sink) {
  const auto& j = s.job;
  if (j.gpus_per_node > 0 && j.tasks_per_node != j.gpus_per_node) {
    sink.error(origin_of(m, "job.tasks_per_node"), "job.tasks_per_node",
               "is " + std::to_string(j.tasks_per_node) + " but job.gpus_per_node is " +
                   std::to_string(j.gpus_per_node) + ": hpctrain runs one rank per GPU",
               "set tasks_per_node = gpus_per_node");
  }
  if (j.gpus_per_node == 0 && s.train.precision == Precision::kFp16 && !options.allow_fp16_on_cpu) {
    sink.error(origin_of(m, "train.precision"), "train.precision",
               "fp16 with loss scaling is a GPU path and this is a CPU job (gpus_per_node = 0)",
               "use \"bf16\" or \"fp32\" on CPUs");
  }
  if (j.gpus_per_node == 0 && s.train.cuda_graphs && !options.allow_gpu_path_on_cpu) {
    sink.error(origin_of(m, "train.cuda_graphs"), "train.cuda_graphs",
               "CUDA graphs are a GPU path and this is a CPU job (gpus_per_node = 0)",
               "remove train.cuda_graphs, or ask for GPUs");
  }
  if (s.preemption.enabled && j.time_seconds > 0 &&
      j.time_seconds <= s.preemption.signal_lead_s + 60) {
    sink.error(origin_of(m, "preemption.signal_lead_s"), "preemption.signal_lead_s",
               "the warning signal would come " + std::to_string(s.preemption.signal_lead_s) +
                   " s before a time limit of " + std::to_string(j.time_seconds) +
                   " s, leaving under a minute of training",
               "lengthen job.time or shorten signal_lead_s");
  }
}

// Slurm's everyday options as sbatch reads them: a dependency list, mail types and address.
// (job.begin takes Slurm's many time forms; its charset is checked and Slurm judges the rest.)
void check_dependency(const Spec& s, const Typedmap& m, DiagnosticSink& sink) {
  if (!s.job.dependency) return;
  static const std::regex kOne(
      "singleton|(after|afterany|afterburstbuffer|aftercorr|afternotok|afterok)"
      "(:[0-9]+(_[0-9]+)?(\\+[0-9]+)?)+");
  static const std::regex kSeparator("[,?]");
  const std::string& text = *s.job.dependency;
  if (text.find(',') != std::string::npos && text.find('?') != std::string::npos) {
    sink.error(origin_of(m, "job.dependency"), "job.dependency",
               "mixes ',' (all of them) and '?' (any of them)", "Slurm takes one or the other");
    return;
  }
  for (std::sregex_token_iterator it(text.begin(), text.end(), kSeparator, -1), end; it != end;
       ++it) {
    const std::string one = *it;
    if (std::regex_match(one, kOne)) continue;
    sink.error(origin_of(m, "job.dependency"), "job.dependency",
               quote(one) + " is not a Slurm dependency",
               "write TYPE:JOBID[:JOBID...] with TYPE after, afterany, afterok, afternotok, "
               "aftercorr or afterburstbuffer, or singleton; e.g. \"afterok:123\"");
  }
}

void check_mail(const Spec& s, const Typedmap& m, DiagnosticSink& sink) {
  static const std::set<std::string> kTypes = {
      "NONE",          "BEGIN",          "END",        "FAIL",       "REQUEUE",
      "ALL",           "INVALID_DEPEND", "STAGE_OUT",  "TIME_LIMIT", "TIME_LIMIT_90",
      "TIME_LIMIT_80", "TIME_LIMIT_50",  "ARRAY_TASKS"};
  for (const auto& type : s.job.mail_type) {
    if (kTypes.count(type)) continue;
    sink.error(origin_of(m, "job.mail_type"), "job.mail_type",
               quote(type) + " is not a Slurm mail type",
               "BEGIN, END, FAIL, REQUEUE, ALL, TIME_LIMIT, TIME_LIMIT_90, TIME_LIMIT_80, "
               "TIME_LIMIT_50, INVALID_DEPEND, STAGE_OUT, ARRAY_TASKS or NONE");
  }
  static const std::regex kAddress("[A-Za-z0-9._%+-]+(@[A-Za-z0-9.-]+)?");
  if (s.job.mail_user && !std::regex_match(*s.job.mail_user, kAddress)) {
    sink.error(origin_of(m, "job.mail_user"), "job.mail_user",
               quote(*s.job.mail_user) + " is not a user name or mail address",
               "e.g. \"me@example.org\"");
  }
  if (s.job.mail_user && s.job.mail_type.empty()) {
    sink.warning(origin_of(m, "job.mail_user"), "job.mail_user",
                 "no mail is sent without job.mail_type", "e.g. mail_type = [\"END\", \"FAIL\"]");
  }
}

// Some training data, cores left for the training thread, a full global batch of synthetic data.
void check_data(const Spec& s, const Typedmap& m, DiagnosticSink& sink) {
  const auto& j = s.job;
  if (!s.data.synthetic && s.data.train.empty()) {
    sink.error(origin_of(m, "data.synthetic"), "data.train",
               "no training data: set data.train, or data.synthetic = true");
  }
  if (s.data.workers >= j.cpus_per_task && j.cpus_per_task > 1) {
    sink.warning(origin_of(m, "data.workers"), "data.workers",
                 std::to_string(s.data.workers) + " loader threads on " +
                     std::to_string(j.cpus_per_task) +
                     " cores per rank leave none for the training thread");
  }
  if (s.data.synthetic && !s.train.max_steps) {
    const int64_t per_step = s.train.batch_size * j.world_size();
    if (s.data.synthetic_samples < per_step) {
      sink.error(origin_of(m, "train.batch_size"), "train.batch_size",
                 "an epoch of " + std::to_string(s.data.synthetic_samples) +
                     " synthetic samples has no full global batch of " + std::to_string(per_step) +
                     " (batch_size x " + std::to_string(j.world_size()) + " ranks)",
                 "raise data.synthetic_samples or lower batch_size");
    }
  }
}

// The container and srun's MPI plugin.
void check_launch(const Spec& s, const Typedmap& m, DiagnosticSink& sink) {
  const auto& j = s.job;
  if (j.container.runtime != ContainerRuntime::kNone &&
      (!j.container.image || j.container.image->empty())) {
    sink.error(origin_of(m, "job.container.runtime"), "job.container.image",
               "container runtime " + quote(std::string(name_of(j.container.runtime))) +
                   " needs an image");
  }
  // apptainer takes the image as a word of its own (pyxis as --container-image=IMAGE); a local
  // image is an absolute path by now, a reference must not look like an option.
  if (j.container.runtime == ContainerRuntime::kApptainer && j.container.image &&
      j.container.image->rfind('-', 0) == 0) {
    sink.error(origin_of(m, "job.container.image"), "job.container.image",
               quote(*j.container.image) + " starts with '-': apptainer would read it as an option",
               "an image file or a reference such as docker://nvcr.io/nvidia/pytorch:24.01-py3");
  }
  for (const auto& mount : j.container.mounts) {
    if (mount.find(',') != std::string::npos || mount.empty()) {
      sink.error(origin_of(m, "job.container.mounts"), "job.container.mounts",
                 quote(mount) + ": one mount per item, without commas");
    }
  }
  if (!j.srun_mpi.empty()) {
    static const std::regex kMpi("[a-z0-9_]+");
    if (!std::regex_match(j.srun_mpi, kMpi)) {
      sink.error(origin_of(m, "job.srun_mpi"), "job.srun_mpi",
                 quote(j.srun_mpi) + " is not an srun --mpi plugin name");
    }
  }
}

// The stem is resolved in build() (the CIFAR ResNets take theirs); what is left wrong here was
// asked for: an ImageNet stem on a CIFAR ResNet, a CIFAR stem on AlexNet; and model.fused_bn on
// AlexNet, which has no batch norm.
void check_stem(const Spec& s, const Typedmap& m, DiagnosticSink& sink) {
  const bool cifar_resnet = is_cifar_resnet(s.model.arch);
  if ((cifar_resnet && s.model.stem != Stem::kCifar) ||
      (s.model.arch == Arch::kAlexNet && s.model.stem != Stem::kImageNet)) {
    sink.error(origin_of(m, "model.stem"), "model.stem",
               quote(std::string(name_of(s.model.stem))) + " does not apply to " +
                   quote(std::string(name_of(s.model.arch))) + ", which always has " +
                   (cifar_resnet ? "the 3x3 CIFAR stem" : "its own ImageNet stem"),
               "remove model.stem (it chooses between the stems of resnet18..resnet152)");
  }
  if (s.model.fused_bn && s.model.arch == Arch::kAlexNet) {
    sink.error(origin_of(m, "model.fused_bn"), "model.fused_bn",
               "alexnet has no batch norm to fuse",
               "remove model.fused_bn (it is for the ResNets)");
  }
}

// The schedule's milestones, AdamW's betas, local SGD keys that do nothing, and periodic
// checkpoints.
void check_training(const Spec& s, const Typedmap& m, DiagnosticSink& sink) {
  const auto& sch = s.train.schedule;
  if (sch.name == Schedule::kMultistep) {
    bool increasing = !sch.milestones.empty();
    for (size_t i = 1; i < sch.milestones.size(); ++i) {
      increasing = increasing && sch.milestones[i] > sch.milestones[i - 1];
    }
    if (!increasing) {
      sink.error(origin_of(m, "train.schedule.milestones"), "train.schedule.milestones",
                 "multistep needs a non-empty, strictly increasing list of epochs");
    }
  }
  const auto& betas = s.train.optimizer.betas;
  if (betas.size() != 2 || betas[0] < 0 || betas[0] >= 1 || betas[1] < 0 || betas[1] >= 1) {
    sink.error(origin_of(m, "train.optimizer.betas"), "train.optimizer.betas",
               "must be two numbers in [0, 1)");
  }
  // The local SGD keys written where they do nothing: said, so a typo in train.sync is seen.
  for (const char* key : {"train.sync_every_steps", "train.sync_warmup_steps",
                          "train.outer_optimizer", "train.outer_lr", "train.outer_momentum"}) {
    if (s.train.sync == Sync::kAllReduce && written(m, key)) {
      sink.warning(origin_of(m, key), key,
                   "has no effect: train.sync is \"allreduce\" (local_sgd reads it)");
    }
  }
  for (const char* key : {"train.outer_lr", "train.outer_momentum"}) {
    if (s.train.sync == Sync::kLocalSgd && s.train.outer_optimizer == OuterOptimizer::kNone &&
        written(m, key)) {
      sink.warning(origin_of(m, key), key,
                   "has no effect: train.outer_optimizer is \"none\" (nesterov reads it)");
    }
  }
  if (s.checkpoint.every_steps == 0 && s.checkpoint.every_minutes == 0) {
    sink.warning(origin_of(m, "checkpoint.every_steps"), "checkpoint.every_steps",
                 "no periodic checkpoints: a crash loses all progress since the last preemption");
  }
}

// What a node loss or a straggler eviction needs: spare nodes, or more than one node.
void check_resilience(const Spec& s, const Typedmap& m, DiagnosticSink& sink) {
  const auto& j = s.job;
  const auto& r = s.resilience;
  if (r.on_node_loss == OnNodeLoss::kReplace && r.spare_nodes == 0) {
    sink.error(origin_of(m, "resilience.on_node_loss"), "resilience.on_node_loss",
               "\"replace\" needs a spare node to replace a lost one, and spare_nodes is 0",
               "set resilience.spare_nodes, or on_node_loss = \"shrink\" or \"requeue\"");
  }
  if (r.on_node_loss == OnNodeLoss::kShrink && j.nodes < 2 && r.spare_nodes == 0) {
    sink.error(origin_of(m, "resilience.on_node_loss"), "resilience.on_node_loss",
               "a one-node job cannot shrink: losing its node leaves nothing to train on",
               "use \"requeue\", or add spare_nodes");
  }
  if (r.on_node_loss == OnNodeLoss::kRequeue && r.spare_nodes > 0) {
    sink.warning(origin_of(m, "resilience.spare_nodes"), "resilience.spare_nodes",
                 std::to_string(r.spare_nodes) +
                     " spare node(s) are allocated but never used: on_node_loss is \"requeue\"");
  }
  if (r.evict_stragglers && j.nodes + r.spare_nodes < 2) {
    sink.error(origin_of(m, "resilience.evict_stragglers"), "resilience.evict_stragglers",
               "a one-node job has no other node to compare with or to move to",
               "leave it off, or add nodes or spare_nodes");
  } else if (r.evict_stragglers && r.spare_nodes == 0 && r.policy() != OnNodeLoss::kShrink) {
    sink.warning(origin_of(m, "resilience.evict_stragglers"), "resilience.evict_stragglers",
                 "with no spare node, an evicted straggler's node costs a requeue (with the node "
                 "excluded): add resilience.spare_nodes");
  }
  // resilience.stop_on: the causes of a failure (the others have policies of their own: a
  // preemption requeues, a lost node is replaced, ...).
  using records::Cause;
  static const std::set<Cause> kStoppable = {
      Cause::kOom,      Cause::kFilesystem, Cause::kNetwork, Cause::kGpuHardware,
      Cause::kBadInput, Cause::kDiverged,   Cause::kUnknown};
  for (const auto& name : r.stop_on) {
    const auto cause = records::parse<Cause>(name);
    if (cause && kStoppable.count(*cause)) continue;
    std::string names;
    for (const auto c : kStoppable) {
      names += (names.empty() ? "" : ", ") + std::string(records::name_of(c));
    }
    sink.error(origin_of(m, "resilience.stop_on"), "resilience.stop_on",
               quote(name) + " is not a cause a run can stop on", "one of " + names);
  }
  if (!r.evict_stragglers) {
    for (const char* key : {"resilience.straggler_ratio", "resilience.straggler_windows"}) {
      if (written(m, key)) {
        sink.warning(origin_of(m, key), key, "has no effect: resilience.evict_stragglers is false");
      }
    }
  }
}

// [tracking]: an http(s) URL with a host, no credentials in it (the frozen spec is kept in the
// run directory; the server's user and password come from the environment, docs/tracking.md).
void check_tracking(const Spec& s, const Typedmap& m, DiagnosticSink& sink) {
  const auto& t = s.tracking;
  if (!t.mlflow_uri) {
    if (t.experiment) {
      sink.warning(origin_of(m, "tracking.experiment"), "tracking.experiment",
                   "has no effect: tracking.mlflow_uri is not set");
    }
    return;
  }
  const std::string& uri = *t.mlflow_uri;
  const std::string key = "tracking.mlflow_uri";
  const size_t scheme = uri.rfind("http://", 0) == 0 ? 7 : uri.rfind("https://", 0) == 0 ? 8 : 0;
  const size_t host_end = uri.find_first_of("/?#", scheme);
  const std::string authority = uri.substr(scheme, host_end - std::min(host_end, scheme));
  if (scheme == 0 || authority.empty()) {
    sink.error(origin_of(m, key), key, quote(uri) + " is not an http:// or https:// URL",
               "the tracking server's address, e.g. \"http://mlflow.example.org:5000\"");
  } else if (uri.find_first_of(" \t\r\n\"'<>\\^`{|}") != std::string::npos) {
    sink.error(origin_of(m, key), key, quote(uri) + " holds a space or a character a URL may not",
               "percent-encode it (%20 for a space)");
  } else if (authority.find('@') != std::string::npos) {
    sink.error(origin_of(m, key), key,
               "holds a user name or password, which the frozen spec would keep in the run "
               "directory",
               "set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or "
               "MLFLOW_TRACKING_TOKEN) where hpctrain runs instead");
  }
  if (t.experiment && t.experiment->empty()) {
    sink.error(origin_of(m, "tracking.experiment"), "tracking.experiment", "is empty",
               "name the experiment, or leave the key out for job.name");
  }
}

// Things outside the spec: data files, pretrained weights, the worker, a container image file.
void check_paths(const Spec& s, const Typedmap& m, const LoadOptions& options,
                 DiagnosticSink& sink) {
  const auto& j = s.job;
  const std::string relative_to =
      options.paths_relative_to ? "relative paths start in " + options.paths_relative_to->string() +
                                      " (--paths-relative-to)"
                                : "paths are relative to the spec file";
  auto check_files = [&](const std::vector<std::string>& patterns, const std::string& key) {
    for (const auto& pattern : patterns) {
      if (glob_count(pattern) == 0) {
        sink.error(origin_of(m, key), key, "no file matches " + quote(pattern),
                   relative_to + "; data must exist when the job is submitted");
      }
    }
  };
  if (!s.data.synthetic) check_files(s.data.train, "data.train");
  if (s.model.pretrained && !fs::is_regular_file(*s.model.pretrained)) {
    sink.error(origin_of(m, "model.pretrained"), "model.pretrained",
               "no such file " + quote(*s.model.pretrained),
               "a state dict saved with torch.save(model.state_dict(), PATH)");
  }
  check_files(s.data.val, "data.val");
  if (j.worker.empty()) {
    sink.error(origin_of(m, "job.worker"), "job.worker", "no worker executable known",
               "set job.worker to the hpctrain-worker path");
  } else if (::access(j.worker.c_str(), X_OK) != 0) {
    sink.error(origin_of(m, "job.worker"), "job.worker",
               quote(j.worker) + " is not an executable file",
               "build hpctrain-worker or set job.worker to its path");
  }
  if (j.container.runtime == ContainerRuntime::kApptainer && j.container.image &&
      j.container.image->find("://") == std::string::npos &&
      !fs::exists(absolute_from(fs::path(options.spec_file).parent_path(), *j.container.image))) {
    sink.error(origin_of(m, "job.container.image"), "job.container.image",
               "no such image file " + quote(*j.container.image));
  }
}

}  // namespace

void cross_check(const Spec& s, const Typedmap& m, const LoadOptions& options,
                 DiagnosticSink& sink) {
  check_job_shape(s, m, options, sink);
  check_data(s, m, sink);
  check_launch(s, m, sink);
  check_stem(s, m, sink);
  check_training(s, m, sink);
  check_resilience(s, m, sink);
  check_tracking(s, m, sink);
  check_dependency(s, m, sink);
  check_mail(s, m, sink);
  if (m.count("job.extra_sbatch")) check_extra_sbatch(m.at("job.extra_sbatch"), sink);
  if (m.count("job.env")) check_env(m.at("job.env"), sink);
  if (options.check_paths) check_paths(s, m, options, sink);
}

}  // namespace detail

bool is_reserved_env_name(const std::string& name) { return detail::is_reserved(name); }

}  // namespace hpctrain::spec
