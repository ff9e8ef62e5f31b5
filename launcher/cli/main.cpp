// hpctrain: the launcher. Each subcommand lives in its own file; this one maps errors to exit
// statuses (0 ok, 1 Slurm or filesystem failure, 2 spec or usage error).
#include <iostream>

#include "cli/common.hpp"
#include "run/run_dir.hpp"
#include "slurm/client.hpp"
#include "version.hpp"

int main(int argc, char** argv) {
  using namespace hpctrain;
  using namespace hpctrain::cli;
  CLI::App app{"hpctrain: train image classifiers data-parallel on Slurm"};
  app.set_version_flag("--version", std::string("hpctrain ") + hpctrain::kVersion);
  app.require_subcommand(1);
  add_remote_options(app);
  add_init(app);
  add_check(app);
  add_render(app);
  add_submit(app);
  add_status(app);
  add_cancel(app);
  add_keys(app);
  add_report(app);
  add_list(app);
  add_logs(app);
  add_supervise(app);
  add_drill(app);
  add_track(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitBadInput;
  } catch (const Exit& e) {
    std::cerr << e.what();
    if (!std::string(e.what()).empty() && std::string(e.what()).back() != '\n') std::cerr << '\n';
    return e.status();
  } catch (const hpctrain::slurm::SlurmError& e) {
    std::cerr << "hpctrain: slurm: " << e.what() << '\n';
    return kExitFailure;
  } catch (const hpctrain::run::RunDirError& e) {
    std::cerr << "hpctrain: " << e.what() << '\n';
    return kExitFailure;
  } catch (const std::exception& e) {
    std::cerr << "hpctrain: " << e.what() << '\n';
    return kExitFailure;
  }
  return kExitOk;
}
