// The run report: one self-contained HTML page (uPlot and the page's script inlined, the data as
// JSON) with a run's training curves, its attempts and its committed checkpoints. `collect` reads a
// run directory (each task directory of a job array); `render_html` is pure. docs/report.md shows
// the page. Thread safety: functions are reentrant.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace hpctrain::report {

// Everything the page draws, as JSON: the run, its submission and the jobs of its chain ("chain",
// oldest first), and one entry in "runs" per run directory (the run itself, or task-NNN/ of a job
// array) with its metrics as columns in file order, its attempts, its committed checkpoints and a
// summary of its spec. Throws
// run::RunDirError when `run_dir` is not a run directory (no spec.toml).
nlohmann::json collect(const std::filesystem::path& run_dir);

// `json` made safe inside <script type="application/json">: '<', '>' and '&' written as \u003c,
// \u003e and \u0026, so that no string can close the element or open a comment ("</script>",
// "<!--"). The result parses to the same value.
std::string escape_for_script(const std::string& json);

// The run directory's vocabulary the page's script reads the data with, generated from
// common/records.hpp: {"kinds": the metrics kinds, "fields": {record: every field its writer
// writes} (records::field_names), "reasons": [{"name", "color"}] for the timeline, "causes"}.
nlohmann::json page_vocabulary();

// The page: the embedded template with uPlot's script and style, page_vocabulary() and `data`
// filled in.
std::string render_html(const nlohmann::json& data);

}  // namespace hpctrain::report
