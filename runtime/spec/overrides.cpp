// Stage 2: --set KEY=VALUE arguments into a Layer.
#include "spec/internal.hpp"

namespace hpctrain::spec::detail {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// How to write a value of `type` on the command line, with the key's own name.
std::string value_hint(const std::string& path, Type type) {
  switch (type) {
    case Type::kInt:
      return "a whole number, e.g. --set " + path + "=10";
    case Type::kFloat:
      return "a number, e.g. --set " + path + "=0.1 or 1e-4";
    case Type::kBool:
      return "true or false, e.g. --set " + path + "=true";
    case Type::kIntList:
      return "a list of whole numbers as in TOML, e.g. --set '" + path + "=[30, 60]'";
    case Type::kFloatList:
      return "a list of numbers as in TOML, e.g. --set '" + path + "=[0.5, 0.25]'";
    default:
      return "write the value as in TOML, e.g. --set '" + path + "=[\"a\", \"b\"]' for a list";
  }
}

}  // namespace

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
               value_hint(path, field->type));
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

}  // namespace hpctrain::spec::detail
