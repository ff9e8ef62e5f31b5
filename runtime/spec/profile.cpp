#include "spec/profile.hpp"

#include <regex>

#include "spec/internal.hpp"

namespace hpctrain::spec {

bool is_login_host(std::string_view host) {
  static const std::regex kHost(R"([A-Za-z0-9_.@:%\[\]][-A-Za-z0-9_.@:%\[\]]*)");
  return host.size() <= 255 && std::regex_match(host.begin(), host.end(), kHost);
}

namespace detail {

std::optional<std::string> take_login_host(Document& doc, DiagnosticSink& sink) {
  if (!doc.root.is_table()) return std::nullopt;
  auto& table = doc.root.as_table();
  const auto it = table.find(kLoginHostKey);
  if (it == table.end()) return std::nullopt;
  const toml::value value = it->second;
  table.erase(it);
  const Origin origin = doc.origin_of(value, kLoginHostKey);
  if (!value.is_string()) {
    sink.error(origin, kLoginHostKey, std::string("must be a string, not a ") + toml_type(value),
               kLoginHostRule);
    return std::nullopt;
  }
  const std::string host = value.as_string().str;
  if (!is_login_host(host)) {
    sink.error(origin, kLoginHostKey, quote(host) + " is not a login host", kLoginHostRule);
    return std::nullopt;
  }
  return host;
}

}  // namespace detail

std::optional<ProfileLoginHost> profile_login_host(const std::string& name,
                                                   const std::vector<std::filesystem::path>& dirs) {
  for (const auto& dir : dirs) {
    const std::filesystem::path candidate = dir / (name + ".toml");
    if (!std::filesystem::exists(candidate)) continue;
    Document doc = read_document(candidate);
    DiagnosticSink sink;
    const auto host = detail::take_login_host(doc, sink);
    if (sink.has_errors()) throw SpecError(sink.sorted());
    if (!host) return std::nullopt;
    return ProfileLoginHost{*host, candidate.string()};
  }
  return std::nullopt;
}

}  // namespace hpctrain::spec
