// Canonical TOML literals for the frozen spec: one spelling per value, so equal specs freeze to
// identical bytes (floats in their shortest round-trip form, strings as basic strings).
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <toml.hpp>

namespace hpctrain::spec {

std::string literal_of(const std::string& s);
std::string literal_of(bool b);
std::string literal_of(int64_t i);
std::string literal_of(double d);
std::string literal_of(const std::vector<std::string>& v);
std::string literal_of(const std::vector<int64_t>& v);
std::string literal_of(const std::vector<double>& v);
std::string literal_of(const std::map<std::string, std::string>& m);
std::string literal_of(const toml::value& v);

// A bare key when it can be one, else a quoted key.
std::string key_of(const std::string& key);

}  // namespace hpctrain::spec
