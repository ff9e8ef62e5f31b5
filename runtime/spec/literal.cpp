#include "spec/literal.hpp"

#include <charconv>
#include <cstdio>

namespace hpctrain::spec {

std::string literal_of(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"') {
      out += "\\\"";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string literal_of(bool b) { return b ? "true" : "false"; }

std::string literal_of(int64_t i) { return std::to_string(i); }

std::string literal_of(double d) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
  std::string out(buf, end);
  if (out.find_first_of(".eEn") == std::string::npos) out += ".0";  // keep it a TOML float
  return out;
}

template <typename T>
static std::string list_of(const std::vector<T>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + literal_of(v[i]);
  return out + "]";
}

std::string literal_of(const std::vector<std::string>& v) { return list_of(v); }
std::string literal_of(const std::vector<int64_t>& v) { return list_of(v); }
std::string literal_of(const std::vector<double>& v) { return list_of(v); }

std::string key_of(const std::string& key) {
  const bool bare = !key.empty() && key.find_first_not_of(
                                        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                        "0123456789_-") == std::string::npos;
  return bare ? key : literal_of(key);
}

std::string literal_of(const std::map<std::string, std::string>& m) {
  if (m.empty()) return "{}";
  std::string out = "{ ";
  bool first = true;
  for (const auto& [k, v] : m) {
    out += (first ? "" : ", ") + key_of(k) + " = " + literal_of(v);
    first = false;
  }
  return out + " }";
}

std::string literal_of(const toml::value& v) {
  switch (v.type()) {
    case toml::value_t::boolean:
      return literal_of(v.as_boolean());
    case toml::value_t::integer:
      return literal_of(static_cast<int64_t>(v.as_integer()));
    case toml::value_t::floating:
      return literal_of(v.as_floating());
    case toml::value_t::string:
      return literal_of(v.as_string().str);
    case toml::value_t::array: {
      std::string out = "[";
      const auto& a = v.as_array();
      for (size_t i = 0; i < a.size(); ++i) out += (i ? ", " : "") + literal_of(a[i]);
      return out + "]";
    }
    case toml::value_t::table: {
      std::map<std::string, std::string> sorted;
      for (const auto& [k, item] : v.as_table()) sorted[k] = literal_of(item);
      if (sorted.empty()) return "{}";
      std::string out = "{ ";
      bool first = true;
      for (const auto& [k, lit] : sorted) {
        out += (first ? "" : ", ") + key_of(k) + " = " + lit;
        first = false;
      }
      return out + " }";
    }
    default:
      return toml::format(v);
  }
}

}  // namespace hpctrain::spec
