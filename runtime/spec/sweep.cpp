// Stage 6: [sweep] expanded into one resolved Spec per array task: each task's values are applied
// as --set overrides of the file layer and the whole resolution runs again, so every task is
// checked as if written by hand.
#include "common/run_layout.hpp"
#include "spec/internal.hpp"

namespace hpctrain::spec::detail {

std::vector<Spec> expand_sweep(const Spec& base, const Inputs& in, const LoadOptions& options,
                               const Origin& sweep_origin, DiagnosticSink& sink) {
  const auto& params = base.sweep.params;
  // Keys a task may vary: nothing that changes the allocation or the script.
  for (const auto& [key, values] : params) {
    const Field* f = find_field(key);
    const bool allowed = f && (key.rfind("data.", 0) == 0 || key.rfind("model.", 0) == 0 ||
                               key.rfind("train.", 0) == 0 || key.rfind("checkpoint.", 0) == 0);
    if (!f) {
      report_unknown(key, sweep_origin, sink);
    } else if (!allowed) {
      sink.error(sweep_origin, "sweep.params." + quote(key),
                 "array tasks share one allocation and script; only data, model, train and "
                 "checkpoint keys can vary");
    }
  }
  if (sink.has_errors()) return {};
  size_t count = 1;
  if (base.sweep.mode == SweepMode::kZip) {
    count = params.front().second.size();
    for (const auto& [key, values] : params) {
      if (values.size() != count) {
        sink.error(sweep_origin, "sweep.params",
                   "zip mode needs lists of equal length; " + quote(params.front().first) +
                       " has " + std::to_string(count) + ", " + quote(key) + " has " +
                       std::to_string(values.size()));
        return {};
      }
    }
  } else {
    for (const auto& [key, values] : params) {
      count *= values.size();
      if (count > 1000) break;
    }
  }
  if (count > 1000) {
    sink.error(sweep_origin, "sweep.params",
               "more than 1000 array tasks (Slurm's usual MaxArraySize is 1001)");
    return {};
  }
  std::vector<Spec> tasks;
  for (size_t task = 0; task < count; ++task) {
    Inputs task_in = in;
    size_t rest = task;
    for (auto it = params.rbegin(); it != params.rend(); ++it) {
      const auto& [key, values] = *it;
      const size_t pick = base.sweep.mode == SweepMode::kZip ? task : rest % values.size();
      rest = base.sweep.mode == SweepMode::kZip ? rest : rest / values.size();
      Origin o = sweep_origin;
      apply_override(key + "=" + values[pick], o, task_in.file, sink);
    }
    const std::string dir = layout::task_dir_name(task);
    DiagnosticSink task_sink;
    Spec spec = resolve_layers(task_in, options, task_sink);
    for (const auto& d : task_sink.all()) {
      if (d.severity == Severity::kError) {
        sink.error(d.origin, d.key, "array task " + std::to_string(task) + ": " + d.message,
                   d.hint);
      }
    }
    if (task_sink.has_errors()) continue;
    spec.job.run_dir = base.job.run_dir + "/" + dir;
    spec.sweep.params.clear();
    tasks.push_back(std::move(spec));
  }
  return tasks;
}

}  // namespace hpctrain::spec::detail
