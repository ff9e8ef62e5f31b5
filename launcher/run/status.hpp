// What `hpctrain status` says of a run (or array task) directory, read from the directory alone:
// attempts and restarts, node losses and how the run went on, the last committed checkpoint, the
// latest metrics and the loss trend (run/trend.hpp). The Slurm state is the caller's.
// Thread safety: functions are reentrant.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

namespace hpctrain::run {

// One JSON object (docs/run-directory.md names the fields status --json prints).
nlohmann::json describe_run_dir(const std::filesystem::path& dir);

// describe_run_dir's object as status prints it, each line after `indent`.
void print_run_dir(std::ostream& out, const nlohmann::json& d, const std::string& indent);

}  // namespace hpctrain::run
