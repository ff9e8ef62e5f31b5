// hpctrain-worker: started by srun once per rank with --spec FILE. Parses its options, runs the
// rank (worker/run.hpp) and maps what went wrong to an exit status (docs/runtime.md).
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>
#include <optional>
#include <string>

#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "spec/diagnostics.hpp"
#include "version.hpp"
#include "worker/out_of_memory.hpp"
#include "worker/run.hpp"

namespace {

// glibc serves blocks above its mmap threshold with fresh mappings and gives the heap's free top
// back to the kernel above its trim threshold. A training step frees and allocates the same
// activations every step, so each step page-faulted them in again: about 26,000 faults per step
// for CIFAR ResNet-20 at batch 128, a sixth of the step's CPU time (docs/runtime.md). Blocks up
// to 32 MiB (glibc's largest threshold) now come from the heap, and the heap keeps its peak.
// GLIBC_TUNABLES with malloc settings of the user's own take precedence.
void keep_freed_memory() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr) return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

// The rank's end line for the step supervisor's classifier (common/exit_codes.hpp): the cause
// only this rank knows, which srun's one exit status for all ranks would hide.
int ended(const char* cause, int status, const std::string& what) {
  std::cerr << hpctrain::rt::rank_prefix() << hpctrain::kWorkerEndMarker << cause
            << " (exit status " << status << "): " << what.substr(0, 300) << std::endl;
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace hpctrain;
  keep_freed_memory();
  CLI::App app{"hpctrain-worker: one rank of an hpctrain job (started by srun)"};
  app.set_version_flag("--version", std::string("hpctrain-worker ") + kVersion);
  worker::Options options;
  app.add_option("--spec", options.spec_file, "Frozen job spec (RUN_DIR/spec.toml)");
  app.add_flag("--describe-env", options.describe_env,
               "Print what the worker resolved from the environment as JSON and exit");
  app.add_flag("--selftest", options.selftest,
               "Join the group, check all-reduce and broadcast, print a bandwidth table");
  app.add_option("--selftest-max-bytes", options.selftest_max_bytes,
                 "Largest message of the table");
  app.add_option("--selftest-soak-s", options.selftest_soak_s,
                 "After the checks, keep all-reducing for this many seconds");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitBadInput;
  }
  try {
    return worker::run(options);
  } catch (const spec::SpecError& e) {
    std::cerr << rt::rank_prefix() << "bad spec:\n" << e.what();
    return ended("bad_input", kExitBadInput, "the spec");
  } catch (const rt::EnvError& e) {
    std::cerr << e.what() << '\n';
    return ended("bad_input", kExitBadInput, e.message());
  } catch (const rt::DatasetFormatError& e) {
    std::cerr << e.what() << '\n';
    return ended("bad_input", kExitBadInput, e.message());
  } catch (const rt::DivergedError& e) {
    std::cerr << e.what() << '\n';
    return ended("diverged", kExitDiverged, e.message());
  } catch (const std::bad_alloc& e) {
    std::cerr << rt::rank_prefix() << e.what() << '\n';
    return ended("oom", kExitFailure,
                 "std::bad_alloc: " +
                     worker::out_of_memory_text(false, std::nullopt, worker::memory_figures()));
  } catch (const rt::Error& e) {
    std::cerr << e.what() << '\n';  // already "[rank r/N host] file:line: ..."
    return kExitFailure;
  } catch (const std::exception& e) {
    std::cerr << rt::rank_prefix() << e.what() << '\n';  // libtorch's, say
    // libtorch's allocators throw c10::Error, not std::bad_alloc: the same end, with their size.
    if (worker::is_out_of_memory(e.what())) {
      return ended("oom", kExitFailure,
                   worker::out_of_memory_text(worker::is_device_out_of_memory(e.what()),
                                              worker::failed_allocation_bytes(e.what()),
                                              worker::memory_figures()));
    }
    return kExitFailure;
  }
}
