// Renders a resolved spec into the sbatch script: pure (no I/O), deterministic (same spec, same
// bytes). Every value from the spec reaches the script either through an allowlisted charset
// (#SBATCH lines) or single-quoted (shell lines); see docs/job-spec.md "Safety".
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "spec/spec.hpp"

namespace hpctrain::render {

// The script for `spec`; `array_tasks` > 0 renders a job array of that many tasks. The script
// sets the job up and hands over to `CLI supervise` (step/supervisor.hpp): `cli` is the path of
// the hpctrain program as the batch job reaches it.
std::string sbatch_script(const spec::Spec& spec, size_t array_tasks = 0,
                          const std::string& cli = "hpctrain");

// The shape of one training step: how many nodes, which ones (empty: Slurm's choice in the
// allocation) and whether it may share CPUs with a step that is still ending.
struct StepShape {
  int64_t nodes = 1;
  std::string nodelist;
  bool overlap = false;
};
// The srun command of a step, one argument per word: srun's options, the container runtime's
// (pyxis options or `apptainer exec`) and the worker with `--spec spec_file`.
std::vector<std::string> srun_argv(const spec::Spec& spec, const std::string& spec_file,
                                   const StepShape& shape);

// The #SBATCH options of the script, in order, without the "#SBATCH " prefix.
std::vector<std::string> sbatch_options(const spec::Spec& spec, size_t array_tasks = 0);

// A single-quoted shell word that bash reads back as exactly `s` (any bytes but NUL).
std::string shell_quote(std::string_view s);

// Placeholder substitution: each @NAME@ in `text` is replaced by `values[NAME]`; an unknown or
// unfilled placeholder throws std::logic_error (a template and renderer out of step).
std::string fill_template(std::string_view text,
                          const std::vector<std::pair<std::string, std::string>>& values);

}  // namespace hpctrain::render
