// The job spec's schema: one row per key with its type, default, constraints and documentation.
// Parsing, validation, freezing and the docs check all read this one table.
// Thread safety: immutable after static initialisation.
#pragma once

#include <limits>
#include <string_view>
#include <vector>

namespace hpctrain::spec {

enum class Type {
  kString,
  kInt,
  kFloat,
  kBool,
  kStringList,
  kIntList,
  kFloatList,
  kStringMap,  // a table of string values (job.env)
  kPathList,   // a string or a list of strings (data.train / data.val)
  kSweepMap,   // a table of dotted key -> list of values (sweep.params)
};

enum class Presence { kRequired, kOptional, kDefault };

// Character classes for strings that reach the sbatch script unquoted (#SBATCH lines) or that
// name things; free-form strings only need to be valid UTF-8 without control characters.
enum class Charset {
  kFree,
  kName,        // [A-Za-z0-9._-], starts alphanumeric: job names, accounts, partitions, qos
  kModule,      // [A-Za-z0-9._+/@-], not starting with '-': module names
  kPath,        // [A-Za-z0-9._+@,=:/~-] and {name}: paths that appear in #SBATCH lines
  kConstraint,  // [A-Za-z0-9_.&|,()*!:[]-]: Slurm feature expressions
  kMemory,      // digits with an optional K/M/G/T suffix
  kHostlist,    // [A-Za-z0-9._,[]-]: Slurm host lists, node[01-04],gpu7
  kSlurmWord,   // [A-Za-z0-9._:,?+@%-]: dependency lists, begin times, mail addresses
};

struct Field {
  std::string_view path;  // dotted key, e.g. "job.nodes"
  Type type;
  Presence presence;
  std::string_view default_toml;  // TOML text of the default when presence is kDefault
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  std::string_view choices;  // "a|b|c" for enumerations, empty otherwise
  Charset charset = Charset::kFree;
  std::string_view doc;
};

// Tables that may appear in a spec, in the order the frozen spec writes them.
const std::vector<std::string_view>& tables();
// Every key, in the order the frozen spec and the docs list them.
const std::vector<Field>& fields();
// The field for a dotted path, or nullptr.
const Field* find_field(std::string_view path);
bool is_table(std::string_view path);
// Human name of a type ("integer", "list of strings", ...).
std::string_view type_name(Type type);

// Closest known key to `path` for "did you mean": same parent first, then any key with the same
// last component, then the closest full path. Empty when nothing is close enough.
std::string suggest_key(std::string_view path);

// Edit distance (insert, delete, substitute, transpose adjacent).
size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace hpctrain::spec
