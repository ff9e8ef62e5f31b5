// Stage 1: a parsed TOML document flattened into a Layer of raw values keyed by dotted path.
#include "spec/internal.hpp"

namespace hpctrain::spec::detail {
namespace {

std::string join_path(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

}  // namespace

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

}  // namespace hpctrain::spec::detail
