// What the stages of spec resolution share (internal to the spec library). load() runs them in
// order:
//   flatten.cpp      TOML document -> Layer of raw values by dotted key; unknown keys reported
//   overrides.cpp    --set KEY=VALUE -> Layer
//   convert.cpp      one raw value -> typed Value, checked against its schema row
//   merge.cpp        defaults < profile < file < overrides -> Typedmap -> Spec (through keys.hpp)
//   cross_check.cpp  checks across keys and of things outside the spec (files, the worker)
//   sweep.cpp        [sweep] -> one Spec per array task
//   freeze.cpp       Spec -> canonical TOML
// Thread safety: reentrant.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <toml.hpp>
#include <utility>
#include <variant>
#include <vector>

#include "spec/diagnostics.hpp"
#include "spec/document.hpp"
#include "spec/schema.hpp"
#include "spec/spec.hpp"

namespace hpctrain::spec::detail {

using SweepParams = std::vector<std::pair<std::string, std::vector<std::string>>>;
using Value =
    std::variant<bool, int64_t, double, std::string, std::vector<std::string>, std::vector<int64_t>,
                 std::vector<double>, std::map<std::string, std::string>, SweepParams>;

// A value after conversion, with where it came from.
struct Typed {
  Value value;
  Origin origin;
  std::map<std::string, Origin> items;  // per-entry origins of a table value
};
using Typedmap = std::map<std::string, Typed>;

// One layer of raw values (a file or the overrides), keyed by dotted path.
struct Raw {
  toml::value value;
  Origin origin;
  std::map<std::string, Origin> items;  // per-entry origins of a table value (job.env)
};
using Layer = std::map<std::string, Raw>;

// The layers of one resolution.
struct Inputs {
  Layer profile, file, overrides;
  std::filesystem::path spec_dir;
};

inline std::string quote(const std::string& s) { return "\"" + s + "\""; }

// flatten.cpp
void report_unknown(const std::string& path, const Origin& origin, DiagnosticSink& sink);
void flatten(const Document& doc, const toml::value& table, const std::string& prefix, Layer& out,
             DiagnosticSink& sink);
const char* toml_type(const toml::value& v);

// convert.cpp
bool check_string(const Field& f, const std::string& s, const std::string& key,
                  const Origin& origin, DiagnosticSink& sink);
bool check_text(const std::string& s, const std::string& key, const Origin& origin,
                DiagnosticSink& sink);
std::optional<Value> convert(const Field& f, const toml::value& v, const Origin& origin,
                             DiagnosticSink& sink, const std::map<std::string, Origin>& items = {});

// profile.cpp: a profile's login_host taken out of its document (it is no spec key), checked.
std::optional<std::string> take_login_host(Document& doc, DiagnosticSink& sink);

// overrides.cpp
void apply_override(const std::string& arg, const Origin& origin, Layer& layer,
                    DiagnosticSink& sink);

// merge.cpp
Typedmap merge(const Layer& profile, const Layer& file, const Layer& overrides,
               DiagnosticSink& sink);
Spec build(const Typedmap& m, const std::filesystem::path& spec_dir, const LoadOptions& options,
           DiagnosticSink& sink);
// Where `key`'s value came from (an empty Origin when absent).
const Origin& origin_of(const Typedmap& m, const std::string& key);
std::filesystem::path absolute_from(const std::filesystem::path& base_dir, const std::string& p);

// cross_check.cpp
void cross_check(const Spec& s, const Typedmap& m, const LoadOptions& options,
                 DiagnosticSink& sink);

// load.cpp: merges the layers, builds the Spec and checks it; errors go to `sink`.
Spec resolve_layers(const Inputs& in, const LoadOptions& options, DiagnosticSink& sink);

// sweep.cpp
std::vector<Spec> expand_sweep(const Spec& base, const Inputs& in, const LoadOptions& options,
                               const Origin& sweep_origin, DiagnosticSink& sink);

}  // namespace hpctrain::spec::detail
