// hpctrain-worker: started by srun once per rank with --spec FILE. Finds its place in the job from
// the environment, joins the process group and runs the job. Exit statuses: 0 done, 1 failure,
// 2 bad spec or environment, 75 "requeue me" (the sbatch script requeues the job).
#include <unistd.h>

#include <csignal>

#include <c10/util/Logging.h>
#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "dist/process_group.hpp"
#include "dist/signals.hpp"
#include "dist/world.hpp"
#include "spec/spec.hpp"
#include "worker/device.hpp"
#include "worker/selftest.hpp"

namespace {

using namespace hpctrain;

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

std::string host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

struct Args {
  std::string spec_file;
  bool describe_env = false;
  bool selftest = false;
  int64_t selftest_max_bytes = 64 << 20;
  double selftest_soak_s = 0;
};

spec::Spec load_spec(const std::string& file) {
  spec::LoadOptions o;
  o.spec_file = file;
  o.check_paths = false;  // the frozen spec was checked at submit time
  return spec::load(o).spec;
}

int run(const Args& args) {
  // libtorch logs c10d warnings with a C++ stack trace each; on hundreds of ranks that buries the
  // one line that matters (ours, which names rank, host and cause). Errors only, unless asked.
  if (!std::getenv("TORCH_CPP_LOG_LEVEL")) FLAGS_caffe2_log_level = 2;
  // The stop signals first: before any backend starts and may install handlers of its own.
  std::optional<spec::Spec> spec;
  if (!args.spec_file.empty()) spec = load_spec(args.spec_file);
  const std::string signal_name = spec ? spec->preemption.signal : "USR2";
  dist::install_stop_signals({dist::signal_number(signal_name), SIGTERM});

  const auto env = dist::current_environment();
  const std::string host = host_name();
  const dist::WorldInfo world = dist::detect_world(env, host);
  rt::set_rank_context(world.rank, world.world_size, host);

#ifdef HPCTRAIN_WITH_NCCL
  const bool cuda = worker::cuda_available();
#else
  const bool cuda = false;  // a CPU build: Gloo even where libtorch could see a GPU
#endif
  const std::string backend = cuda ? "nccl" : "gloo";
  if (args.describe_env) {
    auto j = nlohmann::json::parse(dist::to_json(world));
    const auto plan = dist::plan_rendezvous(world, env);
    j["rendezvous"] = {{"method", plan.method},
                       {"host", plan.host},
                       {"port", plan.port},
                       {"port_source", plan.port_source},
                       {"agent_store", plan.agent_store}};
    j["backend"] = backend;
    j["device"] = cuda ? worker::describe_device(world.local_rank, env) : std::string("cpu");
    if (spec) j["spec_world_size"] = spec->job.world_size();
    std::cout << j.dump() << std::endl;
    return 0;
  }
  if (spec && world.source != dist::EnvSource::kSingle &&
      spec->job.world_size() != world.world_size) {
    HPCTRAIN_THROW(rt::Error, "the spec asks for " + std::to_string(spec->job.world_size()) +
                                  " ranks (nodes x tasks_per_node) but the job has " +
                                  std::to_string(world.world_size));
  }

  dist::JoinOptions join;
  if (spec) {
    join.rendezvous_timeout = std::chrono::seconds(spec->train.rendezvous_timeout_s);
    join.collective_timeout = std::chrono::seconds(spec->train.collective_timeout_s);
  }
  join.backend = backend;
  if (cuda) join.cuda_device = worker::bind_device(world.local_rank, env);
  auto group = dist::join(world, env, join);
  // NCCL has taken SIGUSR1 before: make sure our handlers survived the backend's start.
  dist::verify_stop_signals();

  if (args.selftest) {
    worker::SelftestOptions o;
    o.max_bytes = args.selftest_max_bytes;
    o.soak_seconds = args.selftest_soak_s;
    const int failures = worker::run_selftest(group->communicator(), o, std::cout);
    return failures == 0 ? 0 : kExitFailure;
  }
  std::cerr << rt::rank_prefix()
            << "joined the process group; training arrives with the training runtime, use "
               "--selftest or --describe-env\n";
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hpctrain-worker: one rank of an hpctrain job (started by srun)"};
  Args args;
  app.add_option("--spec", args.spec_file, "Frozen job spec (RUN_DIR/spec.toml)");
  app.add_flag("--describe-env", args.describe_env,
               "Print what the worker resolved from the environment as JSON and exit");
  app.add_flag("--selftest", args.selftest,
               "Join the group, check all-reduce and broadcast, print a bandwidth table");
  app.add_option("--selftest-max-bytes", args.selftest_max_bytes, "Largest message of the table");
  app.add_option("--selftest-soak-s", args.selftest_soak_s,
                 "After the checks, keep all-reducing for this many seconds");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }
  try {
    return run(args);
  } catch (const spec::SpecError& e) {
    std::cerr << rt::rank_prefix() << "bad spec:\n" << e.what();
    return kExitUsage;
  } catch (const dist::EnvError& e) {
    std::cerr << rt::rank_prefix() << "bad launch environment: " << e.what() << '\n';
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << e.what() << '\n';
    return kExitFailure;
  }
}
