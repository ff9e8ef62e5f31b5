// Stage 7: a resolved Spec written back as canonical TOML, every present key in schema order, its
// text derived from the typed member (keys.hpp) so the frozen spec cannot disagree with the Spec.
#include <sstream>
#include <type_traits>

#include "spec/keys.hpp"
#include "spec/literal.hpp"
#include "spec/schema.hpp"
#include "spec/spec.hpp"

namespace hpctrain::spec {
namespace {

using SweepParams = std::vector<std::pair<std::string, std::vector<std::string>>>;

std::string literal(const SweepParams& params) {
  std::string out = "{ ";
  bool first = true;
  for (const auto& [key, values] : params) {
    out += (first ? "" : ", ") + literal_of(toml::value(key)) + " = [";
    for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + values[i];
    out += "]";
    first = false;
  }
  return out + " }";
}

template <typename T>
std::string literal(const T& value) {
  if constexpr (std::is_enum_v<T>) {
    return literal_of(std::string(name_of(value)));
  } else {
    return literal_of(value);
  }
}

// The text of a member, or nullopt for an absent optional key (nullopt, or an empty list for the
// optional list keys data.train, data.val and sweep.params).
template <typename T>
std::optional<std::string> text_of(const Field& f, const T& value) {
  if constexpr (IsOptional<T>::value) {
    if (!value) return std::nullopt;
    return literal(*value);
  } else if constexpr (std::is_same_v<T, std::vector<std::string>> ||
                       std::is_same_v<T, SweepParams>) {
    if (f.presence == Presence::kOptional && value.empty()) return std::nullopt;
    return literal(value);
  } else {
    return literal(value);
  }
}

}  // namespace

std::vector<std::pair<std::string, std::string>> frozen_values(const Spec& spec) {
  std::vector<std::pair<std::string, std::string>> out;
  for_each_key(spec, [&](std::string_view key, const auto& member) {
    // The profile is already merged in; the frozen spec stands alone and names it in a comment.
    if (key == "job.profile") return;
    if (auto text = text_of(*find_field(key), member)) out.emplace_back(key, *text);
  });
  return out;
}

std::string freeze(const Spec& spec) {
  std::map<std::string_view, std::string> texts;
  const auto values = frozen_values(spec);
  for (const auto& [key, text] : values) texts[key] = text;
  std::ostringstream out;
  out << "# Resolved job spec, frozen by hpctrain: the job reads this file. Do not edit;\n"
         "# change the source spec and submit again.\n";
  if (spec.job.profile) out << "# Site profile merged in: " << *spec.job.profile << '\n';
  for (const auto& table : tables()) {
    bool header = false;
    for (const auto& f : fields()) {
      const auto dot = f.path.rfind('.');
      if (f.path.substr(0, dot) != table) continue;
      auto it = texts.find(f.path);
      if (it == texts.end()) continue;
      if (!header) {
        out << "\n[" << table << "]\n";
        header = true;
      }
      out << f.path.substr(dot + 1) << " = " << it->second << '\n';
    }
  }
  return out.str();
}

}  // namespace hpctrain::spec
