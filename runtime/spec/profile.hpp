// Site profiles as the machine a user submits from reads them: a profile's top-level login_host,
// the login node `hpctrain --host` runs on when neither --host nor HPCTRAIN_HOST names one
// (docs/quickstart.md). It is no spec key: the spec loader takes it out of a profile, checked,
// before the profile's keys are merged. Thread safety: reentrant.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hpctrain::spec {

inline constexpr const char* kLoginHostKey = "login_host";

// Whether `host` is a login host as hpctrain passes it to ssh: a ~/.ssh/config Host alias, a name
// or address, user@host; letters, digits and . _ - @ : % [ ], not starting with '-'. Nothing
// a shell or ssh's ProxyCommand (%h) would read as syntax, nothing ssh would read as an option.
bool is_login_host(std::string_view host);
// The rule above in words, for error messages.
inline constexpr const char* kLoginHostRule =
    "a host name or ~/.ssh/config Host alias (user@host allowed): letters, digits and . _ - @ : "
    "% [ ], not starting with '-'";

struct ProfileLoginHost {
  std::string host;
  std::string file;  // the profile it came from, for messages
};

// The login_host of site profile NAME (NAME.toml, the first of `dirs` that has one); nullopt when
// no such profile is found or it sets none. Throws SpecError naming the file, line and column when
// the profile cannot be read or its login_host is not a login host.
std::optional<ProfileLoginHost> profile_login_host(const std::string& name,
                                                   const std::vector<std::filesystem::path>& dirs);

}  // namespace hpctrain::spec
