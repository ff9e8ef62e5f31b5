// Random job specs for the renderer's property test (hostile_specs_test.cpp): every free-text key
// (names, paths, environment values, modules, extra options, container image and mounts, data
// paths) gets a value mixing quotes, $(...), backticks, ';', globs, unicode and, now and then,
// text as long as the spec allows; keys with a character set get random text of that set. An
// accepted case keeps to what the spec accepts; a refused case breaks one rule of one key and
// says which key the error must name. Case I of seed S is the same on every machine and run.
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <variant>
#include <vector>

namespace hpctrain::render::hostile {

// One random stream per case, from (seed, case index) alone: a case is regenerated without the
// ones before it. Draws are by modulo, so they do not depend on the standard library.
class Rng {
 public:
  Rng(uint64_t seed, uint64_t index);
  uint64_t next() { return engine_(); }
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(engine_() % n); }
  bool chance(double p) { return static_cast<double>(engine_() >> 11) * 0x1p-53 < p; }
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }

 private:
  std::mt19937_64 engine_;
};

// A value written as TOML text as it is (numbers, booleans, a list of numbers).
struct Toml {
  std::string text;
  bool operator==(const Toml& o) const { return text == o.text; }
  bool operator!=(const Toml& o) const { return text != o.text; }
};
using Value =
    std::variant<std::string, std::vector<std::string>, std::map<std::string, std::string>, Toml>;

// One key of the spec file. `exact`: the loaded spec must hold the value as written (paths
// resolved against the spec's folder, {name} expanded); false for keys the spec rewrites
// (job.time) or that are not free text.
struct Entry {
  std::string key;
  Value value;
  bool exact = true;
};

struct Case {
  uint64_t seed = 0;
  size_t index = 0;
  std::vector<Entry> entries;
  // [sweep.params] in zip mode: each key's list, one value per array task.
  std::vector<Entry> sweep;
  // The spec file: [tables] in the order their keys first appear.
  std::string toml() const;
  const Entry* find(const std::string& key) const;
};

// A case the spec must refuse, and the key its error must name ("" for the file itself:
// invalid UTF-8 is refused before any key is read).
struct Refusal {
  Case spec;
  std::string key;
  std::string what;  // the rule broken, for the failure message
};

// `run_root`: an absolute folder every generated run_dir lies in (the test creates them).
Case accepted_case(uint64_t seed, size_t index, const std::string& run_root);
Refusal refused_case(uint64_t seed, size_t index, const std::string& run_root);

// A value as TOML text, as the spec file has it.
std::string toml_text(const Value& v);

// Keys whose relative paths the spec resolves against the spec file's folder.
bool is_resolved_path(const Case& c, const std::string& key);

}  // namespace hpctrain::render::hostile
