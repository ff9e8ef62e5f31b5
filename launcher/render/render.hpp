// Renders a resolved spec into the sbatch script: pure (no I/O), deterministic (same spec, same
// bytes). Every value from the spec reaches the script either through an allowlisted charset
// (#SBATCH lines) or single-quoted (shell lines); see docs/job-spec.md "Safety".
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "spec/spec.hpp"

namespace hpctrain::render {

// The script for `spec`; `array_tasks` > 0 renders a job array of that many tasks.
std::string sbatch_script(const spec::Spec& spec, size_t array_tasks = 0);

// The #SBATCH options of the script, in order, without the "#SBATCH " prefix.
std::vector<std::string> sbatch_options(const spec::Spec& spec, size_t array_tasks = 0);

// A single-quoted shell word that bash reads back as exactly `s` (any bytes but NUL).
std::string shell_quote(std::string_view s);

// Placeholder substitution: each @NAME@ in `text` is replaced by `values[NAME]`; an unknown or
// unfilled placeholder throws std::logic_error (a template and renderer out of step).
std::string fill_template(std::string_view text,
                          const std::vector<std::pair<std::string, std::string>>& values);

}  // namespace hpctrain::render
