// Stage 3: one raw value converted to its typed form and checked against its schema row (type,
// range, allowed values, character set); parse_slurm_time/format_slurm_time for job.time.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <regex>

#include "spec/internal.hpp"
#include "spec/literal.hpp"

namespace hpctrain::spec {
namespace detail {
namespace {

bool matches_charset(const std::string& s, Charset charset) {
  static const std::regex kName("[A-Za-z0-9][A-Za-z0-9._-]*");
  // Not starting with '-': `module load` would read the name as one of its options.
  static const std::regex kModule("[A-Za-z0-9._+/@][A-Za-z0-9._+/@-]*");
  static const std::regex kPath("[A-Za-z0-9._+@,=:/~{}-]+");
  static const std::regex kHostlist("[A-Za-z0-9._,\\[\\]-]+");
  static const std::regex kSlurmWord("[A-Za-z0-9._:,?+@%-]+");
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
    case Charset::kHostlist:
      return std::regex_match(s, kHostlist);
    case Charset::kSlurmWord:
      return std::regex_match(s, kSlurmWord);
  }
  return false;
}

std::string_view charset_words(Charset charset) {
  switch (charset) {
    case Charset::kName:
      return "letters, digits, '.', '_' and '-', starting with a letter or digit";
    case Charset::kModule:
      return "letters, digits and . _ + / @ -, not starting with -";
    case Charset::kPath:
      return "letters, digits and . _ + @ , = : / ~ - (no spaces, quotes or %)";
    case Charset::kConstraint:
      return "letters, digits and _ . & | , ( ) * ! : [ ] -";
    case Charset::kMemory:
      return "a number with an optional K, M, G or T suffix";
    case Charset::kHostlist:
      return "a Slurm host list: letters, digits and . _ , [ ] -";
    case Charset::kSlurmWord:
      return "letters, digits and . _ : , ? + @ % -";
    case Charset::kFree:
      break;
  }
  return "any text";
}

}  // namespace

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

namespace {

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

// One path, or a list of them: at least one, none empty.
std::optional<Value> path_list(const Field& f, const toml::value& v, const std::string& key,
                               const Origin& origin, DiagnosticSink& sink) {
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

std::optional<Value> int_list(const toml::value& v, const std::string& key, const Origin& origin,
                              DiagnosticSink& sink) {
  std::vector<int64_t> out;
  for (const auto& item : v.as_array()) {
    if (!item.is_integer()) {
      sink.error(origin, key, std::string("list items must be integers, got ") + toml_type(item));
      return std::nullopt;
    }
    out.push_back(item.as_integer());
  }
  return Value(out);
}

std::optional<Value> float_list(const toml::value& v, const std::string& key, const Origin& origin,
                                DiagnosticSink& sink) {
  std::vector<double> out;
  for (const auto& item : v.as_array()) {
    if (!item.is_floating() && !item.is_integer()) {
      sink.error(origin, key, std::string("list items must be numbers, got ") + toml_type(item));
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

// Where the table's entry `name` was written, else the table's own origin.
const Origin& item_origin(const std::map<std::string, Origin>& items, const std::string& name,
                          const Origin& origin) {
  auto it = items.find(name);
  return it == items.end() ? origin : it->second;
}

// job.env: strings by name. A bad value drops only its own entry, so the names are still checked.
std::optional<Value> string_map(const toml::value& v, const std::string& key, const Origin& origin,
                                const std::map<std::string, Origin>& items, DiagnosticSink& sink) {
  std::map<std::string, std::string> out;
  for (const auto& [name, item] : v.as_table()) {
    const std::string item_key = key + "." + name;
    if (!item.is_string()) {
      sink.error(item_origin(items, name, origin), item_key,
                 std::string("environment values are strings, got ") + toml_type(item),
                 "quote the value");
      continue;
    }
    if (check_text(item.as_string().str, item_key, item_origin(items, name, origin), sink)) {
      out[name] = item.as_string().str;
    }
  }
  return Value(out);
}

// [sweep]: each key's non-empty list of values, as literals, sorted by key.
std::optional<Value> sweep_map(const toml::value& v, const std::string& key, const Origin& origin,
                               const std::map<std::string, Origin>& items, DiagnosticSink& sink) {
  SweepParams out;
  for (const auto& [name, item] : v.as_table()) {
    if (!item.is_array() || item.as_array().empty()) {
      sink.error(item_origin(items, name, origin), key + "." + quote(name),
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

}  // namespace

std::optional<Value> convert(const Field& f, const toml::value& v, const Origin& origin,
                             DiagnosticSink& sink, const std::map<std::string, Origin>& items) {
  const std::string key(f.path);
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
    case Type::kPathList:
      return path_list(f, v, key, origin, sink);
    case Type::kIntList:
      if (!v.is_array()) break;
      return int_list(v, key, origin, sink);
    case Type::kFloatList:
      if (!v.is_array()) break;
      return float_list(v, key, origin, sink);
    case Type::kStringMap:
      if (!v.is_table()) break;
      return string_map(v, key, origin, items, sink);
    case Type::kSweepMap:
      if (!v.is_table()) break;
      return sweep_map(v, key, origin, items, sink);
  }
  type_mismatch(f, v, key, origin, sink);
  return std::nullopt;
}

}  // namespace detail

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
