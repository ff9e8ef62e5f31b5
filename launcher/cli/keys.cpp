// hpctrain keys [--markdown]: every spec key with its type, default and meaning.
#include <iostream>
#include <memory>

#include "cli/common.hpp"
#include "spec/schema.hpp"

namespace hpctrain::cli {

void add_keys(CLI::App& app) {
  auto markdown = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("keys", "List every job spec key");
  cmd->add_flag("--markdown", *markdown, "As the Markdown table of docs/job-spec.md");
  cmd->callback([markdown] {
    if (*markdown) {
      std::cout << "| key | type | default | meaning |\n|---|---|---|---|\n";
    }
    for (const auto& f : spec::fields()) {
      std::string def = f.presence == spec::Presence::kRequired   ? "required"
                        : f.presence == spec::Presence::kOptional ? "unset"
                                                                  : std::string(f.default_toml);
      std::string type(spec::type_name(f.type));
      if (!f.choices.empty()) type = "one of " + std::string(f.choices);
      if (*markdown) {
        std::string choices = type;
        for (auto& c : choices) {
          if (c == '|') c = '/';
        }
        std::cout << "| `" << f.path << "` | " << choices << " | `" << def << "` | " << f.doc
                  << " |\n";
      } else {
        std::cout << f.path << " (" << type << ", " << def << ")\n    " << f.doc << '\n';
      }
    }
  });
}

}  // namespace hpctrain::cli
