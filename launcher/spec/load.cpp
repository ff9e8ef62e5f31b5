// Spec resolution: defaults < profile < spec file < --set, then per-key and cross-key checks.
#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <regex>
#include <set>
#include <variant>

#include "spec/document.hpp"
#include "spec/literal.hpp"
#include "spec/schema.hpp"
#include "spec/spec.hpp"

namespace hpctrain::spec {
namespace {

namespace fs = std::filesystem;

using SweepParams = std::vector<std::pair<std::string, std::vector<std::string>>>;
using Value =
    std::variant<bool, int64_t, double, std::string, std::vector<std::string>, std::vector<int64_t>,
                 std::vector<double>, std::map<std::string, std::string>, SweepParams>;

struct Typed {
  Value value;
  Origin origin;
  std::map<std::string, Origin> items;  // per-entry origins of a table value
};

// One layer of raw values (a file or the overrides), keyed by dotted path.
struct Raw {
  toml::value value;
  Origin origin;
  std::map<std::string, Origin> items;  // per-entry origins of a table value (job.env)
};
using Layer = std::map<std::string, Raw>;

std::string join_path(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

std::string quote(const std::string& s) { return "\"" + s + "\""; }

void report_unknown(const std::string& path, const Origin& origin, DiagnosticSink& sink) {
  const std::string suggestion = suggest_key(path);
  sink.error(origin, path, "unknown key",
             suggestion.empty() ? "see docs/job-spec.md or `hpctrain keys` for every key"
                                : "did you mean " + quote(suggestion) + "?");
}

void flatten(const Document& doc, const toml::value& table, const std::string& prefix, Layer& out,
             DiagnosticSink& sink) {
  for (const auto& [key, value] : table.as_table()) {
    const std::string path = join_path(prefix, key);
    if (const Field* f = find_field(path)) {
      Raw raw{value, doc.origin_of(value, key), {}};
      if ((f->type == Type::kStringMap || f->type == Type::kSweepMap) && value.is_table()) {
        for (const auto& [name, item] : value.as_table())
          raw.items[name] = doc.origin_of(item, name);
      }
      out[path] = raw;
    } else if (is_table(path)) {
      if (value.is_table()) {
        flatten(doc, value, path, out, sink);
      } else {
        sink.error(doc.origin_of(value, key), path, "must be a table ([" + path + "])");
      }
    } else {
      report_unknown(path, doc.origin_of(value, key), sink);
    }
  }
}

const char* toml_type(const toml::value& v) {
  switch (v.type()) {
    case toml::value_t::boolean:
      return "boolean";
    case toml::value_t::integer:
      return "integer";
    case toml::value_t::floating:
      return "number";
    case toml::value_t::string:
      return "string";
    case toml::value_t::array:
      return "list";
    case toml::value_t::table:
      return "table";
    case toml::value_t::empty:
      return "nothing";
    default:
      return "date/time";
  }
}

// ---------------------------------------------------------------------------------------------
// Per-value checks.

bool matches_charset(const std::string& s, Charset charset) {
  static const std::regex kName("[A-Za-z0-9][A-Za-z0-9._-]*");
  static const std::regex kModule("[A-Za-z0-9._+/@-]+");
  static const std::regex kPath("[A-Za-z0-9._+@,=:/~{}-]+");
  static const std::regex kConstraint("[A-Za-z0-9_.&|,()*!:\\[\\]-]+");
  static const std::regex kMemory("[0-9]+[KMGT]?");
  switch (charset) {
    case Charset::kFree:
      return true;
    case Charset::kName:
      return std::regex_match(s, kName);
    case Charset::kModule:
      return std::regex_match(s, kModule);
    case Charset::kPath:
      return std::regex_match(s, kPath);
    case Charset::kConstraint:
      return std::regex_match(s, kConstraint);
    case Charset::kMemory:
      return std::regex_match(s, kMemory);
  }
  return false;
}

std::string_view charset_words(Charset charset) {
  switch (charset) {
    case Charset::kName:
      return "letters, digits, '.', '_' and '-', starting with a letter or digit";
    case Charset::kModule:
      return "letters, digits and . _ + / @ -";
    case Charset::kPath:
      return "letters, digits and . _ + @ , = : / ~ - (no spaces, quotes or %)";
    case Charset::kConstraint:
      return "letters, digits and _ . & | , ( ) * ! : [ ] -";
    case Charset::kMemory:
      return "a number with an optional K, M, G or T suffix";
    case Charset::kFree:
      break;
  }
  return "any text";
}

// Control characters (newline included) and invalid UTF-8 are refused in every string value:
// none has a use in a job spec and each is a way to break out of a line in the script.
bool check_text(const std::string& s, const std::string& key, const Origin& origin,
                DiagnosticSink& sink) {
  const size_t bad = find_invalid_text(s);
  const size_t newline = s.find_first_of("\n\r\t");
  const size_t at = std::min(bad, newline);
  if (at == std::string::npos) return true;
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", static_cast<unsigned char>(s[at]));
  sink.error(origin, key,
             "string contains a control character or invalid UTF-8 (byte " + std::to_string(at) +
                 " is " + buf + ")",
             "values are single lines of text");
  return false;
}

bool check_string(const Field& f, const std::string& s, const std::string& key,
                  const Origin& origin, DiagnosticSink& sink) {
  if (!check_text(s, key, origin, sink)) return false;
  if (s.size() > 4096) {
    sink.error(origin, key, "string is " + std::to_string(s.size()) + " bytes; the limit is 4096");
    return false;
  }
  if (!f.choices.empty()) {
    std::string choices(f.choices);
    std::vector<std::string> options;
    size_t start = 0;
    while (start <= choices.size()) {
      const size_t bar = choices.find('|', start);
      options.push_back(choices.substr(start, bar - start));
      if (bar == std::string::npos) break;
      start = bar + 1;
    }
    if (std::find(options.begin(), options.end(), s) != options.end()) return true;
    std::string best;
    size_t best_d = 3;
    for (const auto& o : options) {
      const size_t d = edit_distance(s, o);
      if (d < best_d) {
        best = o;
        best_d = d;
      }
    }
    std::string list;
    for (const auto& o : options) list += (list.empty() ? "" : ", ") + quote(o);
    sink.error(origin, key, quote(s) + " is not one of " + list,
               best.empty() ? std::string() : "did you mean " + quote(best) + "?");
    return false;
  }
  if (s.empty() && f.charset != Charset::kFree) {
    sink.error(origin, key, "must not be empty");
    return false;
  }
  if (!matches_charset(s, f.charset)) {
    sink.error(origin, key, quote(s) + " has characters not allowed here",
               std::string("allowed: ") + std::string(charset_words(f.charset)));
    return false;
  }
  return true;
}

std::string number_text(double v) {
  if (std::abs(v) < 1e15 && v == std::floor(v)) return std::to_string(static_cast<int64_t>(v));
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, end);
}

bool check_range(const Field& f, double v, const std::string& key, const Origin& origin,
                 DiagnosticSink& sink) {
  if (std::isnan(v) || std::isinf(v)) {
    sink.error(origin, key, "must be a finite number");
    return false;
  }
  if (v < f.min || v > f.max) {
    std::string range;
    if (std::isinf(f.max)) {
      range = "must be >= " + number_text(f.min);
    } else if (std::isinf(f.min)) {
      range = "must be <= " + number_text(f.max);
    } else {
      range = "must be between " + number_text(f.min) + " and " + number_text(f.max);
    }
    sink.error(origin, key, range + " (got " + number_text(v) + ")");
    return false;
  }
  return true;
}

void type_mismatch(const Field& f, const toml::value& v, const std::string& key,
                   const Origin& origin, DiagnosticSink& sink) {
  std::string hint;
  if (f.type == Type::kString && (v.is_integer() || v.is_floating() || v.is_boolean())) {
    hint = "quote it: " + std::string(f.path.substr(f.path.rfind('.') + 1)) + " = \"...\"";
  } else if (f.type == Type::kInt && v.is_string()) {
    hint = "remove the quotes";
  }
  sink.error(origin, key, "expected " + std::string(type_name(f.type)) + ", got " + toml_type(v),
             hint);
}

std::optional<std::vector<std::string>> string_list(const Field& f, const toml::value& v,
                                                    const std::string& key, const Origin& origin,
                                                    DiagnosticSink& sink) {
  if (!v.is_array()) {
    type_mismatch(f, v, key, origin, sink);
    return std::nullopt;
  }
  std::vector<std::string> out;
  bool ok = true;
  for (const auto& item : v.as_array()) {
    if (!item.is_string()) {
      sink.error(origin, key, std::string("list items must be strings, got ") + toml_type(item));
      return std::nullopt;
    }
    ok = check_string(f, item.as_string().str, key, origin, sink) && ok;
    out.push_back(item.as_string().str);
  }
  if (!ok) return std::nullopt;
  return out;
}

std::optional<Value> convert(const Field& f, const toml::value& v, const Origin& origin,
                             DiagnosticSink& sink,
                             const std::map<std::string, Origin>& items = {}) {
  const std::string key(f.path);
  auto item_origin = [&](const std::string& name) -> const Origin& {
    auto it = items.find(name);
    return it == items.end() ? origin : it->second;
  };
  switch (f.type) {
    case Type::kString:
      if (!v.is_string()) break;
      if (!check_string(f, v.as_string().str, key, origin, sink)) return std::nullopt;
      return Value(v.as_string().str);
    case Type::kInt:
      if (!v.is_integer()) break;
      if (!check_range(f, static_cast<double>(v.as_integer()), key, origin, sink)) {
        return std::nullopt;
      }
      return Value(static_cast<int64_t>(v.as_integer()));
    case Type::kFloat: {
      if (!v.is_floating() && !v.is_integer()) break;
      const double d = v.is_floating() ? v.as_floating() : static_cast<double>(v.as_integer());
      if (!check_range(f, d, key, origin, sink)) return std::nullopt;
      return Value(d);
    }
    case Type::kBool:
      if (!v.is_boolean()) break;
      return Value(v.as_boolean());
    case Type::kStringList: {
      auto list = string_list(f, v, key, origin, sink);
      if (!list) return std::nullopt;
      return Value(*list);
    }
    case Type::kPathList: {
      std::vector<std::string> list;
      if (v.is_string()) {
        if (!check_string(f, v.as_string().str, key, origin, sink)) return std::nullopt;
        list.push_back(v.as_string().str);
      } else if (auto l = string_list(f, v, key, origin, sink)) {
        list = *l;
      } else {
        return std::nullopt;
      }
      if (list.empty()) {
        sink.error(origin, key, "must name at least one file");
        return std::nullopt;
      }
      for (const auto& p : list) {
        if (p.empty()) {
          sink.error(origin, key, "empty path");
          return std::nullopt;
        }
      }
      return Value(list);
    }
    case Type::kIntList: {
      if (!v.is_array()) break;
      std::vector<int64_t> out;
      for (const auto& item : v.as_array()) {
        if (!item.is_integer()) {
          sink.error(origin, key,
                     std::string("list items must be integers, got ") + toml_type(item));
          return std::nullopt;
        }
        out.push_back(item.as_integer());
      }
      return Value(out);
    }
    case Type::kFloatList: {
      if (!v.is_array()) break;
      std::vector<double> out;
      for (const auto& item : v.as_array()) {
        if (!item.is_floating() && !item.is_integer()) {
          sink.error(origin, key,
                     std::string("list items must be numbers, got ") + toml_type(item));
          return std::nullopt;
        }
        const double d =
            item.is_floating() ? item.as_floating() : static_cast<double>(item.as_integer());
        if (!std::isfinite(d)) {
          sink.error(origin, key, "list items must be finite numbers");
          return std::nullopt;
        }
        out.push_back(d);
      }
      return Value(out);
    }
    case Type::kStringMap: {
      if (!v.is_table()) break;
      std::map<std::string, std::string> out;
      for (const auto& [name, item] : v.as_table()) {
        const std::string item_key = key + "." + name;
        if (!item.is_string()) {
          sink.error(item_origin(name), item_key,
                     std::string("environment values are strings, got ") + toml_type(item),
                     "quote the value");
          continue;
        }
        // A bad value drops only its own entry, so the names are still checked.
        if (check_text(item.as_string().str, item_key, item_origin(name), sink)) {
          out[name] = item.as_string().str;
        }
      }
      return Value(out);
    }
    case Type::kSweepMap: {
      if (!v.is_table()) break;
      SweepParams out;
      for (const auto& [name, item] : v.as_table()) {
        if (!item.is_array() || item.as_array().empty()) {
          sink.error(item_origin(name), key + "." + quote(name),
                     "must be a non-empty list of values");
          return std::nullopt;
        }
        std::vector<std::string> values;
        for (const auto& x : item.as_array()) values.push_back(literal_of(x));
        out.emplace_back(name, values);
      }
      std::sort(out.begin(), out.end());
      return Value(out);
    }
  }
  type_mismatch(f, v, key, origin, sink);
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Overrides.

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// Applies "dotted.key=value" to `layer`. A value that is not valid TOML is taken as a string
// where the key wants one, so `--set job.name=run7` needs no quotes.
void apply_override(const std::string& arg, const Origin& origin, Layer& layer,
                    DiagnosticSink& sink) {
  const auto eq = arg.find('=');
  if (eq == std::string::npos) {
    sink.error(origin, {}, "expected KEY=VALUE", "for example --set train.epochs=10");
    return;
  }
  const std::string path = trim(arg.substr(0, eq));
  const std::string text = trim(arg.substr(eq + 1));
  // job.env.NAME=value sets one variable.
  std::string env_name;
  const Field* field = find_field(path);
  if (!field && path.rfind("job.env.", 0) == 0) {
    env_name = path.substr(8);
    field = find_field("job.env");
  }
  if (!field) {
    report_unknown(path, origin, sink);
    return;
  }
  const bool wants_string =
      field->type == Type::kString || field->type == Type::kPathList || !env_name.empty();
  toml::value value;
  bool parsed = false;
  try {
    Document doc = parse_text("v = " + text + "\n", origin.file);
    value = doc.root.as_table().at("v");
    parsed = true;
  } catch (const SpecError&) {
  }
  if (wants_string && (!parsed || !(value.is_string() || value.is_array()))) {
    value = toml::value(text);
    parsed = true;
  }
  if (!parsed) {
    sink.error(origin, path,
               "cannot read " + quote(text) + " as " + std::string(type_name(field->type)),
               "write the value as in TOML, e.g. [\"a\", \"b\"] for a list");
    return;
  }
  if (!env_name.empty()) {
    toml::value table = toml::table{};
    if (auto it = layer.find("job.env"); it != layer.end() && it->second.value.is_table()) {
      table = it->second.value;
    }
    table.as_table()[env_name] = value;
    layer["job.env"] = Raw{table, origin, {}};
    return;
  }
  layer[path] = Raw{value, origin, {}};
}

// ---------------------------------------------------------------------------------------------
// Merging.

using Typedmap = std::map<std::string, Typed>;

const toml::value& default_value(const Field& f) {
  static std::map<std::string_view, toml::value> cache;
  auto it = cache.find(f.path);
  if (it == cache.end()) {
    Document doc = parse_text("v = " + std::string(f.default_toml) + "\n", "schema");
    it = cache.emplace(f.path, doc.root.as_table().at("v")).first;
  }
  return it->second;
}

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

// ---------------------------------------------------------------------------------------------
// Checks across keys and of things outside the spec.

const std::set<std::string>& managed_sbatch_options() {
  static const std::set<std::string> kManaged = {
      "job-name",        "output",        "error",         "open-mode",  "requeue",
      "no-requeue",      "signal",        "array",         "nodes",      "ntasks",
      "ntasks-per-node", "gpus-per-node", "cpus-per-task", "time",       "account",
      "partition",       "qos",           "mem",           "constraint", "exclusive",
      "chdir",           "wrap",          "parsable",      "wait",       "export",
      "export-file",     "test-only",     "batch",         "container"};
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
      {"signal", "preemption.signal and preemption.signal_lead_s"},
      {"requeue", "preemption.enabled"},
      {"no-requeue", "preemption.enabled"},
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

bool is_reserved(const std::string& name) {
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

void check_env(const Typed& t, DiagnosticSink& sink) {
  static const std::regex kName("[A-Za-z_][A-Za-z0-9_]*");
  for (const auto& [name, value] : std::get<std::map<std::string, std::string>>(t.value)) {
    auto at = t.items.find(name);
    const Origin& origin = at == t.items.end() ? t.origin : at->second;
    if (!std::regex_match(name, kName) || name.size() > 256) {
      sink.error(origin, "job.env." + name, "not a valid environment variable name",
                 "letters, digits and '_', not starting with a digit");
    } else if (is_reserved(name)) {
      sink.error(origin, "job.env." + name,
                 "reserved: set by Slurm, the MPI/PMIx launcher, the shell, the dynamic loader or "
                 "hpctrain itself",
                 "choose another variable; to load software use job.modules");
    }
    if (value.size() > 32768) {
      sink.error(origin, "job.env." + name, "value longer than 32768 bytes");
    }
  }
}

template <typename T>
const T& get(const Typedmap& m, const std::string& key) {
  return std::get<T>(m.at(key).value);
}

template <typename T>
std::optional<T> get_opt(const Typedmap& m, const std::string& key) {
  auto it = m.find(key);
  if (it == m.end()) return std::nullopt;
  return std::get<T>(it->second.value);
}

const Origin& origin_of(const Typedmap& m, const std::string& key) {
  static const Origin kNone;
  auto it = m.find(key);
  return it == m.end() ? kNone : it->second.origin;
}

std::string expand_name(std::string s, const std::string& name) {
  for (size_t at; (at = s.find("{name}")) != std::string::npos;) s.replace(at, 6, name);
  return s;
}

fs::path absolute_from(const fs::path& base_dir, const std::string& p) {
  fs::path path(p);
  if (path.is_relative()) path = base_dir / path;
  return path.lexically_normal();
}

size_t glob_count(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &g);
  const size_t n = rc == 0 ? g.gl_pathc : 0;
  globfree(&g);
  return n;
}

Spec build(const Typedmap& m, const fs::path& spec_dir, const LoadOptions& options,
           DiagnosticSink& sink) {
  Spec s;
  auto& j = s.job;
  j.name = get_opt<std::string>(m, "job.name").value_or("");
  j.profile = get_opt<std::string>(m, "job.profile");
  j.account = get_opt<std::string>(m, "job.account");
  j.partition = get_opt<std::string>(m, "job.partition");
  j.qos = get_opt<std::string>(m, "job.qos");
  j.mem = get_opt<std::string>(m, "job.mem");
  j.constraint = get_opt<std::string>(m, "job.constraint");
  j.nodes = get<int64_t>(m, "job.nodes");
  j.tasks_per_node = get<int64_t>(m, "job.tasks_per_node");
  j.gpus_per_node = get<int64_t>(m, "job.gpus_per_node");
  j.cpus_per_task = get<int64_t>(m, "job.cpus_per_task");
  j.exclusive = get<bool>(m, "job.exclusive");
  j.modules = get<std::vector<std::string>>(m, "job.modules");
  j.env = get<std::map<std::string, std::string>>(m, "job.env");
  j.extra_sbatch = get<std::vector<std::string>>(m, "job.extra_sbatch");
  j.srun_mpi = get<std::string>(m, "job.srun_mpi");
  j.container.runtime = get<std::string>(m, "job.container.runtime");
  j.container.image = get_opt<std::string>(m, "job.container.image").value_or("");
  j.container.mounts = get<std::vector<std::string>>(m, "job.container.mounts");
  // Apptainer opens a local image from the job's working directory (run_dir), not the spec's:
  // resolve it against the spec file, as the path check does. URIs (docker://...) stay as given.
  if (j.container.runtime == "apptainer" && !j.container.image.empty() &&
      j.container.image.find("://") == std::string::npos) {
    j.container.image = absolute_from(spec_dir, j.container.image).string();
  }

  const std::string time_text = get<std::string>(m, "job.time");
  if (auto secs = parse_slurm_time(time_text); secs && *secs > 0) {
    j.time_seconds = *secs;
    j.time = format_slurm_time(*secs);
  } else {
    sink.error(origin_of(m, "job.time"), "job.time",
               quote(time_text) + " is not a Slurm time limit",
               "use minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS, e.g. \"12:00:00\"");
  }

  if (auto rd = get_opt<std::string>(m, "job.run_dir")) {
    const std::string expanded = expand_name(*rd, j.name);
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
  if (auto w = get_opt<std::string>(m, "job.worker")) {
    j.worker = absolute_from(spec_dir, *w).string();
  } else {
    j.worker = options.default_worker.string();
  }

  auto& d = s.data;
  if (auto t = get_opt<std::vector<std::string>>(m, "data.train")) {
    for (const auto& p : *t) d.train.push_back(absolute_from(spec_dir, p).string());
  }
  if (auto v = get_opt<std::vector<std::string>>(m, "data.val")) {
    for (const auto& p : *v) d.val.push_back(absolute_from(spec_dir, p).string());
  }
  d.synthetic = get<bool>(m, "data.synthetic");
  d.synthetic_samples = get<int64_t>(m, "data.synthetic_samples");
  d.synthetic_image_size = get<int64_t>(m, "data.synthetic_image_size");
  d.workers = get<int64_t>(m, "data.workers");
  d.prefetch_batches = get<int64_t>(m, "data.prefetch_batches");
  d.shard_tail = get<std::string>(m, "data.shard_tail");
  d.file_locking = get<bool>(m, "data.file_locking");
  d.augment = get<std::string>(m, "data.augment");
  d.crop_padding = get<int64_t>(m, "data.crop_padding");
  d.image_size = get_opt<int64_t>(m, "data.image_size");

  s.model.arch = get<std::string>(m, "model.arch");
  s.model.stem = get<std::string>(m, "model.stem");
  s.model.num_classes = get<int64_t>(m, "model.num_classes");
  s.model.zero_init_residual = get<bool>(m, "model.zero_init_residual");

  auto& t = s.train;
  t.epochs = get<int64_t>(m, "train.epochs");
  t.max_steps = get_opt<int64_t>(m, "train.max_steps");
  t.batch_size = get<int64_t>(m, "train.batch_size");
  t.precision = get<std::string>(m, "train.precision");
  t.channels_last = get<bool>(m, "train.channels_last");
  t.seed = get<int64_t>(m, "train.seed");
  t.label_smoothing = get<double>(m, "train.label_smoothing");
  t.grad_clip_norm = get_opt<double>(m, "train.grad_clip_norm");
  t.log_every_steps = get<int64_t>(m, "train.log_every_steps");
  t.eval_every_epochs = get<int64_t>(m, "train.eval_every_epochs");
  t.bucket_mb = get<double>(m, "train.bucket_mb");
  t.grad_compression = get<std::string>(m, "train.grad_compression");
  t.rendezvous_timeout_s = get<int64_t>(m, "train.rendezvous_timeout_s");
  t.collective_timeout_s = get<int64_t>(m, "train.collective_timeout_s");
  t.optimizer.name = get<std::string>(m, "train.optimizer.name");
  t.optimizer.lr = get<double>(m, "train.optimizer.lr");
  t.optimizer.momentum = get<double>(m, "train.optimizer.momentum");
  t.optimizer.nesterov = get<bool>(m, "train.optimizer.nesterov");
  t.optimizer.weight_decay = get<double>(m, "train.optimizer.weight_decay");
  t.optimizer.betas = get<std::vector<double>>(m, "train.optimizer.betas");
  t.optimizer.eps = get<double>(m, "train.optimizer.eps");
  t.schedule.name = get<std::string>(m, "train.schedule.name");
  t.schedule.warmup_epochs = get<double>(m, "train.schedule.warmup_epochs");
  t.schedule.step_size = get<int64_t>(m, "train.schedule.step_size");
  t.schedule.milestones = get<std::vector<int64_t>>(m, "train.schedule.milestones");
  t.schedule.gamma = get<double>(m, "train.schedule.gamma");
  t.schedule.min_lr = get<double>(m, "train.schedule.min_lr");
  t.schedule.scale_lr = get<bool>(m, "train.schedule.scale_lr");
  t.schedule.reference_batch = get<int64_t>(m, "train.schedule.reference_batch");

  auto& c = s.checkpoint;
  c.every_steps = get<int64_t>(m, "checkpoint.every_steps");
  c.every_minutes = get<double>(m, "checkpoint.every_minutes");
  c.keep_last = get<int64_t>(m, "checkpoint.keep_last");
  c.async = get<bool>(m, "checkpoint.async");
  c.commit_timeout_s = get<int64_t>(m, "checkpoint.commit_timeout_s");

  auto& p = s.preemption;
  p.enabled = get<bool>(m, "preemption.enabled");
  p.signal = get<std::string>(m, "preemption.signal");
  p.signal_lead_s = get<int64_t>(m, "preemption.signal_lead_s");
  p.max_restarts = get<int64_t>(m, "preemption.max_restarts");
  p.max_consecutive_failures = get<int64_t>(m, "preemption.max_consecutive_failures");

  s.sweep.mode = get<std::string>(m, "sweep.mode");
  s.sweep.max_parallel = get<int64_t>(m, "sweep.max_parallel");
  if (auto params = get_opt<SweepParams>(m, "sweep.params")) s.sweep.params = *params;
  return s;
}

void cross_check(const Spec& s, const Typedmap& m, const LoadOptions& options,
                 DiagnosticSink& sink) {
  const auto& j = s.job;
  if (j.gpus_per_node > 0 && j.tasks_per_node != j.gpus_per_node) {
    sink.error(origin_of(m, "job.tasks_per_node"), "job.tasks_per_node",
               "is " + std::to_string(j.tasks_per_node) + " but job.gpus_per_node is " +
                   std::to_string(j.gpus_per_node) + ": hpctrain runs one rank per GPU",
               "set tasks_per_node = gpus_per_node");
  }
  if (j.gpus_per_node == 0 && s.train.precision == "fp16") {
    sink.error(origin_of(m, "train.precision"), "train.precision",
               "fp16 with loss scaling is a GPU path and this is a CPU job (gpus_per_node = 0)",
               "use \"bf16\" or \"fp32\" on CPUs");
  }
  if (s.preemption.enabled && j.time_seconds > 0 &&
      j.time_seconds <= s.preemption.signal_lead_s + 60) {
    sink.error(origin_of(m, "preemption.signal_lead_s"), "preemption.signal_lead_s",
               "the warning signal would come " + std::to_string(s.preemption.signal_lead_s) +
                   " s before a time limit of " + std::to_string(j.time_seconds) +
                   " s, leaving under a minute of training",
               "lengthen job.time or shorten signal_lead_s");
  }
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
  if (j.container.runtime != "none" && j.container.image.empty()) {
    sink.error(origin_of(m, "job.container.runtime"), "job.container.image",
               "container runtime " + quote(j.container.runtime) + " needs an image");
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
  const auto& sch = s.train.schedule;
  if (sch.name == "multistep") {
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
  if (s.checkpoint.every_steps == 0 && s.checkpoint.every_minutes == 0) {
    sink.warning(origin_of(m, "checkpoint.every_steps"), "checkpoint.every_steps",
                 "no periodic checkpoints: a crash loses all progress since the last preemption");
  }
  if (m.count("job.extra_sbatch")) check_extra_sbatch(m.at("job.extra_sbatch"), sink);
  if (m.count("job.env")) check_env(m.at("job.env"), sink);

  if (!options.check_paths) return;
  auto check_files = [&](const std::vector<std::string>& patterns, const std::string& key) {
    for (const auto& pattern : patterns) {
      if (glob_count(pattern) == 0) {
        sink.error(
            origin_of(m, key), key, "no file matches " + quote(pattern),
            "paths are relative to the spec file; data must exist when the job is submitted");
      }
    }
  };
  if (!s.data.synthetic) check_files(s.data.train, "data.train");
  check_files(s.data.val, "data.val");
  if (j.worker.empty()) {
    sink.error(origin_of(m, "job.worker"), "job.worker", "no worker executable known",
               "set job.worker to the hpctrain-worker path");
  } else if (::access(j.worker.c_str(), X_OK) != 0) {
    sink.error(origin_of(m, "job.worker"), "job.worker",
               quote(j.worker) + " is not an executable file",
               "build hpctrain-worker or set job.worker to its path");
  }
  if (j.container.runtime == "apptainer" && !j.container.image.empty() &&
      j.container.image.find("://") == std::string::npos &&
      !fs::exists(absolute_from(fs::path(options.spec_file).parent_path(), j.container.image))) {
    sink.error(origin_of(m, "job.container.image"), "job.container.image",
               "no such image file " + quote(j.container.image));
  }
}

void fill_literals(Spec& spec, const Typedmap& m) {
  for (const auto& [key, typed] : m) {
    spec.literals[key] = std::visit(
        [](const auto& v) -> std::string {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, SweepParams>) {
            std::string out = "{ ";
            bool first = true;
            for (const auto& [k, values] : v) {
              out += (first ? "" : ", ") + literal_of(toml::value(k)) + " = [";
              for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + values[i];
              out += "]";
              first = false;
            }
            return out + " }";
          } else {
            return literal_of(v);
          }
        },
        typed.value);
  }
  // Paths are written resolved, so the frozen spec means the same from any directory.
  spec.literals["job.run_dir"] = literal_of(spec.job.run_dir);
  spec.literals["job.worker"] = literal_of(spec.job.worker);
  spec.literals["job.time"] = literal_of(spec.job.time);
  if (!spec.job.container.image.empty()) {
    spec.literals["job.container.image"] = literal_of(spec.job.container.image);
  }
  // The profile is already merged in; the frozen spec stands alone and names it in a comment.
  spec.literals.erase("job.profile");
  if (!spec.data.train.empty()) spec.literals["data.train"] = literal_of(spec.data.train);
  if (!spec.data.val.empty()) spec.literals["data.val"] = literal_of(spec.data.val);
}

struct Inputs {
  Layer profile, file, overrides;
  fs::path spec_dir;
};

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
  fill_literals(spec, merged);
  return spec;
}

Layer load_profile(const std::string& name, const Origin& origin, const LoadOptions& options,
                   DiagnosticSink& sink) {
  Layer layer;
  for (const auto& dir : options.profile_dirs) {
    const fs::path candidate = dir / (name + ".toml");
    if (!fs::exists(candidate)) continue;
    try {
      const Document doc = read_document(candidate);
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

std::vector<Spec> expand_sweep(const Spec& base, const Inputs& in, const Typedmap& /*unused*/,
                               const LoadOptions& options, const Origin& sweep_origin,
                               DiagnosticSink& sink) {
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
  if (base.sweep.mode == "zip") {
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
      const size_t pick = base.sweep.mode == "zip" ? task : rest % values.size();
      rest = base.sweep.mode == "zip" ? rest : rest / values.size();
      Origin o = sweep_origin;
      apply_override(key + "=" + values[pick], o, task_in.file, sink);
    }
    char dir[32];
    std::snprintf(dir, sizeof dir, "task-%03zu", task);
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
    spec.literals["job.run_dir"] = literal_of(spec.job.run_dir);
    spec.sweep.params.clear();
    spec.literals.erase("sweep.params");
    tasks.push_back(std::move(spec));
  }
  return tasks;
}

}  // namespace

Resolved load(const LoadOptions& options) {
  DiagnosticSink sink;
  Inputs in;
  const Document doc = read_document(options.spec_file);  // throws on unreadable files
  in.spec_dir = fs::absolute(options.spec_file).parent_path();
  if (!doc.root.is_table())
    throw SpecError(
        {Diagnostic{Severity::kError, Origin{doc.path, 0, 0, {}}, {}, "not a TOML table", {}}});
  flatten(doc, doc.root, "", in.file, sink);
  for (const auto& arg : options.overrides) {
    apply_override(arg, Origin::override_arg(arg), in.overrides, sink);
  }
  // The profile: --profile, else job.profile from the overrides or the file.
  std::optional<std::string> profile = options.profile;
  Origin profile_origin = Origin::override_arg("--profile " + profile.value_or(""));
  for (const Layer* layer : {&in.overrides, &in.file}) {
    if (profile) break;
    if (auto it = layer->find("job.profile"); it != layer->end() && it->second.value.is_string()) {
      profile = it->second.value.as_string().str;
      profile_origin = it->second.origin;
    }
  }
  if (profile) {
    const Field* f = find_field("job.profile");
    if (check_string(*f, *profile, "job.profile", profile_origin, sink)) {
      in.profile = load_profile(*profile, profile_origin, options, sink);
    }
    in.overrides["job.profile"] = Raw{toml::value(*profile), profile_origin, {}};
  }
  Resolved out;
  out.spec = resolve_layers(in, options, sink);
  if (!sink.has_errors() && out.spec.is_array()) {
    Origin sweep_origin =
        in.file.count("sweep.params") ? in.file.at("sweep.params").origin : Origin{};
    out.tasks = expand_sweep(out.spec, in, {}, options, sweep_origin, sink);
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

bool is_reserved_env_name(const std::string& name) { return is_reserved(name); }

std::optional<int64_t> parse_slurm_time(const std::string& text) {
  static const std::regex kDays("([0-9]+)-([0-9]+)(?::([0-9]+))?(?::([0-9]+))?");
  static const std::regex kClock("([0-9]+)(?::([0-9]+))?(?::([0-9]+))?");
  auto num = [](const std::ssub_match& m) -> int64_t {
    if (!m.matched || m.length() > 9) return m.matched ? -1 : 0;
    return std::stoll(m.str());
  };
  std::smatch m;
  int64_t d = 0, h = 0, min = 0, s = 0;
  if (std::regex_match(text, m, kDays)) {
    d = num(m[1]);
    h = num(m[2]);
    min = num(m[3]);
    s = num(m[4]);
    if (h > 23 || min > 59 || s > 59) return std::nullopt;
  } else if (std::regex_match(text, m, kClock)) {
    if (m[3].matched) {  // HH:MM:SS
      h = num(m[1]);
      min = num(m[2]);
      s = num(m[3]);
      if (min > 59 || s > 59) return std::nullopt;
    } else if (m[2].matched) {  // MM:SS
      min = num(m[1]);
      s = num(m[2]);
      if (s > 59) return std::nullopt;
    } else {  // minutes
      min = num(m[1]);
    }
  } else {
    return std::nullopt;
  }
  if (d < 0 || h < 0 || min < 0 || s < 0 || d > 3650) return std::nullopt;
  const int64_t total = ((d * 24 + h) * 60 + min) * 60 + s;
  if (total > int64_t{3650} * 86400) return std::nullopt;
  return total;
}

std::string format_slurm_time(int64_t seconds) {
  const int64_t days = seconds / 86400, rest = seconds % 86400;
  char buf[48];
  if (days > 0) {
    std::snprintf(buf, sizeof buf, "%lld-%02lld:%02lld:%02lld", static_cast<long long>(days),
                  static_cast<long long>(rest / 3600), static_cast<long long>(rest / 60 % 60),
                  static_cast<long long>(rest % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld", static_cast<long long>(rest / 3600),
                  static_cast<long long>(rest / 60 % 60), static_cast<long long>(rest % 60));
  }
  return buf;
}

}  // namespace hpctrain::spec
