// Spec resolution: defaults < profile < spec file < --set, then per-key and cross-key checks
// (the stages are listed in internal.hpp).
#include <set>

#include "spec/internal.hpp"

namespace hpctrain::spec {
namespace detail {
namespace {

namespace fs = std::filesystem;

Layer load_profile(const std::string& name, const Origin& origin, const LoadOptions& options,
                   DiagnosticSink& sink) {
  Layer layer;
  for (const auto& dir : options.profile_dirs) {
    const fs::path candidate = dir / (name + ".toml");
    if (!fs::exists(candidate)) continue;
    try {
      Document doc = read_document(candidate);
      // login_host is for the machines users submit from (hpctrain --host), not the job.
      take_login_host(doc, sink);
      flatten(doc, doc.root, "", layer, sink);
    } catch (const SpecError& e) {
      for (const auto& d : e.diagnostics()) sink.error(d.origin, d.key, d.message, d.hint);
    }
    for (const char* forbidden : {"job.name", "job.run_dir", "job.profile", "sweep.params"}) {
      if (auto it = layer.find(forbidden); it != layer.end()) {
        sink.error(it->second.origin, forbidden, "a site profile cannot set this key",
                   "set it in the job spec");
        layer.erase(it);
      }
    }
    return layer;
  }
  std::string searched;
  for (const auto& dir : options.profile_dirs)
    searched += (searched.empty() ? "" : ", ") + dir.string();
  sink.error(
      origin, "job.profile", "no site profile " + quote(name),
      "looked for " + name + ".toml in: " + (searched.empty() ? "(no directories)" : searched));
  return layer;
}

}  // namespace

// Merges the layers, builds the Spec and checks it; errors go to `sink`.
Spec resolve_layers(const Inputs& in, const LoadOptions& options, DiagnosticSink& sink) {
  Typedmap merged = merge(in.profile, in.file, in.overrides, sink);
  auto given = [&](const char* key) {
    return in.file.count(key) || in.overrides.count(key) || in.profile.count(key);
  };
  if (!given("job.name")) {
    sink.error(Origin{options.spec_file.string(), 0, 0, {}}, "job.name", "missing required key",
               "every job needs a name: [job] name = \"...\"");
  }
  if (!given("job.run_dir")) {
    sink.error(Origin{options.spec_file.string(), 0, 0, {}}, "job.run_dir", "missing required key",
               "where the run lives: [job] run_dir = \"/scratch/...\"");
  }
  // A key whose value was refused falls back to its default, so the checks across keys still
  // run and every problem is reported at once; their findings about keys that already have an
  // error would only repeat it, so those are dropped.
  std::set<std::string> bad_keys;
  for (const auto& d : sink.all()) bad_keys.insert(d.key);
  DiagnosticSink later;
  Spec spec = build(merged, in.spec_dir, options, later);
  cross_check(spec, merged, options, later);
  for (const auto& d : later.all()) {
    if (bad_keys.count(d.key)) continue;
    if (d.severity == Severity::kError) {
      sink.error(d.origin, d.key, d.message, d.hint);
    } else {
      sink.warning(d.origin, d.key, d.message, d.hint);
    }
  }
  return spec;
}

}  // namespace detail

Resolved load(const LoadOptions& options) {
  DiagnosticSink sink;
  detail::Inputs in;
  const Document doc = read_document(options.spec_file);  // throws on unreadable files
  in.spec_dir = options.paths_relative_to
                    ? std::filesystem::absolute(*options.paths_relative_to).lexically_normal()
                    : std::filesystem::absolute(options.spec_file).parent_path();
  if (!doc.root.is_table())
    throw SpecError(
        {Diagnostic{Severity::kError, Origin{doc.path, 0, 0, {}}, {}, "not a TOML table", {}}});
  detail::flatten(doc, doc.root, "", in.file, sink);
  for (const auto& arg : options.overrides) {
    detail::apply_override(arg, Origin::override_arg(arg), in.overrides, sink);
  }
  // The profile: --profile, else job.profile from the overrides or the file, else the
  // environment's default (HPCTRAIN_PROFILE).
  std::optional<std::string> profile = options.profile;
  Origin profile_origin = Origin::override_arg("--profile " + profile.value_or(""));
  for (const detail::Layer* layer : {&in.overrides, &in.file}) {
    if (profile) break;
    if (auto it = layer->find("job.profile"); it != layer->end() && it->second.value.is_string()) {
      profile = it->second.value.as_string().str;
      profile_origin = it->second.origin;
    }
  }
  if (!profile && options.default_profile) {
    profile = options.default_profile;
    profile_origin = {"HPCTRAIN_PROFILE", 0, 0, "HPCTRAIN_PROFILE=" + *profile};
  }
  if (profile) {
    const Field* f = find_field("job.profile");
    if (detail::check_string(*f, *profile, "job.profile", profile_origin, sink)) {
      in.profile = detail::load_profile(*profile, profile_origin, options, sink);
    }
    in.overrides["job.profile"] = detail::Raw{toml::value(*profile), profile_origin, {}};
  }
  Resolved out;
  out.spec = detail::resolve_layers(in, options, sink);
  if (!sink.has_errors() && out.spec.is_array()) {
    Origin sweep_origin =
        in.file.count("sweep.params") ? in.file.at("sweep.params").origin : Origin{};
    out.tasks = detail::expand_sweep(out.spec, in, options, sweep_origin, sink);
  }
  auto located = [&](std::vector<Diagnostic> all) {
    // A problem with a default value is a problem of the spec as a whole.
    for (auto& d : all) {
      if (d.origin.is_default()) d.origin.file = options.spec_file.string();
    }
    return all;
  };
  if (sink.has_errors()) throw SpecError(located(sink.sorted()));
  out.warnings = located(sink.sorted());
  return out;
}

}  // namespace hpctrain::spec
