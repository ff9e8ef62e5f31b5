// Stage 4: the layers merged over the schema's defaults (defaults < profile < file < overrides),
// then the typed values bound into a Spec through keys.hpp, with the few values that are
// resolved rather than copied (job.time normalised, paths made absolute, {name} expanded).
#include <type_traits>

#include "spec/internal.hpp"
#include "spec/keys.hpp"

namespace hpctrain::spec::detail {
namespace {

namespace fs = std::filesystem;

const toml::value& default_value(const Field& f) {
  static std::map<std::string_view, toml::value> cache;
  auto it = cache.find(f.path);
  if (it == cache.end()) {
    Document doc = parse_text("v = " + std::string(f.default_toml) + "\n", "schema");
    it = cache.emplace(f.path, doc.root.as_table().at("v")).first;
  }
  return it->second;
}

// Stores a converted value in its member: enums from their names (already checked against the
// schema's choices), optionals by value.
template <typename T>
void assign(T& member, const Value& value) {
  if constexpr (IsOptional<T>::value) {
    typename T::value_type inner{};
    assign(inner, value);
    member = std::move(inner);
  } else if constexpr (std::is_enum_v<T>) {
    member = *parse_choice<T>(std::get<std::string>(value));
  } else {
    member = std::get<T>(value);
  }
}

std::string expand_name(std::string s, const std::string& name) {
  for (size_t at; (at = s.find("{name}")) != std::string::npos;) s.replace(at, 6, name);
  return s;
}

}  // namespace

Typedmap merge(const Layer& profile, const Layer& file, const Layer& overrides,
               DiagnosticSink& sink) {
  Typedmap out;
  for (const auto& f : fields()) {
    const std::string key(f.path);
    std::vector<Typed> layers;
    if (f.presence == Presence::kDefault) {
      if (auto v = convert(f, default_value(f), Origin::default_value(), sink)) {
        layers.push_back({*v, Origin::default_value(), {}});
      }
    }
    for (const Layer* layer : {&profile, &file, &overrides}) {
      auto it = layer->find(key);
      if (it == layer->end()) continue;
      if (auto v = convert(f, it->second.value, it->second.origin, sink, it->second.items)) {
        layers.push_back({*v, it->second.origin, it->second.items});
      }
    }
    if (layers.empty()) continue;
    Typed result = layers.back();
    if (f.type == Type::kStringMap) {
      // job.env merges by name: a profile's variables stay unless the spec sets the same name.
      std::map<std::string, std::string> merged;
      for (const auto& l : layers) {
        for (const auto& [k, v] : std::get<std::map<std::string, std::string>>(l.value)) {
          merged[k] = v;
          auto at = l.items.find(k);
          result.items[k] = at == l.items.end() ? l.origin : at->second;
        }
      }
      result.value = merged;
    } else if (key == "job.extra_sbatch" && !overrides.count(key)) {
      // A profile's flags come first, then the spec's.
      std::vector<std::string> merged;
      for (const auto& l : layers) {
        for (const auto& s : std::get<std::vector<std::string>>(l.value)) merged.push_back(s);
      }
      result.value = merged;
    }
    out[key] = result;
  }
  return out;
}

const Origin& origin_of(const Typedmap& m, const std::string& key) {
  static const Origin kNone;
  auto it = m.find(key);
  return it == m.end() ? kNone : it->second.origin;
}

fs::path absolute_from(const fs::path& base_dir, const std::string& p) {
  fs::path path(p);
  if (path.is_relative()) path = base_dir / path;
  return path.lexically_normal();
}

Spec build(const Typedmap& m, const fs::path& spec_dir, const LoadOptions& options,
           DiagnosticSink& sink) {
  Spec s;
  for_each_key(s, [&](std::string_view key, auto& member) {
    if (auto it = m.find(std::string(key)); it != m.end()) assign(member, it->second.value);
  });

  auto& j = s.job;
  if (auto secs = parse_slurm_time(j.time); secs && *secs > 0) {
    j.time_seconds = *secs;
    j.time = format_slurm_time(*secs);
  } else {
    sink.error(origin_of(m, "job.time"), "job.time", quote(j.time) + " is not a Slurm time limit",
               "use minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS, e.g. \"12:00:00\"");
  }
  if (!j.run_dir.empty()) {
    const std::string expanded = expand_name(j.run_dir, j.name);
    j.run_dir.clear();
    if (expanded.find_first_of("{}") != std::string::npos) {
      sink.error(origin_of(m, "job.run_dir"), "job.run_dir", "only {name} may appear in braces");
    } else if (expanded.empty() || expanded[0] != '/') {
      sink.error(origin_of(m, "job.run_dir"), "job.run_dir", "must be an absolute path",
                 "use a directory on the shared filesystem, e.g. /scratch/$USER/runs/{name}");
    } else {
      j.run_dir = fs::path(expanded).lexically_normal().string();
      if (j.run_dir.size() > 1 && j.run_dir.back() == '/') j.run_dir.pop_back();
      if (j.run_dir == "/") {
        sink.error(origin_of(m, "job.run_dir"), "job.run_dir", "must not be /");
      }
    }
  }
  // Paths are resolved, so the frozen spec means the same from any directory.
  j.worker = j.worker.empty() ? options.default_worker.string()
                              : absolute_from(spec_dir, j.worker).string();
  for (auto* paths : {&s.data.train, &s.data.val}) {
    for (auto& p : *paths) p = absolute_from(spec_dir, p).string();
  }
  // The CIFAR ResNets have one stem: when the spec leaves model.stem to its default, the frozen
  // spec says which one the model has.
  if (is_cifar_resnet(s.model.arch) && origin_of(m, "model.stem").is_default()) {
    s.model.stem = Stem::kCifar;
  }
  if (s.model.pretrained)
    s.model.pretrained = absolute_from(spec_dir, *s.model.pretrained).string();
  // Apptainer opens a local image from the job's working directory (run_dir), not the spec's:
  // resolve it against the spec file, as the path check does. URIs (docker://...) stay as given.
  auto& image = j.container.image;
  if (j.container.runtime == ContainerRuntime::kApptainer && image && !image->empty() &&
      image->find("://") == std::string::npos) {
    image = absolute_from(spec_dir, *image).string();
  }
  return s;
}

}  // namespace hpctrain::spec::detail
