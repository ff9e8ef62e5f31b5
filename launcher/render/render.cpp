#include "render/render.hpp"

#include <stdexcept>
#include <vector>

#include "common/exit_codes.hpp"
#include "common/run_layout.hpp"
#include "version.hpp"

namespace hpctrain::embedded {
std::string_view job_sbatch_template();
}

namespace hpctrain::render {

std::string shell_quote(std::string_view s) {
  std::string out = "'";
  for (const char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string fill_template(std::string_view text,
                          const std::vector<std::pair<std::string, std::string>>& values) {
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t at = text.find('@', pos);
    if (at == std::string_view::npos) break;
    const size_t end = text.find('@', at + 1);
    const std::string_view name =
        end == std::string_view::npos ? std::string_view() : text.substr(at + 1, end - at - 1);
    const bool is_placeholder =
        !name.empty() && name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ_") == std::string::npos;
    if (!is_placeholder) {
      out.append(text.substr(pos, at + 1 - pos));
      pos = at + 1;
      continue;
    }
    out.append(text.substr(pos, at - pos));
    bool found = false;
    for (const auto& [k, v] : values) {
      if (k == name) {
        out += v;
        found = true;
        break;
      }
    }
    if (!found) throw std::logic_error("template placeholder @" + std::string(name) + "@ unfilled");
    pos = end + 1;
  }
  out.append(text.substr(pos));
  return out;
}

std::vector<std::string> sbatch_options(const spec::Spec& spec, size_t array_tasks) {
  const auto& j = spec.job;
  std::vector<std::string> o;
  o.push_back("--job-name=" + j.name);
  if (j.account) o.push_back("--account=" + *j.account);
  if (j.partition) o.push_back("--partition=" + *j.partition);
  if (j.qos) o.push_back("--qos=" + *j.qos);
  // Spare nodes stand by in the same allocation (docs/resilience.md).
  o.push_back("--nodes=" + std::to_string(j.nodes + spec.resilience.spare_nodes));
  o.push_back("--ntasks-per-node=" + std::to_string(j.tasks_per_node));
  o.push_back("--cpus-per-task=" + std::to_string(j.cpus_per_task));
  if (j.gpus_per_node > 0) o.push_back("--gpus-per-node=" + std::to_string(j.gpus_per_node));
  if (j.mem) o.push_back("--mem=" + *j.mem);
  o.push_back("--time=" + j.time);
  if (j.constraint) o.push_back("--constraint=" + *j.constraint);
  if (j.exclusive) o.push_back("--exclusive");
  if (j.reservation) o.push_back("--reservation=" + *j.reservation);
  if (j.nodelist) o.push_back("--nodelist=" + *j.nodelist);
  if (j.exclude) o.push_back("--exclude=" + *j.exclude);
  if (j.begin) o.push_back("--begin=" + *j.begin);
  if (j.dependency) o.push_back("--dependency=" + *j.dependency);
  if (!j.mail_type.empty()) {
    std::string types;
    for (const auto& t : j.mail_type) types += (types.empty() ? "" : ",") + t;
    o.push_back("--mail-type=" + types);
  }
  if (j.mail_user) o.push_back("--mail-user=" + *j.mail_user);
  o.push_back("--chdir=" + j.run_dir);
  // logs/slurm-JOBID.out, with Slurm's filename patterns for the job id (%j; %A_%a for a task).
  const std::string logs = j.run_dir + "/" + layout::kLogs + "/";
  const std::string id = array_tasks > 0 ? "%A_%a" : "%j";
  o.push_back("--output=" + logs + layout::log_name(id, false));
  o.push_back("--error=" + logs + layout::log_name(id, true));
  o.push_back("--open-mode=append");
  if (spec.preemption.enabled) {
    o.push_back("--requeue");
    // No "B:": the signal goes to the worker ranks, which checkpoint and exit; the batch shell
    // only waits for them.
    o.push_back("--signal=" + std::string(spec::name_of(spec.preemption.signal)) + "@" +
                std::to_string(spec.preemption.signal_lead_s));
  } else {
    o.push_back("--no-requeue");
  }
  const spec::OnNodeLoss policy = spec.resilience.policy();
  if (policy == spec::OnNodeLoss::kReplace || policy == spec::OnNodeLoss::kShrink) {
    // A lost node must not end the allocation: the step supervisor starts a new step without it.
    o.push_back("--no-kill");
  }
  if (array_tasks > 0) {
    std::string array = "--array=0-" + std::to_string(array_tasks - 1);
    if (spec.sweep.max_parallel > 0) array += "%" + std::to_string(spec.sweep.max_parallel);
    o.push_back(array);
  }
  for (const auto& extra : j.extra_sbatch) o.push_back(extra);
  return o;
}

namespace {

std::string modules_block(const spec::Spec& spec) {
  if (spec.job.modules.empty()) return {};
  std::string out =
      "\n# Environment modules. Sites' init scripts and module functions are not written for\n"
      "# set -u (Debian's lmod.sh reads LOGNAME, which a batch job may not have).\n"
      "if ! type module >/dev/null 2>&1; then\n"
      "  set +u\n"
      "  for init in /etc/profile.d/lmod.sh /etc/profile.d/modules.sh "
      "/usr/share/lmod/lmod/init/bash; do\n"
      "    if [[ -r $init ]]; then source \"$init\"; break; fi\n"
      "  done\n"
      "  set -u\n"
      "fi\n"
      "hpctrain_load_module() {\n"
      "  local status=0\n"
      "  set +u\n"
      "  module load \"$1\" || status=$?\n"
      "  set -u\n"
      "  if (( status != 0 )); then\n"
      "    echo \"hpctrain: 'module load $1' failed\" >&2\n"
      "    record_attempt 2 setup_failed\n"
      "    exit 2\n"
      "  fi\n"
      "}\n";
  for (const auto& m : spec.job.modules) out += "hpctrain_load_module " + shell_quote(m) + "\n";
  return out;
}

std::string environment_block(const spec::Spec& spec) {
  std::string out;
  if (!spec.job.env.count("OMP_NUM_THREADS")) {
    out += "export OMP_NUM_THREADS=" + shell_quote(std::to_string(spec.job.cpus_per_task)) + "\n";
  }
  for (const auto& [name, value] : spec.job.env) {
    out += "export " + name + "=" + shell_quote(value) + "\n";
  }
  if (!out.empty()) out.pop_back();
  return out;
}

std::string array_setup(size_t array_tasks) {
  if (array_tasks == 0) return {};
  return "# Job array of " + std::to_string(array_tasks) +
         " tasks: each has its own directory and frozen spec.\n"
         "if [[ ! ${SLURM_ARRAY_TASK_ID:-} =~ ^[0-9]+$ || ! ${SLURM_ARRAY_JOB_ID:-} =~ ^[0-9]+$ "
         "]]; "
         "then\n"
         "  echo \"hpctrain: this script is a job array; SLURM_ARRAY_TASK_ID is missing or "
         "malformed\" >&2\n"
         "  exit 2\n"
         "fi\n"
         "array_task=$((10#$SLURM_ARRAY_TASK_ID))\n"
         "printf -v task_dir '%s/task-%03d' \"$hpctrain_run_dir\" \"$array_task\"\n"
         "requeue_target=${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}";
}

}  // namespace

std::vector<std::string> srun_argv(const spec::Spec& spec, const std::string& spec_file,
                                   const StepShape& shape) {
  const auto& j = spec.job;
  std::vector<std::string> words = {"srun", "--kill-on-bad-exit=1"};
  if (!j.srun_mpi.empty()) words.push_back("--mpi=" + j.srun_mpi);
  // The supervisor chooses the step's nodes (all of them, or the healthy ones after a loss).
  words.push_back("--nodes=" + std::to_string(shape.nodes));
  words.push_back("--ntasks=" + std::to_string(shape.nodes * j.tasks_per_node));
  words.push_back("--ntasks-per-node=" + std::to_string(j.tasks_per_node));
  if (!shape.nodelist.empty()) words.push_back("--nodelist=" + shape.nodelist);
  // The lost step may still hold CPUs on the healthy nodes until Slurm gives up on its node.
  if (shape.overlap) words.push_back("--overlap");
  // Since Slurm 22.05 srun does not inherit --cpus-per-task from the allocation.
  words.push_back("--cpus-per-task=" + std::to_string(j.cpus_per_task));
  if (j.container.runtime == spec::ContainerRuntime::kPyxis) {
    words.push_back("--container-image=" + j.container.image.value_or(""));
    if (!j.container.mounts.empty()) {
      std::string mounts;
      for (const auto& m : j.container.mounts) mounts += (mounts.empty() ? "" : ",") + m;
      words.push_back("--container-mounts=" + mounts);
    }
  } else if (j.container.runtime == spec::ContainerRuntime::kApptainer) {
    words.insert(words.end(), {"apptainer", "exec"});
    if (j.gpus_per_node > 0) words.push_back("--nv");
    for (const auto& m : j.container.mounts) words.insert(words.end(), {"--bind", m});
    words.push_back(j.container.image.value_or(""));
  }
  words.insert(words.end(), {j.worker, "--spec", spec_file});
  return words;
}

std::string sbatch_script(const spec::Spec& spec, size_t array_tasks, const std::string& cli) {
  std::string sbatch_lines;
  for (const auto& o : sbatch_options(spec, array_tasks)) {
    sbatch_lines += (sbatch_lines.empty() ? "" : "\n") + ("#SBATCH " + o);
  }
  return fill_template(embedded::job_sbatch_template(),
                       {{"SBATCH_LINES", sbatch_lines},
                        {"VERSION", kVersion},
                        {"REQUEUE_STATUS", std::to_string(kExitRequeue)},
                        {"RUN_DIR", shell_quote(spec.job.run_dir)},
                        {"CLI", shell_quote(cli)},
                        {"WORLD", std::to_string(spec.job.nodes * spec.job.tasks_per_node)},
                        {"ARRAY_SETUP", array_setup(array_tasks)},
                        {"MODULES", modules_block(spec)},
                        {"ENVIRONMENT", environment_block(spec)}});
}

}  // namespace hpctrain::render
