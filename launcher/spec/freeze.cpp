#include <sstream>

#include "spec/schema.hpp"
#include "spec/spec.hpp"

namespace hpctrain::spec {

std::string freeze(const Spec& spec) {
  std::ostringstream out;
  out << "# Resolved job spec, frozen by hpctrain: the job reads this file. Do not edit;\n"
         "# change the source spec and submit again.\n";
  if (spec.job.profile) out << "# Site profile merged in: " << *spec.job.profile << '\n';
  for (const auto& table : tables()) {
    bool header = false;
    for (const auto& f : fields()) {
      const auto dot = f.path.rfind('.');
      if (f.path.substr(0, dot) != table) continue;
      auto it = spec.literals.find(std::string(f.path));
      if (it == spec.literals.end()) continue;
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
